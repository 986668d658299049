"""Running a plan for one task: the plan workload (spec/plan.md, "Running").

The steps form a DAG. Every step whose dependencies have finished starts at once, in a
nursery of its own task; so independent steps run concurrently. A step that fails under
``on_error: fail`` fails the task and cancels every running step (each shell command's
process group is killed). Cancelling the task (``CancelTask``, wind-down, deadline) does
the same and re-raises ``trio.Cancelled``. When every step has finished, the ``output``
template is the answer.

Trace records (parent: the task's ``task_start``): one ``shell`` record per command, one
``plan_step`` record per attempt (and per skipped or cancelled step).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path

import attrs
import trio

from murmur.errors import MurmurError
from murmur.grants import denied_binary
from murmur.plan.condition import ConditionError
from murmur.plan.planfile import write_path_problem
from murmur.plan.steps import (
    CapsuleAction,
    MemberAction,
    OnError,
    Plan,
    ShellAction,
    Step,
    TemplateAction,
    WriteAction,
    ready_steps,
)
from murmur.plan.template import Scope, StepView
from murmur.shell import ShellRefused, run_shell
from murmur.workload import TaskContext, TaskOutcome

__all__ = ["PlanWorkload", "StepResult"]

OK = "ok"
FAILED = "failed"
TIMED_OUT = "timed_out"
SKIPPED = "skipped"
CANCELED = "canceled"

_SUCCESS = frozenset({"completed", "ok"})
_REASON_TAIL = 500


@attrs.frozen
class StepResult:
    """How one step ended.

    Attributes:
        status (str): ``ok`` | ``failed`` | ``timed_out`` | ``skipped``.
        output (str): the step's output (see spec/plan.md, "Step values").
        stdout (str): shell stdout (trailing newlines removed); other kinds: ``output``.
        stderr (str): shell stderr (trailing newlines removed); other kinds: ''.
        exit_code (int | None): shell exit code; other kinds 0 (ok) / 1 (failed); None when
            the step did not run.
        reason (str | None): why it failed or timed out.
        attempts (int): attempts made (0 when skipped).
    """

    status: str
    output: str = ""
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    reason: str | None = None
    attempts: int = 0

    @property
    def succeeded(self) -> bool:
        """True for ``ok``."""
        return self.status == OK

    def view(self) -> StepView:
        """What templates see of this result."""
        code = "" if self.exit_code is None else str(self.exit_code)
        return StepView(self.stdout, self.stderr, code, self.output, self.status)


class _StepFailed(Exception):
    """One attempt failed; carries the partial result."""

    def __init__(self, result: StepResult) -> None:
        self.result = result
        super().__init__(result.reason or result.status)


def _chomp(text: str) -> str:
    """Trailing newlines removed, as shell command substitution does."""
    return text.rstrip("\r\n")


def _tail(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    last = text.splitlines()[-1]
    return last if len(last) <= _REASON_TAIL else last[:_REASON_TAIL] + "…"


class PlanWorkload:
    """The plan workload: runs a validated :class:`Plan` for each task.

    Implements :class:`murmur.workload.Workload`.

    Args:
        plan (Plan): from :func:`murmur.plan.planfile.load_plan` (validated at session start).
        capsule_root (Path): the capsule's directory (kept for steps reading capsule files).
    """

    def __init__(self, plan: Plan, capsule_root: Path) -> None:
        self.plan = plan
        self.capsule_root = capsule_root

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Run every step for ``ctx`` and render the answer.

        Returns:
            TaskOutcome: ``ok`` with the rendered ``output``; ``failed`` with
            ``plan step `ID` failed: REASON`` when a step under ``on_error: fail`` failed.

        Raises:
            trio.Cancelled: the task was cancelled; every step is cancelled and every shell
                process group killed before it propagates.
        """
        run = _PlanRun(self.plan, ctx)
        failure = await run.execute()
        if failure is not None:
            step_id, result = failure
            return TaskOutcome(FAILED, f"plan step `{step_id}` failed: {result.reason or result.status}")
        return TaskOutcome(OK, self.plan.output.render(run.scope()))


