"""The runner: one taken task at a time on the workload, each in its own cancel scope.

Spec: spec/session.md "Tasks", "Lifecycle" and "Workloads". A task ends exactly once
(``completed``, ``failed`` or ``canceled``); its end is written to the trace (``task_end``) and
to its result files, its usage is added to the session's totals, and when the lifecycle says
the session ends after it (:meth:`~murmur.session.lifecycle.Policy.ends_after`) the session
closes and the task decides its status (:func:`murmur.session.outcome.deciding_task`).
"""

from __future__ import annotations

import logging
import math
import os
import traceback
from collections.abc import Callable

import attrs
import trio

from murmur import tracectx
from murmur.errors import DiagnosticError
from murmur.session.asking import Asking
from murmur.session.outcome import deciding_task, task_exit_status
from murmur.session.results import Results
from murmur.session.setup import SessionSetup
from murmur.session.states import TaskEvent, TaskState
from murmur.session.tasks.book import Task, TaskBook
from murmur.session.tasks.desk import Intake
from murmur.session.trace import SessionTrace, WorkloadTrace
from murmur.shell import baseline_env
from murmur.workload import TaskContext, TaskOutcome, TaskServices, Usage

USAGE_FIELDS = ("turns", "input_tokens", "output_tokens", "tool_calls", "shell_calls")
"""The :class:`~murmur.workload.Usage` counters summed into ``session_end``'s totals."""


def shell_env(setup: SessionSetup) -> dict[str, str]:
    """The environment every shell command of the session starts from (spec/session.md
    "Workloads"): the baseline, with the capsule's links first on ``PATH``."""
    env = baseline_env(setup.manifest, setup.parent_env, records_dir=setup.records.root)
    if setup.links_bin is not None:
        env["PATH"] = f"{setup.links_bin}{os.pathsep}{env['PATH']}"
    return env


