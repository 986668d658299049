"""One capsule session: the nursery that holds the door, the task runner and the watchers.

::

    session nursery
    ├─ watchers            signals, lifelines, deadline, anything in SessionSetup.watchers
    └─ door nursery
       ├─ door             hypercorn.trio.serve(plain ASGI door), 127.0.0.1:0
       └─ task runner      one cancel scope per task; workload.run_task(ctx)

Lifecycle and wind-down: spec/session.md. What a session is built from and its extension
points: :mod:`murmur.session.setup`; how it ends: :mod:`murmur.session.outcome`; what it says
about itself: :mod:`murmur.session.describe`.
"""

from __future__ import annotations

import logging
import math
import os
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.session import wire
from murmur.session.auth import BearerDoor, Principal, PublicDoor, make_authenticator
from murmur.session.deadline import on_trio_clock
from murmur.session.describe import readiness, running_record, session_start_fields
from murmur.session.door import (
    DOOR_GRACE,
    CompletionRequest,
    CompletionVerdict,
    Door,
    default_completion_handler,
    serve_door,
)
from murmur.session.held import answer_recorded
from murmur.session.lanes import LaneQueue
from murmur.session.lifecycle import BUSY_MESSAGE, CLOSING_MESSAGE, Admission
from murmur.session.origin import LOCAL_USER, Classification
from murmur.session.outcome import deciding_status, exit_code, final_status, task_exit_status
from murmur.session.records import (
    RecordWriter,
    result_text,
)
from murmur.session.running import RunningRecord, remove_running, write_running
from murmur.session.sessionlog import attach_log, detach_log
from murmur.session.setup import SessionSetup, SessionSummary, WindDownControl
from murmur.session.states import TaskEvent, TaskState
from murmur.session.tasks import Task, TaskBook
from murmur.session.trace import TraceWriteError, TraceWriter, WorkloadTrace
from murmur.session.winddown import (
    Guard,
    WindDown,
    add_forced_exit_hook,
    deadline_wind_down,
)
from murmur.shell import baseline_env
from murmur.workload import TaskContext, TaskOutcome, TaskServices, Usage

FLUSH_SLICE = 0.002
"""Seconds the records flush may hold the event loop at a time."""
FLUSH_BOUND = 10.0
"""Real seconds the session waits for its records files before it ends without them."""

def _shell_env(setup: SessionSetup) -> dict[str, str]:
    env = baseline_env(setup.manifest, setup.parent_env, records_dir=setup.records.root)
    if setup.links_bin is not None:
        env["PATH"] = f"{setup.links_bin}{os.pathsep}{env['PATH']}"
    return env