class _PlanRun:
    """The state of one task's plan run."""

    def __init__(self, plan: Plan, ctx: TaskContext) -> None:
        self.plan = plan
        self.ctx = ctx
        self.results: dict[str, StepResult] = {}

    def scope(self) -> Scope:
        """Template scope over the steps finished so far."""
        views: Mapping[str, StepView] = {k: v.view() for k, v in self.results.items()}
        return Scope(
            task=self.ctx.text,
            workdir=str(self.ctx.workdir),
            steps=views,
            session_id=self.ctx.session_id,
            formation_id=self.ctx.formation_id or "",
        )

    async def execute(self) -> tuple[str, StepResult] | None:
        """Run the DAG; return the failing (step id, result) under ``on_error: fail``."""
        send, receive = trio.open_memory_channel[tuple[str, StepResult]](math.inf)
        started: set[str] = set()
        failure: tuple[str, StepResult] | None = None
        async with trio.open_nursery() as nursery:

            def launch() -> None:
                for step in ready_steps(self.plan, self.results.keys(), started):
                    started.add(step.id)
                    nursery.start_soon(self._run_step, step, send)

            launch()
            while len(self.results) < len(self.plan.steps):
                step_id, result = await receive.receive()
                self.results[step_id] = result
                step = self.plan.step(step_id)
                if result.status in (FAILED, TIMED_OUT) and step.on_error is OnError.FAIL:
                    failure = (step_id, result)
                    nursery.cancel_scope.cancel()
                    break
                launch()
        return failure

    def _emit(self, event_type: str, **fields: object) -> str:
        return self.ctx.trace.emit(
            event_type, parent_id=self.ctx.task_event_id, task_id=self.ctx.task_id, **fields
        )

    def _emit_step(self, step: Step, status: str, attempt: int, started: float, reason: str | None) -> None:
        fields: dict[str, object] = {
            "step": step.id,
            "kind": step.kind,
            "status": status,
            "attempt": attempt,
            "duration_ms": int((time.monotonic() - started) * 1000),
        }
        if reason:
            fields["reason"] = reason
        self._emit("plan_step", **fields)

    async def _run_step(self, step: Step, send: trio.MemorySendChannel[tuple[str, StepResult]]) -> None:
        """Decide the condition, run the attempts, report the result on ``send``."""
        if step.condition is not None:
            try:
                run_it = step.condition.evaluate(self.scope())
            except ConditionError as exc:
                self._emit_step(step, FAILED, 0, time.monotonic(), str(exc))
                await send.send((step.id, StepResult(FAILED, reason=str(exc), exit_code=1)))
                return
            if not run_it:
                self._emit_step(step, SKIPPED, 0, time.monotonic(), None)
                await send.send((step.id, StepResult(SKIPPED)))
                return
        result = StepResult(FAILED)
        for attempt in range(1, step.retries + 2):
            begun = time.monotonic()
            try:
                result = await self._attempt(step, attempt)
            except BaseException as exc:
                if _is_cancellation(exc):
                    self._emit_step(step, CANCELED, attempt, begun, None)
                raise
            result = attrs.evolve(result, attempts=attempt)
            self._emit_step(step, result.status, attempt, begun, result.reason)
            if result.succeeded:
                break
        await send.send((step.id, result))

    async def _attempt(self, step: Step, attempt: int) -> StepResult:
        """One attempt, bounded by the step's timeout (and the delegation bound)."""
        timeout = step.timeout
        if isinstance(step.action, (CapsuleAction, MemberAction)):
            bound = float(self.ctx.delegation_bound_secs)
            timeout = bound if timeout is None else min(timeout, bound)
        try:
            with trio.fail_after(timeout if timeout is not None else math.inf):
                return await self._act(step, attempt)
        except trio.TooSlowError:
            return StepResult(TIMED_OUT, exit_code=1, reason=f"timed out after {timeout:g} s")
        except _StepFailed as exc:
            return exc.result

    async def _act(self, step: Step, attempt: int) -> StepResult:
        scope = self.scope()
        action = step.action
        if isinstance(action, ShellAction):
            return await self._shell(step, action, scope, attempt)
        if isinstance(action, CapsuleAction):
            return await self._capsule(step, action, scope)
        if isinstance(action, MemberAction):
            return await self._member(step, action, scope)
        if isinstance(action, TemplateAction):
            text = action.text.render(scope)
            return StepResult(OK, output=text, stdout=text, exit_code=0)
        return await self._write(action, scope)

    async def _shell(self, step: Step, action: ShellAction, scope: Scope, attempt: int) -> StepResult:
        argv = [t.render(scope) for t in action.argv]
        self.ctx.usage.shell_calls += 1
        try:
            done = await run_shell(
                argv,
                allow=self.ctx.manifest.shell_allow,
                cwd=self.ctx.workdir,
                env=self.ctx.shell_env,
                starter=self.ctx.services.starter,
            )
        except ShellRefused as exc:
            self.ctx.usage.shell_calls -= 1  # never started
            raise _StepFailed(StepResult(FAILED, exit_code=None, reason=str(exc))) from exc
        self._emit("shell", step=step.id, attempt=attempt, **done.trace_fields())
        stdout, stderr = _chomp(done.stdout_text), _chomp(done.stderr_text)
        if done.exit_code in action.ok_exit_codes:
            return StepResult(OK, output=stdout, stdout=stdout, stderr=stderr, exit_code=done.exit_code)
        how = f"exited with status {done.exit_code}" if done.exit_code > 0 else f"was killed by signal {-done.exit_code}"
        detail = _tail(stderr)
        reason = f"`{done.binary}` {how}" + (f": {detail}" if detail else "")
        if done.sandbox is not None:  # the grant sentence first, then what the command said
            reason = f"{done.sandbox} (`{done.binary}` {how}" + (f": {detail})" if detail else ")")
        if done.denied is not None:
            deny = self.ctx.services.denied_binary
            reason += "\n" + (deny(done.denied, kernel=True) if deny is not None else denied_binary(
                done.denied, self.ctx.manifest.name, self.ctx.manifest.shell_allow, kernel=True))
        return StepResult(FAILED, output=stdout, stdout=stdout, stderr=stderr, exit_code=done.exit_code, reason=reason)

    async def _capsule(self, step: Step, action: CapsuleAction, scope: Scope) -> StepResult:
        delegate = self.ctx.services.delegate
        if delegate is None:
            return StepResult(
                FAILED,
                exit_code=1,
                reason=(
                    f"delegation is not available to this session, so capsule `{action.capsule}` "
                    f"cannot be called; it needs the grant `capabilities.spawn.allow: [{action.capsule}]`"
                ),
            )
        try:
            answer = await delegate(action.capsule, action.version, action.task.render(scope), True)
        except MurmurError as exc:
            return StepResult(FAILED, exit_code=1, reason=str(exc))
        return _from_mapping(answer, f"capsule `{action.capsule}`")

    async def _member(self, step: Step, action: MemberAction, scope: Scope) -> StepResult:
        services = self.ctx.services
        if services.call_member is None or action.member not in services.callees:
            return StepResult(
                FAILED,
                exit_code=1,
                reason=(
                    f"this capsule is not a formation member with an edge to `{action.member}`; "
                    f"add a reachability rule `from: <this member>, to: [{action.member}]` to roster.yaml"
                ),
            )
        try:
            answer = await services.call_member(action.member, action.task.render(scope))
            status = str(answer.get("status", ""))
            call_id = answer.get("call_id")
            if status in ("started", "busy") and services.member_answer is not None and isinstance(call_id, str):
                answer = await services.member_answer(call_id)
        except MurmurError as exc:
            return StepResult(FAILED, exit_code=1, reason=str(exc))
        return _from_mapping(answer, f"member `{action.member}`")

    async def _write(self, action: WriteAction, scope: Scope) -> StepResult:
        rel = action.path.render(scope)
        problem = write_path_problem(rel)
        if problem is None:
            problem = await trio.to_thread.run_sync(_write_file, self.ctx.workdir, rel, action.content.render(scope))
        if problem is not None:
            return StepResult(FAILED, exit_code=1, reason=problem)
        return StepResult(OK, output=rel, stdout=rel, exit_code=0)


