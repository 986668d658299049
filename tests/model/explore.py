"""Exhaustive breadth-first exploration of the protocol model, and the negative controls.

:func:`explore` visits every world reachable within ``scope.steps`` steps, once each (worlds
are hashed by :meth:`World.key`), checks every invariant on every world it reaches, and
returns the first violation of each with the shortest trace that reaches it (breadth first:
no shorter trace exists). A :class:`Control` is the same exploration with one guard removed
from a real action: :func:`mutant` recompiles the product's function from its own source with
one line replaced, and the control's protocol calls that copy instead.
"""

from __future__ import annotations

import inspect
import textwrap
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from murmur.roost.ledger import Ledger

from .invariants import INVARIANTS, Invariant
from .protocol import CAPPED, Protocol, Real, Scope, World


@attrs.frozen
class Violation:
    invariant: str
    message: str
    trace: tuple[str, ...]

    def render(self) -> str:
        steps = "\n".join(f"  {i + 1}. {s}" for i, s in enumerate(self.trace))
        return f"{self.invariant} violated after {len(self.trace)} steps: {self.message}\n{steps}"


@attrs.frozen
class Result:
    states: int
    transitions: int
    depth: int
    seconds: float
    violations: dict[str, Violation]


def _check(inv: Invariant, w: World, protocol: Protocol) -> str | None:
    if inv.name == "EventuallySettled":
        return inv.check(w, protocol.scope, protocol)
    return inv.check(w, protocol.scope)


def explore(protocol: Protocol, invariants: Iterable[Invariant] = INVARIANTS, *, stop_on: str | None = None) -> Result:
    """Breadth-first over every interleaving within ``protocol.scope.steps`` steps.

    Args:
        protocol (Protocol): the transition relation (possibly with a mutant).
        invariants: the invariants to check on every world reached.
        stop_on (str | None): stop at the first violation of this invariant (a control).

    Returns:
        Result: worlds visited, transitions taken, seconds, first violation of each invariant.
    """
    invs = tuple(invariants)
    t0 = time.perf_counter()
    start = protocol.initial()
    parents: dict[Any, tuple[Any, str] | None] = {start.key(): None}
    queue: deque[tuple[World, Any, int]] = deque([(start, start.key(), 0)])
    found: dict[str, Violation] = {}
    transitions = 0
    depth = 0

    def trace(key: Any) -> tuple[str, ...]:
        out: list[str] = []
        link = parents[key]
        while link is not None:
            key, label = link
            out.append(label)
            link = parents[key]
        return tuple(reversed(out))

    while queue:
        w, key, d = queue.popleft()
        depth = max(depth, d)
        if d >= protocol.scope.steps:
            continue
        for label, n in protocol.successors(w):
            transitions += 1
            nkey = n.key()
            fresh = nkey not in parents
            if fresh:
                parents[nkey] = (key, label)
            for inv in invs:
                if inv.name in found or not (fresh or inv.per_step):
                    continue
                message = _check(inv, n, protocol)
                if message is not None:
                    if not fresh:  # reached again by another step: record this path
                        parents.setdefault(("v", nkey), (key, label))
                    found[inv.name] = Violation(inv.name, message, (*trace(key), label))
                    if inv.name == stop_on:
                        return Result(len(parents), transitions, d + 1, time.perf_counter() - t0, found)
            if fresh:
                queue.append((n, nkey, d + 1))
    return Result(len(parents), transitions, depth, time.perf_counter() - t0, found)


# -- negative controls --------------------------------------------------------------------------


def mutant(func: Callable[..., Any], old: str, new: str) -> Callable[..., Any]:
    """``func`` recompiled from its own source with the one line holding ``old`` changed.

    Raises:
        AssertionError: ``old`` does not occur exactly once (the product changed: update the
            control rather than let it silently test nothing).
    """
    source = textwrap.dedent(inspect.getsource(func))
    count = source.count(old)
    assert count == 1, f"{func.__qualname__}: expected exactly one {old!r}, found {count}"
    namespace: dict[str, Any] = {}
    code = compile(source.replace(old, new), f"<control: {func.__qualname__}>", "exec")
    exec(code, func.__globals__, namespace)
    return namespace[func.__name__]  # type: ignore[no-any-return]


