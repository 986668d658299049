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
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from murmur import containment
from murmur.diagnostics import Diagnostic, error
from murmur.session.deadline import rfc3339


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


def forced_exit(status: int = 143) -> None:
    """Exit the process now with ``status`` (hooks run, the contained processes killed,
    stdio flushed, no unwinding)."""
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
