"""Wind-down: why a session is ending, the 20 s guard, and the forced exit (spec/session.md).

Whatever triggers it (SIGTERM/SIGINT/SIGHUP, a lifeline's EOF, the ``--deadline``, a failed
trace write), a session winds down the same way: stop taking work, cancel the live task,
refuse queued ones (``task rejected: the session is closing``), run the end-of-session hooks,
write ``session_end``, exit. The first trigger wins; later ones change nothing. A
:class:`WindDown` value says how the trigger colours the ending (the trace record written first,
the ``canceled:`` text, the ``session_end.exit_status``).

:class:`Guard` exits the process with status 143 a fixed time after the trigger wherever
teardown is (a daemon thread, so even a blocked event loop cannot hold it). :func:`forced_exit`
is that exit: it runs the registered synchronous forced-exit hooks (kill process groups, remove
the running record), kills everything this process's containment holds
(:func:`murmur.containment.kill_all_here`), flushes stdio, and calls ``os._exit``.

:class:`WindingDown` is one session's wind-down once triggered (the sequence above), and
:func:`watch_deadline` the watcher that triggers it when the ``--deadline`` falls.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import attrs
import trio

from murmur import containment
from murmur.diagnostics import Diagnostic, error
from murmur.session.deadline import rfc3339

if TYPE_CHECKING:
    from murmur.session.tasks.book import Task
    from murmur.session.tasks.desk import Intake
    from murmur.session.trace import SessionTrace


@attrs.frozen
class WindDown:
    """Why a session winds down, and how that shows in its records.

    Attributes:
        cause (str): ``signal`` | ``lifeline`` | ``deadline`` | ``trace`` | ``stop`` (free-form
            for other triggers).
        detail (str): a short human phrase (``SIGTERM``, ``the formation ended``).
        cancel_note (str): the text after ``canceled: `` for a task this wind-down cancels.
        busy_status (str): ``session_end.exit_status`` when the wind-down cancelled a running
            task (``canceled`` for a signal; ``formation_ended`` for a formation lifeline).
        status (str | None): ``session_end.exit_status`` whatever happened (``deadline_reached``).
        trace_event (str | None): a record written before anything else the wind-down writes
            (``formation_ended``, ``spawner_ended``, ``deadline_reached``).
        trace_fields (Mapping[str, Any]): that record's fields.
        diagnostic (Diagnostic | None): printed when the session exits (``E-RUN-053``).
    """

    cause: str
    detail: str
    cancel_note: str
    busy_status: str = "canceled"
    status: str | None = None
    trace_event: str | None = None
    trace_fields: Mapping[str, Any] = attrs.field(factory=dict)
    diagnostic: Diagnostic | None = None


def signal_wind_down(signame: str) -> WindDown:
    """A first ``SIGTERM``/``SIGINT``/``SIGHUP``: running task ``canceled``, idle ends ``ok``."""
    return WindDown("signal", signame, f"the session received {signame}")


def cascade_wind_down() -> WindDown:
    """The cascade of a stopped tree (spec/tree.md): like a first SIGTERM (``canceled``)."""
    return WindDown("cascade", "its tree was stopped", "the session's tree was stopped")


def deadline_wind_down(deadline: float, *, formation_id: str | None = None) -> WindDown:
    """The ``--deadline`` fell: ``deadline_reached`` whatever happened, ``E-RUN-053``.

    Args:
        deadline (float): the deadline moment, Unix seconds.
        formation_id (str | None): carried in the ``deadline_reached`` record for members.
    """
    at = rfc3339(deadline)
    fields: dict[str, Any] = {"deadline": at}
    if formation_id:
        fields["formation_id"] = formation_id
    return WindDown(
        "deadline",
        f"the deadline {at} was reached",
        f"the deadline {at} was reached",
        status="deadline_reached",
        trace_event="deadline_reached",
        trace_fields=fields,
        diagnostic=error("E-RUN-053", f"the deadline {at} was reached; the session ended"),
    )


def lifeline_wind_down(
    *,
    trace_event: str,
    detail: str,
    busy_status: str = "canceled",
    trace_fields: Mapping[str, Any] | None = None,
) -> WindDown:
    """A lifeline's EOF (formation or spawner), for the helpers that own those lifelines.

    Args:
        trace_event (str): ``formation_ended`` or ``spawner_ended``.
        detail (str): e.g. ``the formation ended``.
        busy_status (str): ``formation_ended`` for a formation member (exit 0), ``canceled``
            (exit 1) for a spawner lifeline, which ends "like a first SIGTERM".
        trace_fields (Mapping[str, Any] | None): the record's fields.
    """
    return WindDown(
        "lifeline",
        detail,
        detail,
        busy_status=busy_status,
        trace_event=trace_event,
        trace_fields=dict(trace_fields or {}),
    )


# --- forced exit -----------------------------------------------------------------------------

_forced_exit_hooks: list[Callable[[], None]] = []
_hooks_lock = threading.Lock()


def add_forced_exit_hook(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` (synchronous, quick, must not raise past itself) before a forced exit.

    Returns:
        Callable[[], None]: a function that unregisters the hook.
    """
    with _hooks_lock:
        _forced_exit_hooks.append(hook)

    def remove() -> None:
        with _hooks_lock:
            if hook in _forced_exit_hooks:
                _forced_exit_hooks.remove(hook)

    return remove