@attrs.frozen
class Control:
    """One guard removed from one real action; its invariant must then be violated.

    Attributes:
        invariant (str): the invariant this control exists for.
        where (str): the function whose guard is removed (module.qualname).
        guard (str): the source text removed or replaced.
        replacement (str): what stands in its place.
        what (str): the guard, in words.
    """

    invariant: str
    where: str
    guard: str
    replacement: str
    what: str
    scope: Scope | None = None  # the scope it is explored in (None: the CI scope)

    def protocol(self, scope: Scope) -> Protocol:
        """The protocol with this control's mutant in place of the real function."""
        real = Real()
        owner, _, attr = self.where.rpartition(".")
        if owner.endswith("Ledger"):
            fn = mutant(getattr(Ledger, attr), self.guard, self.replacement)
            real.ledger_cls = type("ControlLedger", (Ledger,), {attr: fn})
            return Protocol(scope, real)
        if owner.endswith("Protocol"):
            fn = mutant(getattr(Protocol, attr), self.guard, self.replacement)
            return type("ControlProtocol", (Protocol,), {attr: fn})(scope, real)  # type: ignore[no-any-return]
        setattr(real, attr, mutant(getattr(real, attr), self.guard, self.replacement))
        return Protocol(scope, real)


CONTROLS: tuple[Control, ...] = (
    Control("LineageWF", "murmur.tree.lineage.Lineage.hand_down", '"root": self.root,', '"root": session_id,',
            "the handed-down root is the parent's own root (replaced by the parent's id)"),
    Control("Attenuation", "murmur.roost.Ledger.grant_spawn", "if verdict is not None:", "if False:",
            "POST /spawn refuses a child the referee finds wider than its parent"),
    Control("SpawnSetAttenuates", "tests.model.protocol.Protocol.spawn",
            "if name in CAPSULES[p.capsule].envelope.spawn_allow and name not in p.lineage.spawn:", "if False:",
            "the runtime refuses a name outside the effective spawn set before mur-roost is asked"),
    Control("DepthBound", "murmur.roost.Ledger.check_spawn", "if s.depth_remaining <= 0:", "if False:",
            "POST /spawn refuses a session with no depth left"),
    Control("ConcurrencyBound", "murmur.roost.Ledger.check_spawn", "if children >= b.max_concurrent:", "if False:",
            "POST /spawn refuses a session holding --max-concurrent children"),
    Control("CeilingBound", "murmur.roost.Ledger.check_spawn", "if held >= b.max_live_capsules:", "if False:",
            "POST /spawn refuses while the host holds --max-live-capsules"),
    Control("TotalBound", "murmur.tree.caps.cap_refusal",
            "if caps.total is not None and taken is not None and taken > caps.total:", "if False:",
            "the runtime refuses an attempt past --max-tree-total (counted under flock) before mur-roost is asked",
            scope=CAPPED),
    Control("SameCapsuleChainBound", "murmur.tree.caps.cap_refusal", "if caps.same_chain is not None:", "if False:",
            "the runtime refuses a same-capsule step past --max-same-capsule-chain before mur-roost is asked",
            scope=CAPPED),
    Control("LiveUnderLive", "tests.model.protocol.Protocol.grace_expires", "self._kill_left(w, targets)", "pass",
            "the grace's SIGKILL of what is still alive (cascade.kill_left)"),
    Control("CancelPropagates", "murmur.tree.cascade.plan_cascade", "for n in node.walk():",
            "for n in (node, *node.children):", "the cascade plan walks the whole subtree, not one level"),
    Control("RevokedAtRestart", "tests.model.protocol.Protocol.register", "if refused is not None:", "if False:",
            "a child whose POST /register is refused does not run (the start hook raises)"),
    Control("NoReplay", "murmur.roost.Ledger.register_delegated", "if approval.state is _ApprovalState.REDEEMED:",
            "if False:", "POST /register refuses an approval already redeemed"),
    Control("ReportedOnce", "tests.model.protocol.Protocol._claim", "if w.reports.get(d):", "if False:",
            "the completion claim is exclusive (completion.json created O_EXCL)"),
    Control("EventuallySettled", "tests.model.protocol.Protocol.exit",
            "self._cascade(w, path, include_self=False)  # the end hook: cascade_from_session", "pass",
            "a session's end cascades to its live descendants (cascade_from_session)"),
)