class Runner:
    """Starts queued tasks one at a time until the session closes.

    Args:
        setup (SessionSetup): the session's setup (workload, policy, records, services).
        book (TaskBook): the session's tasks.
        intake (Intake): where taken tasks wait.
        trace (SessionTrace): where ``task_start``/``task_end``/``task_canceled`` go.
        results (Results): the task files.
        log (logging.Logger): where a workload's crash is logged (``door.log``).
        winding_down (Callable[[], bool]): whether the session's wind-down has begun.

    Attributes:
        totals (Usage): the usage of every task that ended.
        deciding_status (str | None): the deciding task's ``task_end.exit_status`` when it
            was not ``ok``.
        deciding_reason (str | None): that task's failure text, when the workload gave one.
    """

    def __init__(
        self,
        setup: SessionSetup,
        book: TaskBook,
        intake: Intake,
        trace: SessionTrace,
        results: Results,
        log: logging.Logger,
        *,
        winding_down: Callable[[], bool],
    ) -> None:
        self._setup = setup
        self._book = book
        self._intake = intake
        self._trace = trace
        self._results = results
        self._log = log
        self._winding_down = winding_down
        self._shell_env = shell_env(setup)
        self.asking = Asking(book, trace, results, timeout=setup.manifest.lifecycle.input_timeout_secs)
        self.totals = Usage()
        self.deciding_status: str | None = None
        self.deciding_reason: str | None = None

    async def run(self) -> None:
        """Run queued tasks until the session closes; the idle rule runs an empty task once
        no task came within the policy's ``idle_timeout`` (Trio clock)."""
        intake = self._intake
        idle = self._setup.policy.idle_timeout
        idle_at = trio.current_time() + idle if idle is not None else math.inf
        while not intake.closing:
            if not intake.waiting:
                if intake.taken == 0 and trio.current_time() >= idle_at:
                    intake.take_local("", self._setup.launch_context_id)  # the idle rule: run once with an empty task
                    continue
                changed = intake.changed
                with trio.move_on_at(idle_at if intake.taken == 0 else math.inf):
                    await changed.wait()
                continue
            task = intake.next()
            if task is not None:
                await self.run_task(task)

    def cancel(self, task: Task, reason: str) -> bool:
        """Cancel a task that has not ended (queued: at once; running: its scope is cancelled).

        Returns:
            bool: whether the task changed (False when it had already ended).
        """
        was = task.state
        if was is TaskState.SUBMITTED:
            self._intake.withdraw(task.id)
        if not self._book.apply(task, TaskEvent.CANCEL, message=reason):
            return False
        phase = {TaskState.SUBMITTED: "queued", TaskState.INPUT_REQUIRED: "input"}.get(was, self._setup.workload_kind)
        self._trace.emit(
            "task_canceled",
            parent=task.start_event_id,
            task_id=task.id,
            turn=0,
            phase=phase,
            detached_work_ids=[],
            delegation_ids=[],
        )
        self._results.result(task, "canceled", reason)
        if task.scope is not None:
            task.scope.cancel()
        self._intake.wake()
        return True

    async def run_task(self, task: Task) -> None:
        """Run one task in its own cancel scope; it ends exactly once."""
        self._intake.start(task)
        t0 = trio.current_time()
        outcome: TaskOutcome | None = None
        ctx: TaskContext | None = None
        with trio.CancelScope() as scope:
            task.scope = scope
            if not self._book.apply(task, TaskEvent.START):
                self._intake.finish(task)
                return
            task.start_event_id = self._trace.emit(
                "task_start",
                joins=tracectx.parse(task.traceparent),
                task_id=task.id,
                context_id=task.context_id,
                source=task.source,
                origin=task.origin,
                trust=task.trust,
                lane=task.lane,
                message_parts_bytes=len(task.text.encode("utf-8")),
            )
            self._results.task_text(task.text)
            # hops made for this task name its task_start as their parent span
            span = self._trace.writer.span(task.start_event_id) if task.start_event_id else tracectx.CURRENT.get()
            token = tracectx.CURRENT.set(span)
            try:
                ctx = self._context(task, task.start_event_id or "")
                outcome = await self._setup.workload.run_task(ctx)
            except DiagnosticError as exc:
                outcome = TaskOutcome("failed", exc.diagnostics[0].message)
            except Exception as exc:  # a workload bug must not take the session down
                self._log.error("workload failed on %s:\n%s", task.id, traceback.format_exc())
                outcome = TaskOutcome("failed", f"internal error: {type(exc).__name__}: {exc}")
            finally:
                tracectx.CURRENT.reset(token)
        task.scope = None
        if outcome is None and task.state is TaskState.FAILED:  # failed by the session (input-timeout)
            outcome = TaskOutcome("failed", task.status_message or "failed")
        self._end(task, outcome, ctx.usage if ctx is not None else Usage(), t0)

    def _end(self, task: Task, outcome: TaskOutcome | None, usage: Usage, t0: float) -> None:
        """Record how ``task`` ended, and close the session when the lifecycle ends it here."""
        if outcome is not None:
            if outcome.status == "ok":
                if self._book.apply(task, TaskEvent.COMPLETE, answer=outcome.answer):
                    self._results.result(task, "completed", outcome.answer)
            elif self._book.apply(task, TaskEvent.FAIL, message=outcome.answer):
                self._results.result(task, "failed", outcome.answer)
        if not task.terminal:  # cancelled from outside the task (should not happen) - end it
            self.cancel(task, "the task was interrupted")
        exit_status = task_exit_status(task.state, outcome)
        for name in USAGE_FIELDS:
            setattr(self.totals, name, getattr(self.totals, name) + getattr(usage, name))
        self._trace.emit(
            "task_end",
            parent=task.start_event_id,
            task_id=task.id,
            exit_status=exit_status,
            duration_ms=int((trio.current_time() - t0) * 1000),
            turns=usage.turns,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            tool_calls=usage.tool_calls,
            shell_calls=usage.shell_calls,
            reopen_count=0,
        )
        self._intake.finish(task)
        if not self._winding_down() and self._setup.policy.ends_after(launch_task=task.launch):
            if self.deciding_status is None:
                self.deciding_status, self.deciding_reason = deciding_task(exit_status, outcome)
            self._intake.close(cause="session_ended")

    def _context(self, task: Task, event_id: str) -> TaskContext:
        setup = self._setup
        services = setup.services(task) if setup.services else TaskServices()

        def emit_chunk(text: str, thinking: bool, source: str) -> None:
            self._book.chunk(task, text, thinking=thinking, source=source)

        services = attrs.evolve(services, emit_chunk=emit_chunk)
        return TaskContext(
            session_id=setup.session_id,
            task_id=task.id,
            context_id=task.context_id,
            text=task.text,
            origin=task.origin,
            trust=task.trust,
            manifest=setup.manifest,
            capsule_root=setup.capsule_root,
            workdir=setup.workdir,
            records_dir=setup.records.root,
            trace=WorkloadTrace(self._trace.writer),
            task_event_id=event_id,
            shell_env=self._shell_env,
            services=services,
            usage=Usage(),
            formation_id=setup.formation_id,
            links_context=setup.links_context,
            ask=(lambda prompt: self.asking.ask(task, prompt)) if task.source == "a2a" else None,
            delegation_bound_secs=setup.delegation_bound_secs,
        )