class Session:
    """A running capsule session (create with a :class:`SessionSetup`, then :meth:`run`)."""

    def __init__(self, setup: SessionSetup) -> None:
        self.setup = setup
        self.session_id = setup.session_id
        self.manifest = setup.manifest
        self.policy = setup.policy
        self.book = TaskBook()
        self.url: str | None = None
        self.wind_down_reason: WindDown | None = None
        self.trace = TraceWriter(setup.records.trace, setup.session_id, on_failure=self._trace_failed)
        self.auth: PublicDoor | BearerDoor = make_authenticator(
            setup.manifest.name,
            setup.manifest.authentication.credentials if setup.manifest.authentication else None,
            verifiers=setup.token_verifiers,
        )
        self._queue = LaneQueue()
        self._running: Task | None = None
        self._taken = 0
        self._closing = False
        self._close_cause = "session_ended"
        self._wake_event = trio.Event()
        self._deciding_status: str | None = None
        self._deciding_reason: str | None = None
        self._canceled_by_wind = False
        self._result_written = False
        self._guard = Guard(setup.guard, setup.exit_fn) if setup.guard is not None else None
        self._ses_evt: str | None = None
        self._shell_env = _shell_env(setup)
        self._started_at = time.time()
        self._totals = Usage()
        self._log = logging.getLogger("murmur.session.door")
        self._door = Door(self, self.auth, keepalive=setup.keepalive, logger=self._log)
        self._card_cache: dict[bool, dict[str, Any]] = {}
        self._completion = setup.completion_handler or default_completion_handler
        self._records = RecordWriter(self._record_lost)
        self._lost: list[tuple[Path, str]] = []  # records files that could not be written
        self._answer: str | None = None
        self._record: RunningRecord | None = None
        self.deadline_at: float | None = None  # the --deadline on the Trio clock, set by run()

    @property
    def session_event_id(self) -> str | None:
        """The ``evt_`` id of ``session_start`` (the parent of session-level trace records)."""
        return self._ses_evt

    # -- DoorBackend ----------------------------------------------------------------------

    @property
    def serves_tasks(self) -> bool:
        """False under ``task_acceptance: none``."""
        return self.policy.serves_tasks

    @property
    def accepts_peer_tasks(self) -> bool:
        """``exports.peer_tasks.accept``."""
        return self.manifest.accepts_peer_tasks

    @property
    def closing(self) -> bool:
        """The session takes no more tasks (its last task ended, or a wind-down began).

        The door still serves until the end hooks have run; a completion handler uses this
        to take an awaited completion without a task (spec/delegation.md).
        """
        return self._closing

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        return self.book.get(task_id)

    def all_tasks(self) -> list[Task]:
        """Every task held, in arrival order."""
        return list(self.book)

    def card(self, *, extended: bool) -> dict[str, Any]:
        """The agent card (public or extended)."""
        if extended not in self._card_cache:
            m = self.manifest
            self._card_cache[extended] = wire.agent_card(
                name=m.name,
                version=m.version,
                url=(self.url or "http://127.0.0.1:0") + "/",
                session_id=self.session_id,
                serves_tasks=self.serves_tasks,
                authenticated=self.auth.authenticated,
                peer_tasks=m.accepts_peer_tasks,
                capsule_params={
                    "tools": [],
                    "shell": list(m.shell_allow),
                    "network": list(m.network_allow),
                    "planes": [],
                },
                description=m.description,
                extended=extended,
            )
        return self._card_cache[extended]

    def completion(self, req: CompletionRequest) -> CompletionVerdict:
        """Ask the completion hook about a well-addressed completion."""
        return self._completion(req)

    def submit(
        self, msg: wire.InboundMessage, cls: Classification, principal: Principal, *, context_id: str | None
    ) -> Task:
        """Take a task from the door: admitted (queued) or rejected (busy / closing).

        Returns:
            Task: the new task, ``submitted`` or ``rejected``.
        """
        admission = self.policy.admit(
            running=self._running is not None, queued=len(self._queue), taken=self._taken, closing=self._closing
        )
        meta: dict[str, Any] = {}
        task = self.book.new(
            text=msg.text,
            message=msg.message,
            origin=cls.origin,
            trust=cls.trust,
            lane=cls.lane,
            source="a2a",
            context_id=context_id,
            owner=principal.credential if principal.is_formation_member else None,
            metadata=meta,
        )
        fields: dict[str, Any] = {
            "task_id": task.id,
            "context_id": task.context_id,
            "message_id": msg.message.get("messageId"),
        }
        if principal.member is not None:
            fields["caller_member"] = principal.member
        if cls.delegation_id is not None:
            fields["delegation_id"] = cls.delegation_id
        self._emit("a2a_task_received", **fields)
        if admission is Admission.ACCEPT:
            self._enqueue(task)
        else:
            self._reject(task, busy=admission is Admission.BUSY)
        return task

    def cancel(self, task: Task, reason: str) -> bool:
        """Cancel a task that has not ended (queued: at once; running: its scope is cancelled).

        Returns:
            bool: whether the task changed (False when it had already ended).
        """
        was = task.state
        if was is TaskState.SUBMITTED:
            self._queue.remove(task.id)
        if not self.book.apply(task, TaskEvent.CANCEL, message=reason):
            return False
        phase = "queued" if was is TaskState.SUBMITTED else self.setup.workload_kind
        self._emit(
            "task_canceled",
            parent=task.start_event_id,
            task_id=task.id,
            turn=0,
            phase=phase,
            detached_work_ids=[],
            delegation_ids=[],
        )
        self._write_result(task, "canceled", reason)
        if task.scope is not None:
            task.scope.cancel()
        self._wake()
        return True

    # -- wind-down ------------------------------------------------------------------------

    def wind_down(self, reason: WindDown) -> None:
        """Start the wind-down (idempotent: the first trigger wins).

        Stops taking work, refuses queued tasks, cancels the running one, and arms the guard.
        """
        if self.wind_down_reason is not None:
            return
        self.wind_down_reason = reason
        if self._guard is not None:
            self._guard.start()
        if reason.trace_event:
            self._emit(reason.trace_event, **dict(reason.trace_fields))
        self._close(cause="session_stopped")
        running = self._running
        if running is not None and not running.terminal and self.cancel(running, reason.cancel_note):
            self._canceled_by_wind = True
        for hook in self.setup.wind_down_hooks:
            try:
                hook(reason)
            except Exception:
                self._log.error("wind-down hook failed:\n%s", traceback.format_exc())
        self._wake()

    def note_delegations(self) -> None:
        """Rewrite the running record with the current ``delegation_counts`` (best effort)."""
        if self._record is None:
            return
        self._record = attrs.evolve(self._record, delegations=dict(self.setup.delegation_counts))
        try:
            write_running(self._record)
        except OSError as exc:
            self._log.error("could not rewrite the running record: %s", exc)

    def _close(self, *, cause: str) -> None:
        if not self._closing:
            self._closing = True
            self._close_cause = cause
        for tid in self._queue.drain():
            task = self.book.get(tid)
            if task is not None:
                self._reject(task, busy=False)

    def _trace_failed(self, err: TraceWriteError) -> None:
        self.wind_down(WindDown("trace", "the trace could not be written", "the trace could not be written", status="failed", diagnostic=err.diagnostics[0]))

    # -- internals ------------------------------------------------------------------------

    def _emit(self, event_type: str, *, parent: str | None = None, **fields: Any) -> str | None:
        try:
            return self.trace.emit(event_type, parent_id=parent or self._ses_evt, **fields)
        except TraceWriteError:
            return None  # on_failure already started the wind-down

    def _wake(self) -> None:
        self._wake_event.set()
        self._wake_event = trio.Event()

    def _enqueue(self, task: Task) -> None:
        self._queue.push(task.id, task.lane)
        self._taken += 1
        self._wake()

    def _reject(self, task: Task, *, busy: bool) -> None:
        message = BUSY_MESSAGE if busy else CLOSING_MESSAGE
        if self.book.apply(task, TaskEvent.REJECT, message=message):
            self._emit(
                "task_rejected",
                task_id=task.id,
                context_id=task.context_id,
                source=task.source,
                cause="busy" if busy else self._close_cause,
                reason=message,
            )

    def _record_lost(self, path: Path, exc: OSError) -> None:
        """A records file could not be written (called on the writer thread)."""
        self._lost.append((path, exc.strerror or type(exc).__name__))
        self._log.error("could not write %s: %s", path, exc.strerror or exc)

    def _write_result(self, task: Task, state: str, text: str) -> None:
        body = result_text(state, text)
        if task.launch and state == "completed":
            self._answer = body
        path = self.setup.records.task_result(task.id)
        self._records.write(path, body, then=answer_recorded(self.book, task, path, body))
        if task.started or task.launch:  # a task that never ran leaves result.txt alone
            self._records.write(self.setup.records.result, body)
            self._result_written = True

    async def flush_records(self) -> None:
        """Wait until every records file queued so far (task.md, results) is written.

        The wait gives the event loop back every :data:`FLUSH_SLICE` seconds (the door keeps
        serving) and gives up after :data:`FLUSH_BOUND` real seconds (the files that were not
        written are reported as lost by the writer). It never parks the whole loop: a
        ``to_thread`` wait would look idle to Trio, and an autojumping ``MockClock`` would
        leap past every timer (the deadline, the caller's bounds) while the writer works.
        """
        give_up = time.monotonic() + FLUSH_BOUND
        while not self._records.flush(timeout=FLUSH_SLICE) and time.monotonic() < give_up:
            await trio.lowlevel.checkpoint()

    def _submit_local(self, text: str) -> Task:
        msg = {"messageId": "msg_local", "role": "ROLE_USER", "parts": [{"text": text}]}
        task = self.book.new(
            text=text,
            message=msg,
            origin=LOCAL_USER.origin,
            trust=LOCAL_USER.trust,
            lane=LOCAL_USER.lane,
            source="task_md",
            launch=True,
        )
        self._enqueue(task)
        return task

    def _context(self, task: Task, event_id: str) -> TaskContext:
        services = self.setup.services(task) if self.setup.services else TaskServices()
        return TaskContext(
            session_id=self.session_id,
            task_id=task.id,
            context_id=task.context_id,
            text=task.text,
            origin=task.origin,
            trust=task.trust,
            manifest=self.manifest,
            capsule_root=self.setup.capsule_root,
            workdir=self.setup.workdir,
            records_dir=self.setup.records.root,
            trace=WorkloadTrace(self.trace),
            task_event_id=event_id,
            shell_env=self._shell_env,
            services=services,
            usage=Usage(),
            formation_id=self.setup.formation_id,
            links_context=self.setup.links_context,
        )

    async def _run_task(self, task: Task) -> None:
        """Run one task in its own cancel scope; it ends exactly once."""
        self._running = task
        t0 = trio.current_time()
        outcome: TaskOutcome | None = None
        ctx: TaskContext | None = None
        with trio.CancelScope() as scope:
            task.scope = scope
            if not self.book.apply(task, TaskEvent.START):
                self._running = None
                return
            task.start_event_id = self._emit(
                "task_start",
                task_id=task.id,
                context_id=task.context_id,
                source=task.source,
                origin=task.origin,
                trust=task.trust,
                lane=task.lane,
                message_parts_bytes=len(task.text.encode("utf-8")),
            )
            self._records.write(self.setup.records.task_md, task.text)
            try:
                ctx = self._context(task, task.start_event_id or "")
                outcome = await self.setup.workload.run_task(ctx)
            except DiagnosticError as exc:
                outcome = TaskOutcome("failed", exc.diagnostics[0].message)
            except Exception as exc:  # a workload bug must not take the session down
                self._log.error("workload failed on %s:\n%s", task.id, traceback.format_exc())
                outcome = TaskOutcome("failed", f"internal error: {type(exc).__name__}: {exc}")
        task.scope = None
        if outcome is not None:
            if outcome.status == "ok":
                if self.book.apply(task, TaskEvent.COMPLETE, answer=outcome.answer):
                    self._write_result(task, "completed", outcome.answer)
            elif self.book.apply(task, TaskEvent.FAIL, message=outcome.answer):
                self._write_result(task, "failed", outcome.answer)
        if not task.terminal:  # cancelled from outside the task (should not happen) - end it
            self.cancel(task, "the task was interrupted")
        exit_status = task_exit_status(task.state, outcome)
        usage = ctx.usage if ctx is not None else Usage()
        for name in ("turns", "input_tokens", "output_tokens", "tool_calls", "shell_calls"):
            setattr(self._totals, name, getattr(self._totals, name) + getattr(usage, name))
        self._emit(
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
        self._running = None
        if self.wind_down_reason is None and self.policy.ends_after(launch_task=task.launch):
            if self._deciding_status is None and exit_status != "ok":
                self._deciding_status = exit_status
                if outcome is not None and outcome.status != "ok":
                    self._deciding_reason = outcome.answer
            self._close(cause="session_ended")

    async def _runner(self) -> None:
        """Start queued tasks one at a time until the session closes."""
        idle = self.policy.idle_timeout
        idle_at = trio.current_time() + idle if idle is not None else math.inf
        while not self._closing:
            tid = self._queue.pop()
            if tid is None:
                if self._taken == 0 and trio.current_time() >= idle_at:
                    self._submit_local("")  # the idle rule: run once with an empty task
                    continue
                wake = self._wake_event
                with trio.move_on_at(idle_at if self._taken == 0 else math.inf):
                    await wake.wait()
                continue
            task = self.book.get(tid)
            if task is None or task.state is not TaskState.SUBMITTED:
                continue
            await self._run_task(task)

    async def _watch_deadline(self, ctl: WindDownControl) -> None:
        """Wind down when the deadline scope expires (its ``deadline`` is the session's)."""
        deadline = self.setup.deadline
        if deadline is None or self.deadline_at is None:
            return
        with trio.CancelScope(deadline=self.deadline_at) as scope:
            await trio.sleep_forever()
        if scope.cancelled_caught:
            ctl.trigger(deadline_wind_down(deadline, formation_id=self.setup.formation_id))

    def _deciding(self) -> tuple[str, Diagnostic | None]:
        return deciding_status(
            self.wind_down_reason,
            deciding=self._deciding_status,
            canceled_by_wind=self._canceled_by_wind,
            see=f"{self.setup.records.result} and {self.setup.records.trace}",
        )

    def readiness(self) -> dict[str, Any]:
        """The ``--json`` readiness object (tokens included on an authenticated door)."""
        return readiness(self.setup, self.url, self.auth)

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
        def forget_record() -> None:
            remove_running(self.session_id)

        unregister = add_forced_exit_hook(forget_record)
        if self.setup.deadline is not None:
            self.deadline_at = on_trio_clock(self.setup.deadline, now_unix=time.time(), now_trio=trio.current_time())
        refusal: Diagnostic | None = None
        try:
            self._ses_evt = self.trace.emit("session_start", parent_id=None, **session_start_fields(self.setup))
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
            self._records.close()
        status, diag = self._deciding()
        summary = self._summary(*final_status(status, diag, refusal=refusal, left_behind=left_behind, lost=self._lost))
        self._emit(
            "session_end",
            total_turns=self._totals.turns,
            total_input_tokens=self._totals.input_tokens,
            total_output_tokens=self._totals.output_tokens,
            total_tool_calls=self._totals.tool_calls,
            total_shell_calls=self._totals.shell_calls,
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
        if self._guard is not None:
            self._guard.cancel()
        detach_log(self._log, log_handler)
        return summary

    def _summary(self, status: str, diag: Diagnostic | None) -> SessionSummary:
        return SessionSummary(
            session_id=self.session_id,
            status=status,
            exit_code=exit_code(status, diag),
            diagnostic=diag,
            records_dir=self.setup.records.root,
            result_path=self.setup.records.result if self._result_written else None,
            duration_ms=int((time.time() - self._started_at) * 1000),
            wind_down=self.wind_down_reason,
            reason=self._deciding_reason if diag is not None and diag.code == "E-RUN-040" else None,
            answer=self._answer,
        )

    async def _serve_and_run(
        self, stop_door: trio.Event, on_ready: Callable[[dict[str, Any]], None] | None
    ) -> Diagnostic | None:
        refusal: Diagnostic | None = None
        async with trio.open_nursery() as door_n:
            try:
                self.url = await door_n.start(partial(serve_door, self._door, stop_door, bind=self.setup.bind))
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
                    self._submit_local(self.setup.task_text)
                await self._runner()
            self._close(cause="session_stopped" if self.wind_down_reason else "session_ended")
            if self._running is not None:  # only if the runner was cancelled from outside
                self.cancel(self._running, "the session ended")
            await self.flush_records()
            status, diag = self._deciding()
            summary = self._summary(*final_status(status, refusal or diag, lost=self._lost))
            for end_hook in self.setup.end_hooks:
                try:
                    await end_hook(summary)
                except Exception:
                    self._log.error("end-of-session hook failed:\n%s", traceback.format_exc())
            remove_running(self.session_id)
            stop_door.set()
            door_n.cancel_scope.deadline = trio.current_time() + 2 * DOOR_GRACE
        return refusal
