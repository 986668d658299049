"""``mur stop ID`` for a node of the tree: its whole subtree in one grace (spec/tree.md).

The node may be a formation id, a session id, or a short id unique in the forest. At the
trigger's moment every live descendant gets the cascade signal and the node itself SIGTERM
(a formation: its launcher, through :func:`murmur.formation.launch.stop.stop_formation`, which
keeps spec/formation.md's "How a formation ends" for its members); 25 s after the trigger whatever of the subtree is
still alive is SIGKILLed (:func:`murmur.tree.cascade.kill_left`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import attrs

from murmur import timing
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.tree import cascade
from murmur.tree.forest import Node, resolve, short_ids

KILL_SETTLE = 5.0
"""After SIGKILL, how long the killed processes may take to disappear."""


@attrs.frozen
class TreeStop:
    """What a cascade stop did.

    Attributes:
        node_id (str): the node named.
        kind (str): ``session`` | ``formation``.
        ended (tuple[str, ...]): the sessions that were live and are gone now.
        killed (tuple[str, ...]): those SIGKILLed at the 25 s step.
        left (tuple[str, ...]): still alive after the kill (E-RUN-024 territory).
        seconds (float): from the trigger until the last was gone.
        lines (tuple[str, ...]): launcher lines of a formation stop.
        kill_after (float): seconds from the trigger to the SIGKILL of what was left.
    """

    node_id: str
    kind: str
    ended: tuple[str, ...]
    killed: tuple[str, ...]
    left: tuple[str, ...]
    seconds: float
    lines: tuple[str, ...] = ()
    kill_after: float = timing.LAUNCHER_KILL

    def to_json(self) -> dict[str, Any]:
        """The ``mur stop --json`` object."""
        return {"stopped": self.node_id, "node": self.kind, "sessions": list(self.ended),
                "killed": list(self.killed), "left": list(self.left), "seconds": round(self.seconds, 3)}

    def text(self) -> list[str]:
        """The human lines."""
        n = len(self.ended)
        out = [f"stopped: {self.node_id}", *self.lines,
               f"sessions: {n} ended in {self.seconds:.1f}s"]
        if self.killed:
            out.append(f"killed: {len(self.killed)} still running {self.kill_after:g}s after the trigger")
        if self.left:
            out.append(f"left: {', '.join(self.left)}")
        return out


def find_node(roots: list[Node], text: str) -> Node | None:
    """The node ``text`` names, None when none does.

    Raises:
        DiagnosticError: ``E-TRE-003`` when it names several.
    """
    found = resolve(roots, text)
    if len(found) > 1:
        shorts = short_ids(n.id for n in found)
        raise DiagnosticError(
            error("E-TRE-003", f"{text} names {len(found)} nodes of the tree ({', '.join(shorts[n.id] for n in found)})",
                  hint="give more of the id; `mur ps --tree` lists short ids that are unique")
        )
    return found[0] if found else None


def stop_node(
    node: Node,
    *,
    kill_after: float = timing.LAUNCHER_KILL,
    clock: Callable[[], float] = time.monotonic,
    progress: bool = True,
) -> TreeStop:
    """End ``node``'s subtree in one grace (see the module docstring).

    Raises:
        DiagnosticError: ``E-RUN-022`` when nothing of the subtree runs; from a formation's
            launcher stop, ``E-RUN-024``.
    """
    trigger = clock()
    plan = cascade.plan_cascade(node, trigger, include_self=node.kind == "session", kill_after=kill_after)
    live = cascade.alive(plan.targets)
    if not live and node.kind in ("session", "delegation"):
        state = (f"ended {node.status}" if node.state == "ended"
                 else f"{node.status}: it never started a session" if node.kind == "delegation" else node.state)
        raise DiagnosticError(
            error("E-RUN-022", f"{node.id} names nothing running here (it is {state})",
                  hint="`mur ps --tree` lists the trees and their states")
        )
    lines: tuple[str, ...] = ()
    if node.kind == "formation":
        from murmur.formation import stop_formation

        members = {c.id for c in node.children}
        cascade.signal_plan(attrs.evolve(plan, targets=tuple(t for t in plan.targets if t.session_id not in members)))
        report = stop_formation(node.id, timeout=max(1.0, kill_after + 5.0))
        lines = tuple(line for line in report.lines if not line.startswith("stopped:"))
    else:
        cascade.signal_plan(plan)

    said = [False]

    def note(left: int) -> None:
        if progress and not said[0] and clock() - trigger > 2.0:
            said[0] = True
            print(f"stop: waiting for {left} session{'s' if left != 1 else ''} to wind down "
                  f"(killed at {kill_after:g}s)", file=sys.stderr, flush=True)

    left = cascade.wait_gone(live, plan.kill_at_s, clock=clock, progress=note)
    killed = cascade.kill_left(left)
    still = cascade.wait_gone(killed, clock() + KILL_SETTLE, clock=clock)
    gone_at = clock()
    return TreeStop(
        node.id,
        node.kind,
        tuple(t.session_id for t in live if t not in still),
        tuple(t.session_id for t in killed),
        tuple(t.session_id for t in still),
        gone_at - trigger,
        lines,
        kill_after,
    )