def run_forced_exit_hooks() -> None:
    """Run every forced-exit hook, newest first, ignoring their failures."""
    with _hooks_lock:
        hooks = list(reversed(_forced_exit_hooks))
    for hook in hooks:
        try:
            hook()
        except BaseException:  # nothing may stop the exit
            pass


def forced_exit(status: int = 143) -> NoReturn:
    """Exit the process now with ``status`` (hooks run, the contained processes killed,
    stdio flushed, no unwinding). The one forced exit: a session's (second signal, the 20 s
    guard) and a formation launcher's (a second signal)."""
    run_forced_exit_hooks()
    try:
        containment.kill_all_here()
    except BaseException:  # nothing may stop the exit
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # a closed pipe must not stop the exit
            pass
    os._exit(status)


class Guard:
    """Calls ``exit_fn(143)`` ``delay`` seconds after :meth:`start`, unless cancelled.

    Args:
        delay (float): seconds (the wind-down guard, 20 s in production).
        exit_fn (Callable[[int], None]): the exit (``forced_exit``; tests pass a recorder).
    """

    def __init__(self, delay: float, exit_fn: Callable[[int], None] = forced_exit) -> None:
        self.delay = delay
        self._exit_fn = exit_fn
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        """Arm the guard (idempotent)."""
        if self._timer is None:
            self._timer = threading.Timer(self.delay, self._exit_fn, args=(143,))
            self._timer.daemon = True
            self._timer.name = "murmur-wind-down-guard"
            self._timer.start()

    @property
    def armed(self) -> bool:
        """Whether :meth:`start` was called and :meth:`cancel` was not."""
        return self._timer is not None

    def cancel(self) -> None:
        """Disarm (the session ended in time)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


# --- one session's wind-down -------------------------------------------------------------------


class TaskCanceller(Protocol):
    """What the wind-down needs of the runner (a :class:`murmur.session.tasks.runner.Runner`)."""

    def cancel(self, task: Task, reason: str) -> bool: ...


class WindingDown:
    """One session's wind-down: begun once, by the first trigger (spec/session.md "Wind-down").

    Args:
        trace (SessionTrace): where the trigger's own record goes.
        intake (Intake): admission (closed; its queued tasks are refused).
        runner (TaskCanceller): the runner (its running task is cancelled).
        guard (Guard | None): armed when the wind-down begins; None in in-process tests.
        hooks (Sequence[Callable[[WindDown], None]]): ``SessionSetup.wind_down_hooks``.
        log (logging.Logger): where a failing hook is logged.

    Attributes:
        reason (WindDown | None): the trigger, once one fired.
        canceled_running (bool): the wind-down cancelled the task that was running.
    """

    def __init__(
        self,
        trace: SessionTrace,
        intake: Intake,
        runner: TaskCanceller,
        *,
        guard: Guard | None,
        hooks: Sequence[Callable[[WindDown], None]],
        log: logging.Logger,
    ) -> None:
        self._trace = trace
        self._intake = intake
        self._runner = runner
        self._guard = guard
        self._hooks = hooks
        self._log = log
        self.reason: WindDown | None = None
        self.canceled_running = False

    def begin(self, reason: WindDown) -> None:
        """Start the wind-down (idempotent: the first trigger wins).

        Arms the guard, writes the trigger's record, stops taking work and refuses queued
        tasks, cancels the running one, runs the wind-down hooks, and wakes the runner.
        """
        if self.reason is not None:
            return
        self.reason = reason
        if self._guard is not None:
            self._guard.start()
        if reason.trace_event:
            self._trace.emit(reason.trace_event, **dict(reason.trace_fields))
        self._intake.close(cause="session_stopped")
        running = self._intake.running
        if running is not None and not running.terminal and self._runner.cancel(running, reason.cancel_note):
            self.canceled_running = True
        for hook in self._hooks:
            try:
                hook(reason)
            except Exception:
                self._log.error("wind-down hook failed:\n%s", traceback.format_exc())
        self._intake.wake()

    def disarm(self) -> None:
        """The session ended in time: cancel the guard."""
        if self._guard is not None:
            self._guard.cancel()


async def watch_deadline(
    trigger: Callable[[WindDown], None], *, deadline: float, at: float, formation_id: str | None
) -> None:
    """Wind down when a cancel scope whose ``deadline`` is the session's expires.

    Args:
        trigger (Callable[[WindDown], None]): starts the wind-down.
        deadline (float): the ``--deadline`` moment, Unix seconds (for the records).
        at (float): the same moment on the Trio clock (the scope's deadline).
        formation_id (str | None): carried in ``deadline_reached`` for members.
    """
    with trio.CancelScope(deadline=at) as scope:
        await trio.sleep_forever()
    if scope.cancelled_caught:
        trigger(deadline_wind_down(deadline, formation_id=formation_id))
