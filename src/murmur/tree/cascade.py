"""The cascade: one grace for every depth (spec/tree.md "Cascade").

Ending a node ends its whole subtree at once: every live descendant begins its wind-down at
the trigger's moment (it gets :data:`CASCADE_SIGNAL`, which winds a session down like a first
SIGTERM but does not count toward the second-signal rule, so its parent's own SIGTERM later
never turns into an immediate 143), refuses new delegations from then on, exits 143 at its
own 20 s guard, and whatever is still alive :data:`murmur.timing.LAUNCHER_KILL` (25 s) after
the trigger is killed by whoever triggered.

:func:`plan_cascade` is pure (which nodes, which moment, what deadline). The signalling is in
:func:`signal_plan` and :func:`kill_left`; the latter (the step the containment unit is to take
over, spec/tree.md "Cascade") SIGKILLs each recorded process (its process group when it
leads one), named by pid *and* start time so a reused pid is never touched.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence

import attrs

from murmur import procstat, timing
from murmur.session import CASCADE_SIGNAL
from murmur.tree.forest import Node

__all__ = ["CASCADE_SIGNAL", "CascadePlan", "Target", "kill_left", "plan_cascade", "signal_plan", "wait_gone"]



@attrs.frozen
class Target:
    """One live session of a subtree, named by pid and start time.

    Attributes:
        session_id (str): ``ses_…``.
        pid (int): its process.
        start_time (int): ``/proc/<pid>/stat`` field 22 when it started.
        depth (int): its lineage depth.
        is_target (bool): the node ``mur stop`` named (it gets SIGTERM, not the cascade signal).
    """

    session_id: str
    pid: int
    start_time: int
    depth: int
    is_target: bool = False


@attrs.frozen
class CascadePlan:
    """What a cascade does and when.

    Attributes:
        node_id (str): the node whose subtree ends.
        targets (tuple[Target, ...]): every live session in the subtree, deepest first.
        trigger_s (float): the trigger's moment (the clock the caller uses).
        kill_at_s (float): ``trigger_s`` + 25 s: whatever is alive then is killed.
    """

    node_id: str
    targets: tuple[Target, ...]
    trigger_s: float
    kill_at_s: float

    @property
    def descendants(self) -> tuple[Target, ...]:
        """The targets below the named node."""
        return tuple(t for t in self.targets if not t.is_target)


def plan_cascade(
    node: Node, trigger_s: float, *, include_self: bool = True, kill_after: float = timing.LAUNCHER_KILL
) -> CascadePlan:
    """The cascade for ``node``'s subtree (pure).

    Args:
        node (Node): the node being ended (a formation, a session).
        trigger_s (float): the trigger's moment.
        include_self (bool): whether ``node`` itself is a target (False when a session
            cascades from its own wind-down: it is already ending).
        kill_after (float): seconds from the trigger to the kill (25 s in production).

    Returns:
        CascadePlan: every live session of the subtree with a recorded process, deepest first.
    """
    targets: list[Target] = []
    for n in node.walk():
        if n.kind != "session" or n.state == "ended" or n.pid is None or n.start_time is None:
            continue
        if n is node and not include_self:
            continue
        depth = (n.lineage or {}).get("depth")
        targets.append(Target(n.id, n.pid, n.start_time, depth if isinstance(depth, int) else 1, n is node))
    targets.sort(key=lambda t: -t.depth)
    return CascadePlan(node.id, tuple(targets), trigger_s, trigger_s + kill_after)


# -- signalling (I/O) ----------------------------------------------------------------------------


def _same_process(t: Target) -> bool:
    """The pid still names the target and it has not exited (a zombie waiting to be reaped
    by its parent has ended)."""
    stat = procstat.read_stat(t.pid)
    return stat is not None and stat.start_time == t.start_time and stat.state not in ("Z", "X")


def send(t: Target, sig: signal.Signals) -> bool:
    """Signal one target if its pid still names it; whether a signal was sent."""
    if not _same_process(t):
        return False
    try:
        os.kill(t.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_plan(plan: CascadePlan, *, target_signal: signal.Signals = signal.SIGTERM) -> list[Target]:
    """Start the wind-down of every target at once: the cascade signal to each descendant
    (deepest first), then ``target_signal`` to the named node. Returns the targets signalled."""
    sent = [t for t in plan.targets if not t.is_target and send(t, CASCADE_SIGNAL)]
    sent += [t for t in plan.targets if t.is_target and send(t, target_signal)]
    return sent


def alive(targets: Iterable[Target]) -> list[Target]:
    """The targets whose process still runs."""
    return [t for t in targets if _same_process(t)]


def kill_left(targets: Iterable[Target]) -> list[Target]:
    """SIGKILL what is left of a subtree (the 25 s step); returns what was killed.

    Each target's process group is killed when the target leads it (a delegated child and
    its commands), else the process alone.
    """
    killed: list[Target] = []
    for t in targets:
        if not _same_process(t):
            continue
        try:
            if os.getpgid(t.pid) == t.pid:
                os.killpg(t.pid, signal.SIGKILL)
            else:
                os.kill(t.pid, signal.SIGKILL)
            killed.append(t)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def wait_gone(
    targets: Sequence[Target],
    until_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = 0.05,
    progress: Callable[[int], None] | None = None,
) -> list[Target]:
    """Poll until every target is gone or ``until_s``; returns those still alive."""
    left = alive(targets)
    while left and clock() < until_s:
        sleep(min(poll, max(0.0, until_s - clock())))
        before = len(left)
        left = alive(left)
        if progress is not None and len(left) != before:
            progress(len(left))
    return left


def cascade_from_session(session_id: str) -> list[Target]:
    """A session's wind-down began: give every live descendant the cascade signal now.

    Best effort (an unreadable journal cascades nothing; each descendant's own lifeline
    still ends it). Returns the descendants signalled.
    """
    try:
        from murmur.tree.forest import find
        from murmur.tree.snapshot import load_forest

        node = find(load_forest(), session_id)
    except (OSError, ValueError):
        return []
    if node is None:
        return []
    return signal_plan(plan_cascade(node, time.monotonic(), include_self=False))
