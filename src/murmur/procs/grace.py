"""Ending a process the runtime owns: ask, wait the grace, SIGKILL, reap — in one place.

Specification: ``spec/session.md`` "Containment". Every owner that ends a process it started
goes through :func:`end_within`: the formation launcher ending a member (it asks by closing
the member's lifeline, then kills the member's unit 25 s later) and a delegating session
ending a child (it asks with SIGTERM, then kills the child's unit after the stop grace).
How to ask, how to wait and what to kill are the owner's; the order, the bound and "always
reaped" are this function's. Run it shielded when it must finish under cancellation.

A command that is not asked (a shell step, an agent CLI) ends with
:meth:`murmur.procs.OwnedProcess.kill_and_reap`: its unit is killed, it is reaped and its
pipes closed, shielded, and its unit released.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

__all__ = ["end_within"]


async def end_within(
    grace: float,
    *,
    ask: Callable[[], None],
    alive: Callable[[], bool],
    wait: Callable[[], Awaitable[object]],
    kill: Callable[[], None],
) -> bool:
    """Ask a process to end, give it ``grace`` seconds, then kill it; always reaped.

    Args:
        grace (float): seconds between asking and killing.
        ask (Callable[[], None]): asks it to end (SIGTERM, closing its lifeline); called once,
            whether or not it still runs.
        alive (Callable[[], bool]): whether it still runs (not reaped yet).
        wait (Callable[[], Awaitable[object]]): returns once it has exited and is reaped.
        kill (Callable[[], None]): SIGKILLs it (its unit or process group).

    Returns:
        bool: True when it had to be killed.
    """
    running = alive()
    ask()
    killed = False
    if running:
        with trio.move_on_after(grace):
            await wait()
        if alive():
            kill()
            killed = True
    await wait()
    return killed
