"""The attrs model of a plan file, and the pure graph decisions over it (spec/plan.md).

A :class:`Plan` is what :func:`murmur.plan.planfile.load_plan` returns after validation: steps
in file order, each with exactly one action, its dependencies, condition, error policy and
retry count, and the declared output template. The graph helpers (:func:`ancestors`,
:func:`cycle`, :func:`ready_steps`) read no clock and do no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping

import attrs

from murmur.plan.condition import Condition
from murmur.plan.template import Template

__all__ = [
    "Action",
    "CapsuleAction",
    "MemberAction",
    "OnError",
    "Plan",
    "ShellAction",
    "Step",
    "TemplateAction",
    "WriteAction",
    "ancestors",
    "cycle",
    "ready_steps",
]


class OnError(enum.Enum):
    """What a step's failure (after its retries) does to the task."""

    FAIL = "fail"  # the task fails; running steps are cancelled
    CONTINUE = "continue"  # recorded; dependants still run


@attrs.frozen
class ShellAction:
    """``shell: [bin, arg, …]``: one command; ``argv[0]`` is a literal allowlisted name.

    ``ok_exit_codes`` are the exit codes that count as success (default ``(0,)``; e.g.
    ``[0, 1]`` for ``grep``, which exits 1 when nothing matches).
    """

    argv: tuple[Template, ...]
    ok_exit_codes: tuple[int, ...] = (0,)

    @property
    def binary(self) -> str:
        """The bare binary name."""
        return self.argv[0].source


@attrs.frozen
class CapsuleAction:
    """``capsule: NAME`` + ``version: V`` + ``task: TEMPLATE``: delegate and wait."""

    capsule: str
    version: str
    task: Template


@attrs.frozen
class MemberAction:
    """``member: NAME`` + ``task: TEMPLATE``: call a formation member and wait."""

    member: str
    task: Template


@attrs.frozen
class TemplateAction:
    """``template: TEXT``: render text (a report, a message) without any binary."""

    text: Template


@attrs.frozen
class WriteAction:
    """``write: {path: P, content: C}``: render C and write it to P inside the workdir."""

    path: Template
    content: Template


Action = ShellAction | CapsuleAction | MemberAction | TemplateAction | WriteAction

KINDS: dict[type, str] = {
    ShellAction: "shell",
    CapsuleAction: "capsule",
    MemberAction: "member",
    TemplateAction: "template",
    WriteAction: "write",
}


@attrs.frozen
class Step:
    """One plan step.

    Attributes:
        id (str): unique within the plan.
        action (Action): what the step does.
        depends_on (tuple[str, ...]): ids that must finish first.
        condition (Condition | None): ``if``; a false condition skips the step.
        on_error (OnError): ``fail`` (default) or ``continue``.
        retries (int): extra attempts after a failure (0 = one attempt).
        timeout (float | None): seconds per attempt; None = unbounded.
        line (int | None): 1-based line of the step in the plan file.
    """

    id: str
    action: Action
    depends_on: tuple[str, ...] = ()
    condition: Condition | None = None
    on_error: OnError = OnError.FAIL
    retries: int = 0
    timeout: float | None = None
    line: int | None = None

    @property
    def kind(self) -> str:
        """``shell`` | ``capsule`` | ``member`` | ``template`` | ``write``."""
        return KINDS[type(self.action)]

    def templates(self) -> Iterable[Template]:
        """Every template of the action (not the condition)."""
        a = self.action
        if isinstance(a, ShellAction):
            return a.argv
        if isinstance(a, (CapsuleAction, MemberAction)):
            return (a.task,)
        if isinstance(a, TemplateAction):
            return (a.text,)
        return (a.path, a.content)

    @property
    def reads(self) -> frozenset[str]:
        """Ids of steps the action's templates and the condition read."""
        found: frozenset[str] = frozenset()
        for t in self.templates():
            found |= t.steps
        if self.condition is not None:
            found |= self.condition.steps
        return found


@attrs.frozen
class Plan:
    """A validated plan.

    Attributes:
        steps (tuple[Step, ...]): in file order.
        output (Template): the task's answer.
        path (str): the plan file, for messages.
    """

    steps: tuple[Step, ...]
    output: Template
    path: str = "plan.yaml"

    def step(self, step_id: str) -> Step:
        """The step with that id (KeyError if none)."""
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)


def ancestors(deps: Mapping[str, Collection[str]], step_id: str) -> frozenset[str]:
    """Every step ``step_id`` depends on, directly or transitively (unknown ids ignored)."""
    seen: set[str] = set()
    todo = list(deps.get(step_id, ()))
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.add(cur)
        todo.extend(deps.get(cur, ()))
    return frozenset(seen)


def cycle(deps: Mapping[str, Collection[str]]) -> list[str] | None:
    """One dependency cycle as a list of ids in order (first id repeated last), or None.

    Args:
        deps (Mapping[str, Collection[str]]): step id -> ids it depends on, in file order.
    """
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in deps.get(node, ()):
            if nxt not in deps:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in deps:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def ready_steps(plan: Plan, finished: Collection[str], started: Collection[str]) -> list[Step]:
    """Steps not yet started whose dependencies have all finished, in file order (pure).

    Args:
        plan (Plan): the plan.
        finished (Collection[str]): ids that finished (any status, skipped included).
        started (Collection[str]): ids already started (running or finished).
    """
    return [
        s
        for s in plan.steps
        if s.id not in started and all(d in finished for d in s.depends_on)
    ]