def _is_cancellation(exc: BaseException) -> bool:
    """True for ``trio.Cancelled``, bare or grouped by a nursery (an exception group of only
    cancellations is still a cancellation, never a step failure)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cancellation(e) for e in exc.exceptions)
    return False


def _from_mapping(answer: Mapping[str, object], who: str) -> StepResult:
    """A capsule/member answer mapping as a step result (``status`` + ``output``)."""
    status = str(answer.get("status", ""))
    output = str(answer.get("output", "") or "")
    if status in _SUCCESS:
        return StepResult(OK, output=output, stdout=output, exit_code=0)
    detail = _tail(output or str(answer.get("reason", "") or ""))
    reason = f"{who} ended {status or 'without a status'}" + (f": {detail}" if detail else "")
    return StepResult(FAILED, output=output, stdout=output, exit_code=1, reason=reason)


def _write_file(workdir: Path, rel: str, content: str) -> str | None:
    """Write ``content`` to ``workdir/rel`` atomically; return a problem sentence or None.

    The resolved target must stay inside the resolved workdir (symlinks included); the file
    is written beside the target and renamed over it, so a reader never sees half a file.
    """
    root = workdir.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root) or target == root:
        return f"the write path `{rel}` leaves the workdir"
    if target.is_dir():
        return f"the write path `{rel}` is a directory"
    tmp = target.with_name(f".{target.name}.murmur-tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        return f"the write path `{rel}` cannot be written: {exc.strerror or exc}"
    return None
