"""One capsule session: the nursery that holds the door, the task runner and the watchers.

::

    session nursery
    ├─ watchers            signals, lifelines, deadline, anything in SessionSetup.watchers
    └─ door nursery
       ├─ door             hypercorn.trio.serve(plain ASGI door), 127.0.0.1:0
       └─ task runner      one cancel scope per task; workload.run_task(ctx)

Spec: spec/session.md ("Lifecycle", "Wind-down", "Extension points"). :class:`Session` wires
the parts and owns the nurseries; each part is its own module:

* :mod:`~murmur.session.setup`: what a session is built from, its extension points;
* :mod:`~murmur.session.backend`: what the door calls;
* :mod:`~murmur.session.tasks.desk`: whether a task is taken (the queue, closing);
* :mod:`~murmur.session.tasks.runner`: running a taken task on the workload;
* :mod:`~murmur.session.results`: the task files (``task.md``, ``out/result*.txt``);
* :mod:`~murmur.session.winddown`: the wind-down, its guard and the deadline watcher;
* :mod:`~murmur.session.outcome`: how the session ends (pure);
* :mod:`~murmur.session.describe`: what it says about itself (readiness, running record).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

import attrs
import trio

from murmur import tracectx
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.session.auth import BearerDoor, PublicDoor, make_authenticator
from murmur.session.backend import SessionBackend
from murmur.session.completion_hook import default_completion_handler
from murmur.session.deadline import on_trio_clock
from murmur.session.describe import readiness, running_record, session_start_fields
from murmur.session.door import DOOR_GRACE, Door, serve_door
from murmur.session.lifecycle import close_cause
from murmur.session.outcome import deciding_status, exit_code, final_status
from murmur.session.results import Results
from murmur.session.running_record import RunningRecord, remove_running, write_running
from murmur.session.sessionlog import attach_log, detach_log
from murmur.session.setup import SessionSetup, SessionSummary, WindDownControl
from murmur.session.tasks.book import Task, TaskBook
from murmur.session.tasks.desk import Intake
from murmur.session.tasks.runner import Runner
from murmur.session.trace import SessionTrace, TraceWriteError, TraceWriter
from murmur.session.winddown import (
    Guard,
    WindDown,
    WindingDown,
    add_forced_exit_hook,
    watch_deadline,
)


class Session:
    """A running capsule session (create with a :class:`SessionSetup`, then :meth:`run`).

    Attributes:
        setup (SessionSetup): what it was built from.
        session_id (str): ``ses_…``.
        book (TaskBook): its tasks.
        trace (TraceWriter): its ``trace.jsonl``.
        auth (PublicDoor | BearerDoor): the door's authentication.
        deadline_at (float | None): the ``--deadline`` on the Trio clock (set by :meth:`run`).
    """

    def __init__(self, setup: SessionSetup) -> None:
        self.setup = setup
        self.session_id = setup.session_id
        self.manifest = setup.manifest
        self._launch_untaken = setup.task_text is not None  # until the launch task is taken
        self.policy = setup.policy
        self.book = TaskBook()
        self.trace = TraceWriter(
            setup.records.trace, setup.session_id, on_failure=self._trace_failed, joins=tracectx.from_env(setup.parent_env)
        )
        self.auth: PublicDoor | BearerDoor = make_authenticator(
            setup.manifest.name,
            setup.manifest.authentication.credentials if setup.manifest.authentication else None,
            verifiers=setup.token_verifiers,
        )
        self.deadline_at: float | None = None
        self._log = logging.getLogger("murmur.session.door")
        self._events = SessionTrace(self.trace)
        self._results = Results(self.book, setup.records, self._log)
        self._intake = Intake(setup.policy, self.book, self._events)
        self._runner = Runner(
            setup, self.book, self._intake, self._events, self._results, self._log,
            winding_down=lambda: self.wind_down_reason is not None,
        )
        self._winding = WindingDown(
            self._events, self._intake, self._runner,
            guard=Guard(setup.guard, setup.exit_fn) if setup.guard is not None else None,
            hooks=setup.wind_down_hooks, log=self._log,
        )
        self._backend = SessionBackend(
            setup, self.book, self._intake, self._runner, self._events,
            authenticated=self.auth.authenticated,
            completion=setup.completion_handler or default_completion_handler,
        )
        self._door = Door(self._backend, self.auth, keepalive=setup.keepalive, logger=self._log)
        self._record: RunningRecord | None = None
        self._runner.asking.on_change = self.note_waiting
        self._started_at = time.monotonic()  # durations only; record times are Unix (trace, running record)

    @property
    def url(self) -> str | None:
        """The door's base URL once it serves."""
        return self._backend.url

    @property
    def session_event_id(self) -> str | None:
        """The ``evt_`` id of ``session_start`` (the parent of session-level trace records)."""
        return self._events.start_id

    @property
    def wind_down_reason(self) -> WindDown | None:
        """The wind-down trigger, once one fired."""
        return self._winding.reason

    @property
    def closing(self) -> bool:
        """The session takes no more tasks (its last task ended, or a wind-down began).

        The door still serves until the end hooks have run; a completion handler uses this
        to take an awaited completion without a task (spec/delegation.md).
        """
        return self._intake.closing

    @property
    def latest_task(self) -> Task | None:
        """The task running now, or else the last one that ran (None before the first): a
        capsule link's call takes its context and trust (spec/links.md "Calling a link")."""
        return self._intake.latest

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        return self.book.get(task_id)

    def all_tasks(self) -> list[Task]:
        """Every task held, in arrival order."""
        return list(self.book)

    def wind_down(self, reason: WindDown) -> None:
        """Start the wind-down (idempotent: the first trigger wins; see :class:`WindingDown`)."""
        self._winding.begin(reason)

    def note_delegations(self) -> None:
        """Rewrite the running record with the current ``delegation_counts`` (best effort)."""
        if self._record is None:
            return
        self._record = attrs.evolve(self._record, delegations=dict(self.setup.delegation_counts))
        try:
            write_running(self._record)
        except OSError as exc:
            self._log.error("could not rewrite the running record: %s", exc)

    def note_waiting(self) -> None:
        """Rewrite the running record with the tasks waiting for input (best effort)."""
        if self._record is None:
            return
        waiting = self._runner.asking.waiting() or None
        self._record = attrs.evolve(self._record, waiting=waiting)
        try:
            write_running(self._record)
        except OSError as exc:
            self._log.error("could not rewrite the running record: %s", exc)

    async def flush_records(self) -> None:
        """Wait until every records file queued so far is written (see :meth:`Results.flush`)."""
        await self._results.flush()

    def readiness(self) -> dict[str, Any]:
        """The ``--json`` readiness object (tokens included on an authenticated door)."""
        return readiness(self.setup, self.url, self.auth)

    def _trace_failed(self, err: TraceWriteError) -> None:
        self.wind_down(WindDown("trace", "the trace could not be written", "the trace could not be written", status="failed", diagnostic=err.diagnostics[0]))

    async def _watch_deadline(self, ctl: WindDownControl) -> None:
        """Wind down when the deadline scope expires (its ``deadline`` is the session's)."""
        if self.setup.deadline is None or self.deadline_at is None:
            return
        await watch_deadline(ctl.trigger, deadline=self.setup.deadline, at=self.deadline_at, formation_id=self.setup.formation_id)

    def _deciding(self) -> tuple[str, Diagnostic | None]:
        return deciding_status(
            self.wind_down_reason,
            deciding=self._runner.deciding_status,
            # a --task the wind-down came before is a deciding task that did not complete
            canceled_by_wind=self._winding.canceled_running or self._launch_untaken,
            see=f"{self.setup.records.result} and {self.setup.records.trace}",
        )

    # -- the session ----------------------------------------------------------------------

    async def run(self, on_ready: Callable[[dict[str, Any]], None] | None = None) -> SessionSummary:
        """Run the session to its end.

        Args:
            on_ready (Callable[[dict], None] | None): called once the door serves, with the
                readiness object (``--json`` prints it).

        Returns:
            SessionSummary: how it ended. A refused launch (a start hook's
            ``DiagnosticError``, an unbindable door) ends ``failed`` with that diagnostic.
        """
        log_handler = attach_log(self._log, self.setup.records.logs / "door.log")
        try:
            return await self._run_logged(on_ready)
        finally:  # a session its owner cancels (a member's start cut short) closes it too
            detach_log(self._log, log_handler)
            self.trace.close()  # idempotent; a cancelled session leaves no open trace file

    async def _run_logged(self, on_ready: Callable[[dict[str, Any]], None] | None) -> SessionSummary:
        def forget_record() -> None:
            remove_running(self.session_id)

        unregister = add_forced_exit_hook(forget_record)
        if self.setup.deadline is not None:
            self.deadline_at = on_trio_clock(self.setup.deadline, now_unix=time.time(), now_trio=trio.current_time())
        refusal: Diagnostic | None = None
        try:
            self._events.start_id = self.trace.emit("session_start", parent_id=None, **session_start_fields(self.setup))
            tracectx.CURRENT.set(self.trace.span(self._events.start_id))
        except TraceWriteError as exc:
            refusal = exc.diagnostics[0]
        ctl = WindDownControl(self)
        stop_door = trio.Event()
        try:
            async with trio.open_nursery() as helpers:
                helpers.start_soon(self._watch_deadline, ctl)
                for watcher in self.setup.watchers:
                    helpers.start_soon(watcher, ctl)
                if refusal is None:
                    refusal = await self._serve_and_run(stop_door, on_ready)
                helpers.cancel_scope.cancel()
        finally:
            left_behind = remove_running(self.session_id)
            unregister()
            self._results.close()
        status, diag = self._deciding()
        summary = self._summary(*final_status(status, diag, refusal=refusal, left_behind=left_behind, lost=self._results.lost))
        totals = self._runner.totals
        self._events.emit(
            "session_end",
            total_turns=totals.turns,
            total_input_tokens=totals.input_tokens,
            total_output_tokens=totals.output_tokens,
            total_tool_calls=totals.tool_calls,
            total_shell_calls=totals.shell_calls,
            duration_ms=summary.duration_ms,
            exit_status=summary.status,
            delegations=dict(self.setup.delegation_counts),
        )
        self.trace.close()
        for after in self.setup.after_end:
            try:
                after(summary)
            except Exception:
                self._log.error("after-end hook failed:\n%s", traceback.format_exc())
        self._winding.disarm()
        return summary

    def _summary(self, status: str, diag: Diagnostic | None) -> SessionSummary:
        return SessionSummary(
            session_id=self.session_id,
            status=status,
            exit_code=exit_code(status, diag),
            diagnostic=diag,
            records_dir=self.setup.records.root,
            result_path=self.setup.records.result if self._results.result_written else None,
            duration_ms=int((time.monotonic() - self._started_at) * 1000),
            wind_down=self.wind_down_reason,
            reason=self._runner.deciding_reason if diag is not None and diag.code == "E-RUN-040" else None,
            answer=self._results.answer,
        )

    async def _serve_and_run(
        self, stop_door: trio.Event, on_ready: Callable[[dict[str, Any]], None] | None
    ) -> Diagnostic | None:
        refusal: Diagnostic | None = None
        async with trio.open_nursery() as door_n:
            try:
                self._backend.url = await door_n.start(partial(serve_door, self._door, stop_door, bind=self.setup.bind))
            except OSError as exc:
                return error("E-RUN-001", f"the door could not be bound to {self.setup.bind}: {exc.strerror or exc}")
            try:
                for hook in self.setup.start_hooks:
                    await hook(self)
            except DiagnosticError as exc:
                refusal = exc.diagnostics[0]
            if refusal is None and self.wind_down_reason is None:
                try:
                    self._record = running_record(self.setup, self.url, self.auth)
                    write_running(self._record)
                except OSError as exc:
                    self._log.error("could not write the running record: %s", exc)
                if on_ready is not None:
                    on_ready(self.readiness())
                if self.setup.task_text is not None:
                    self._intake.take_local(self.setup.task_text, self.setup.launch_context_id)
                    self._launch_untaken = False
                await self._runner.run()
            self._intake.close(cause=close_cause(stopped=self.wind_down_reason is not None))
            if self._intake.running is not None:  # only if the runner was cancelled from outside
                self._runner.cancel(self._intake.running, "the session ended")
            await self.flush_records()
            status, diag = self._deciding()
            summary = self._summary(*final_status(status, refusal or diag, lost=self._results.lost))
            for end_hook in self.setup.end_hooks:
                try:
                    await end_hook(summary)
                except Exception:
                    self._log.error("end-of-session hook failed:\n%s", traceback.format_exc())
            remove_running(self.session_id)
            stop_door.set()
            door_n.cancel_scope.deadline = trio.current_time() + 2 * DOOR_GRACE
        return refusal
