"""A Trio instrument that fails a test whose event loop one task step held blocked (issue 31).

:class:`LoopGuard` times every task step (``before_task_step`` .. ``after_task_step``) and
counts only the time the Trio thread spent *off the CPU by its own doing* inside that step:
the step's wall time less the CPU time the thread used and less the time it waited on a run
queue for a CPU (both from ``/proc/thread-self/schedstat``). That is the time a blocking call
(``time.sleep``, a lock, a synchronous wait on a pipe or the disk) held the loop. It is not
wall time between steps, and a machine so loaded that the thread is preempted for a while does
not count against the step (the run-queue wait is subtracted), so the guard holds on a busy
2-core CI machine. CPU-bound steps are not counted either: how long those take depends on the
machine and on which modules an earlier test imported.

:func:`guarded_run` is a ``trio.run`` that adds the guard and raises ``AssertionError`` after the
run when a step was blocked for more than :data:`BLOCKED_LIMIT` seconds;
:func:`guard_items` makes pytest-trio use it for the tests it is given (``tests/conftest.py``
guards the session, formation and delegation tests).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import trio

BLOCKED_LIMIT = 0.1
"""Seconds one task step may keep the loop blocked (off the CPU, not waiting for one)."""

_SCHEDSTAT = "/proc/thread-self/schedstat"


class LoopGuard(trio.abc.Instrument):
    """Records every task step that kept the loop blocked longer than ``limit`` seconds.

    Attributes:
        blocked (list[tuple[str, float]]): (task name, blocked seconds) per offending step.
    """

    def __init__(self, limit: float = BLOCKED_LIMIT) -> None:
        self.limit = limit
        self.blocked: list[tuple[str, float]] = []
        self._fd: int | None = None
        self._t0 = 0.0
        self._s0 = 0

    def before_run(self) -> None:
        try:  # opened on the Trio thread: thread-self names it from now on
            self._fd = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def after_run(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _scheduled_ns(self) -> int:
        """Nanoseconds this thread ran on a CPU or waited on a run queue for one."""
        if self._fd is None:
            return time.thread_time_ns()  # no schedstat: a preempted step counts (kept loose)
        fields = os.pread(self._fd, 128, 0).split()
        return int(fields[0]) + int(fields[1])

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._t0 = time.perf_counter()
        self._s0 = self._scheduled_ns()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        wall = time.perf_counter() - self._t0
        if wall <= self.limit:
            return
        off_cpu = wall - (self._scheduled_ns() - self._s0) / 1e9
        if off_cpu > self.limit:
            self.blocked.append((task.name, off_cpu))

    def check(self) -> None:
        """Raise ``AssertionError`` naming each step that blocked the loop."""
        if self.blocked:
            steps = ", ".join(f"{name} ({secs * 1000:.0f} ms)" for name, secs in self.blocked)
            raise AssertionError(f"the event loop was blocked for more than {self.limit * 1000:.0f} ms "
                                 f"by one task step: {steps}")


def guarded_run(fn: Callable[..., Any], *args: Any, instruments: Iterable[trio.abc.Instrument] = (),
                **kwargs: Any) -> Any:
    """``trio.run`` with a :class:`LoopGuard`; raises ``AssertionError`` after a run it caught."""
    guard = LoopGuard()
    result = trio.run(fn, *args, instruments=(*instruments, guard), **kwargs)
    guard.check()
    return result


def guard_items(items: Iterable[pytest.Item]) -> None:
    """Make pytest-trio run each async test of ``items`` under :func:`guarded_run`."""
    for item in items:
        if item.get_closest_marker("trio") is not None or _is_async(item):
            item.add_marker(pytest.mark.trio(run=guarded_run), append=False)


def _is_async(item: pytest.Item) -> bool:
    import inspect

    fn = getattr(item, "obj", None)
    return fn is not None and inspect.iscoroutinefunction(fn)
