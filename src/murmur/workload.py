"""The workload port: the seam between a session and its workload (a plan or an agent loop).

The session's task runner builds a :class:`TaskContext` per task and awaits
``workload.run_task(ctx)`` inside the task's own cancel scope. Cancellation (CancelTask,
wind-down, deadline) arrives as ``trio.Cancelled``; a workload must leave nothing running
(kill its process groups) and re-raise. Delegation and formation calls reach the workload
through :class:`TaskServices`, whose members are ``None`` when the grant does not exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from murmur.errors import MurmurError
from murmur.manifest import Manifest


class CommandStarter(Protocol):
    """The session's warm starter as a shell step reaches it: ``murmur.procs.CommandStarter``
    (the same shape; the process it returns is ``murmur.procs``' to type)."""

    async def exec_into(self, argv: list[str], executable: str, env: dict[str, str], cwd: str,
                        fds: list[tuple[int, int]], *, session: bool, cgroup: str,
                        confinement: dict[str, Any] | None) -> Any:
        """The started process, or None (start it another way)."""


class DeniedBinaryFn(Protocol):
    """The denied-binary message for ``binary`` (spec/routing.md "When a capsule is refused a
    binary"); ``kernel``: the sandbox refused the ``exec`` (the ``[sandbox]`` wording)."""

    def __call__(self, binary: str, *, kernel: bool = False) -> str: ...


class TraceSink(Protocol):
    """Appends one record to ``trace.jsonl`` and returns its ``evt_`` id."""

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str: ...


@attrs.frozen
class TaskOutcome:
    """How a task ended, as the workload saw it.

    Attributes:
        status (str): ``ok`` | ``failed`` | ``max_turns_reached`` |
            ``spend_ceiling_reached`` | ``no_answer``.
        answer (str): the text answer (``ok``) or the failure message (otherwise).
    """

    status: str
    answer: str


# Services a workload may call; each is None when its grant does not exist.
# delegate(capsule, version, task_text, wait) -> mapping with the delegate-task result fields
DelegateFn = Callable[[str, str, str, bool], Awaitable[Mapping[str, object]]]
# call_member(member, task_text) -> mapping with the call-member result fields
CallMemberFn = Callable[[str, str], Awaitable[Mapping[str, object]]]
# peer_route(member) -> (door URL, headers the edge attaches) or None: components' virtual peers
PeerRouteFn = Callable[[str], Awaitable["tuple[str, Mapping[str, str]] | None"]]
# member_answer(call_id) -> waits until that call ended; mapping with at least
# {call_id, member, status, output} (status: completed | failed | canceled | rejected |
# timed_out | unreachable | abandoned | no_answer; output: the member's answer text, cut at 64 KiB)
MemberAnswerFn = Callable[[str], Awaitable[Mapping[str, object]]]


@attrs.define
class TaskServices:
    """Runtime services for one task (spec/agent.md, "Services").

    Attributes:
        delegate: ``delegate-task``; None without ``capabilities.spawn.allow``.
        call_member: ``call-member``; None without a reachability edge.
        member_answer: waits for a call-member answer; None without a reachability edge.
        callees: member names this member may call, in roster order.
        entry_member: true for the formation's entry member (``end-without-answer`` refused).
        denied_binary: the refusal for a binary outside ``capabilities.shell.allow``, naming
            the ready routes (``murmur.routing``); None outside a formation.
        spawn: the session's effective spawn set (spec/tree.md); None means the manifest's.
        peer_route: ``await peer_route(member)`` → (the callee's door URL, the headers its
            edge attaches: token, origin ``peer``, the task's trust), or None when no URL
            arrived within 10 s; used by components' virtual peer addresses (spec/components.md).
        emit_chunk: ``emit_chunk(text, thinking, source)`` streams a component's chunk on the
            task's A2A stream (spec/door.md "Chunks"); None when the task has no stream.
        starter: the session's warm starter for shell steps' commands (a session that
            delegates has one: :meth:`murmur.delegation.parent.Launcher.commands`); it clones
            each command straight into its unit (:func:`murmur.procs.open_process`); None: exec.
    """

    delegate: DelegateFn | None = None
    call_member: CallMemberFn | None = None
    callees: tuple[str, ...] = ()
    member_answer: MemberAnswerFn | None = None
    entry_member: bool = False
    denied_binary: DeniedBinaryFn | None = None
    spawn: tuple[str, ...] | None = None
    peer_route: PeerRouteFn | None = None
    emit_chunk: Callable[[str, bool, str], None] | None = None
    starter: CommandStarter | None = None


@attrs.define
class Usage:
    """Counters a workload adds to while a task runs (all start at 0).

    The session creates one per task (``TaskContext.usage``), reads it for ``task_end``
    after the task ends however it ends (cancellation included), and sums them into the
    ``session_end`` totals.
    """

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    shell_calls: int = 0


NO_INPUT = "request-input is not available outside an A2A task context"


class InputUnavailable(MurmurError):
    """``request_input`` outside an A2A task (a ``--task`` run, the idle run): nobody can answer."""


class InputTimeout(MurmurError):
    """No answer came within ``lifecycle.input_timeout_secs``; the task has already failed
    ``input-timeout`` and is being cancelled."""


# ask(prompt) -> the answer; suspends the task as input-required (spec/conversations.md)
AskFn = Callable[[str], Awaitable[str]]


@attrs.define
class TaskContext:
    """Everything a workload needs to run one task.

    Attributes:
        session_id (str): ``ses_…``.
        task_id (str): ``tsk_…``.
        context_id (str): ``ctx_…``.
        text (str): the task text (first text part(s) of the message, joined).
        origin (str): ``user`` | ``peer`` | ``event`` | ``completion`` | ``system``.
        trust (str): ``trusted`` | ``untrusted``.
        manifest (Manifest): the running capsule's manifest.
        capsule_root (Path): directory holding the capsule's files (plan file etc.).
        workdir (Path): the accessible workdir (shell cwd).
        records_dir (Path): this session's records directory.
        trace (TraceSink): the session's trace.
        task_event_id (str): the ``evt_`` id of this task's ``task_start`` (parent of its records).
        shell_env (Mapping[str, str]): the reduced environment shell commands get.
        services (TaskServices): delegation / formation calls.
        usage (Usage): counters the workload adds to (turns, tokens, tool and shell calls).
        formation_id (str | None): ``frm_…`` when the session is a formation member
            (plans read it as ``{{ formation_id }}``).
        links_context (Path | None): the session's ``mur context`` file (``links/context.md``)
            when its effective spawn set is non-empty; None otherwise (spec/links.md).
        ask (AskFn | None): the session's side of :meth:`request_input`; None when nobody
            can answer (not an A2A task).
        delegation_bound_secs (int): the session's delegation bound (a plan ``capsule`` or
            ``member`` step waits at most this long); by default the manifest's
            ``lifecycle.delegation_deadline_secs``.
    """

    session_id: str
    task_id: str
    context_id: str
    text: str
    origin: str
    trust: str
    manifest: Manifest
    capsule_root: Path
    workdir: Path
    records_dir: Path
    trace: TraceSink
    task_event_id: str
    shell_env: Mapping[str, str]
    services: TaskServices = attrs.field(factory=TaskServices)
    usage: Usage = attrs.field(factory=Usage)
    formation_id: str | None = None
    links_context: Path | None = None
    ask: AskFn | None = attrs.field(default=None, repr=False)
    delegation_bound_secs: int = attrs.field(
        default=attrs.Factory(lambda self: int(self.manifest.lifecycle.delegation_deadline_secs), takes_self=True))

    async def request_input(self, prompt: str) -> str:
        """Ask the task's user ``prompt`` and wait for the answer (spec/conversations.md).

        The task is ``input-required`` with a ``prompt`` artifact until a ``SendMessage``
        naming its ``taskId`` answers; then it is ``working`` again and the answer's text is
        returned. This is the one seam a tool's ``request-input`` import calls.

        Raises:
            InputUnavailable: not an A2A task (nobody can answer).
            InputTimeout: ``lifecycle.input_timeout_secs`` passed; the task has failed.
            trio.Cancelled: CancelTask or wind-down while waiting.
        """
        if self.ask is None:
            raise InputUnavailable(NO_INPUT)
        return await self.ask(prompt)


# -- capsule links: the ``mur context`` text a workload hands its model (spec/links.md) ----------

CONTEXT_ENV = "MURMUR_CONTEXT_FILE"
"""The variable a ``transport: process`` harness finds the ``mur context`` file by."""
CONTEXT_LIMIT = 65536  # bytes of the context file read into a system prompt


def context_file_for(ctx: TaskContext) -> Path | None:
    """The ``mur context`` file of ``ctx``'s session, or None when it delegates to nothing.

    Set only for a session whose effective spawn set is non-empty (its links are installed).
    """
    return ctx.links_context


def context_for_prompt(ctx: TaskContext) -> str | None:
    """The ``mur context`` text for an agent's system prompt, or None (no links, or unreadable)."""
    path = context_file_for(ctx)
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            text = f.read(CONTEXT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None
    return text.strip() or None


def with_context(system: str | None, context: str | None) -> str | None:
    """The system prompt with the ``mur context`` text after it (pure).

    Returns ``system`` unchanged without a context; the context alone without a system prompt.
    """
    if not context:
        return system
    return f"{system}\n\n{context}" if system else context


def harness_env(ctx: TaskContext) -> Mapping[str, str]:
    """The environment a ``transport: process`` harness runs with: ``ctx.shell_env`` plus
    :data:`CONTEXT_ENV` naming the ``mur context`` file when the session has links."""
    path = context_file_for(ctx)
    if path is None:
        return ctx.shell_env
    return {**ctx.shell_env, CONTEXT_ENV: str(path)}


class Workload(Protocol):
    """A plan executor or an agent loop."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome: ...
