"""Waiting for something outside the Trio loop (the kernel, a thread) on real time.

Specification: ``spec/architecture.md`` "Nothing blocks the event loop". A cgroup that empties
after ``cgroup.kill`` or a records file a writer thread finishes happens in real time, not on
the Trio clock. :func:`wait_real` waits for such a thing without holding the loop (the wait is
an ordinary Trio wait) and bounds it in real seconds. While it waits, Trio's clock holds still:
an autojumping ``MockClock`` would otherwise see an idle loop and leap past every timer (a
session's deadline, a caller's bound) while the kernel or the thread works.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import trio

# The function trio.testing re-exports (tests/test_realtime.py checks they are one): importing
# trio.testing itself would load pytest wherever it is installed.
from trio._core._run import wait_all_tasks_blocked

__all__ = ["HOLD_CUSHION", "wait_real"]

HOLD_CUSHION = 0.01
"""Real seconds the loop may sit idle before :func:`wait_real` looks at its bound again."""


async def wait_real(wait: Callable[[], Awaitable[object]], bound: float) -> bool:
    """Run ``wait()`` for at most ``bound`` real seconds; whether it returned in time.

    Args:
        wait: an async callable that returns once the awaited thing happened (an inotify
            wait, a :class:`trio.Event`'s ``wait``); it is cancelled at the bound.
        bound (float): real seconds (``time.monotonic``), whatever the Trio clock.

    Returns:
        bool: True when ``wait()`` returned, False when the bound passed first.

    The loop is never held: ``wait()`` is awaited like any Trio wait, and a second task wakes
    every :data:`HOLD_CUSHION` idle seconds (``wait_all_tasks_blocked``, which also keeps an
    autojumping ``MockClock`` from jumping) to look at the real bound.
    """
    give_up = time.monotonic() + bound
    done = False

    async def hold(scope: trio.CancelScope) -> None:
        while time.monotonic() < give_up:
            await wait_all_tasks_blocked(HOLD_CUSHION)
        scope.cancel()

    async with trio.open_nursery() as nursery:
        with trio.move_on_after(bound):  # the real clock's own bound (the holder's needs an idle loop)
            nursery.start_soon(hold, nursery.cancel_scope)
            await wait()
            done = True
        nursery.cancel_scope.cancel()
    return done
