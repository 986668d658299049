"""The model's invariants (spec/model.md, "Invariants"), each a check of one world.

Each takes the world a step produced (its ``events`` say what that step did) and the
protocol, and returns None or a sentence saying what is wrong. They read the model's truth
(who launched whom, which processes are alive), not the product's bookkeeping, so a guard
missing from the product shows as a violation rather than as consistent wrong numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .protocol import CAPSULES, World, dlg, frm, sid


@attrs.frozen
class Invariant:
    """``per_step``: it reads what the step did (``World.events``), so it is checked on every
    transition; otherwise once per distinct world."""

    name: str
    protects: str
    check: Callable[..., str | None]
    per_step: bool = False


def lineage_wf(w: World, scope: object) -> str | None:
    roots = {p.path for p in w.procs.values() if p.parent is None}
    for p in w.procs.values():
        lin = p.lineage
        if lin is None:
            continue
        if p.parent is None:
            want_root = frm(p.path) if lin.parent is not None else sid(p.path)
            if lin.depth != 1 or lin.root != want_root:
                return f"{p.path} is a root but records depth {lin.depth}, root {lin.root}"
            continue
        parent = w.procs.get(p.parent)
        if parent is None or parent.lineage is None:
            return f"{p.path}'s parent {p.parent} has no lineage"
        if lin.parent != f"session:{sid(p.parent)}":
            return f"{p.path} records parent {lin.parent}, not {p.parent}"
        if lin.depth != parent.lineage.depth + 1:
            return f"{p.path} records depth {lin.depth} under {p.parent} at depth {parent.lineage.depth}"
        if lin.root != parent.lineage.root:
            return f"{p.path} records root {lin.root}, its parent {p.parent} root {parent.lineage.root}"
    for p in w.procs.values():
        top = p
        while top.parent is not None:
            top = w.procs[top.parent]
        if top.path not in roots:
            return f"{p.path} has no root"
    return None


def _within(parent: object, child: object) -> str | None:
    for axis in ("network_allow", "peer_fetch_allow", "shell_allow", "spawn_allow", "env_allow", "state_stores"):
        extra = set(getattr(child, axis)) - set(getattr(parent, axis))
        if extra:
            return f"{axis} {sorted(extra)}"
    for flag in ("unix_sockets", "workdir_exec"):
        if getattr(child, flag) and not getattr(parent, flag):
            return flag
    return None


def attenuation(w: World, scope: object) -> str | None:
    for p in w.procs.values():
        if p.parent is None:
            continue
        parent = w.procs[p.parent]
        extra = _within(CAPSULES[parent.capsule].envelope, CAPSULES[p.capsule].envelope)
        if extra is not None:
            return f"{p.path} ({p.capsule}) holds {extra} that its parent {parent.path} ({parent.capsule}) does not"
    return None


def spawn_set_attenuates(w: World, scope: object) -> str | None:
    for p in w.procs.values():
        if p.parent is None:
            continue
        parent = w.procs[p.parent]
        assert parent.lineage is not None
        if p.capsule not in parent.lineage.spawn:
            return f"{p.path} is '{p.capsule}', outside its parent {parent.path}'s spawn set {list(parent.lineage.spawn)}"
        if p.lineage is not None and not set(p.lineage.spawn) <= set(parent.lineage.spawn):
            return f"{p.path}'s spawn set {list(p.lineage.spawn)} is wider than {parent.path}'s {list(parent.lineage.spawn)}"
    return None


def depth_bound(w: World, scope: object) -> str | None:
    limit = scope.bounds.max_depth + 1  # type: ignore[attr-defined]
    for p in w.procs.values():
        if p.depth > limit:
            return f"{p.path} sits at depth {p.depth}, beyond {limit} (--max-depth {limit - 1} below a root)"
    return None


def concurrency_bound(w: World, scope: object) -> str | None:
    bound = scope.bounds.max_concurrent  # type: ignore[attr-defined]
    for p in w.procs.values():
        if p.alive and w.live_children(p.path) > bound:
            return f"{p.path} holds {w.live_children(p.path)} live children (--max-concurrent {bound})"
    return None


def ceiling_bound(w: World, scope: object) -> str | None:
    bound = scope.bounds.max_live_capsules  # type: ignore[attr-defined]
    for ev in w.events:
        if ev.kind == "grant":
            parent, child, census, _, _ = ev.data
            if census >= bound:
                return f"{parent} was granted {child} while the host held {census} live capsules (--max-live-capsules {bound})"
    return None


def _covered(w: World) -> set[str]:
    return set().union(*w.cascades.values()) if w.cascades else set()


def live_under_live(w: World, scope: object) -> str | None:
    covered = _covered(w)
    for p in w.procs.values():
        if p.alive and p.parent is not None and not w.procs[p.parent].alive and p.path not in covered:
            return f"{p.path} is {p.proc} under {p.parent}, which ended, and no grace is pending for it"
    return None


def cancel_propagates(w: World, scope: object) -> str | None:
    for ev in w.events:
        if ev.kind != "cascade":
            continue
        trigger, origin, include_self, targets = ev.data
        reach = [d for d in w.descendants(origin) if d.alive]
        if include_self and w.procs[origin].alive:
            reach.append(w.procs[origin])
        for d in reach:
            if d.path not in targets or d.proc != "winding":
                return f"{trigger} did not reach {d.path} ({d.proc})"
    return None


def revoked_at_restart(w: World, scope: object) -> str | None:
    for p in w.procs.values():
        if p.approval is not None and p.started is not None and p.approval[0] != p.started:
            return (f"{p.path} began running in mur-roost generation {p.started} under an approval "
                    f"minted in generation {p.approval[0]}")
    for ev in w.events:
        if ev.kind == "grant" and ev.data[4] != w.epoch:
            return f"{ev.data[0]} was granted {ev.data[1]} on a credential from before the restart"
    return None


def no_replay(w: World, scope: object) -> str | None:
    seen: dict[str, str] = {}
    for p in sorted(w.procs.values(), key=lambda p: p.path):
        if p.parent is None or p.started is None:
            continue
        d = dlg(p.path)
        if d in seen:
            return f"delegation {p.path.rstrip(chr(39))} started two sessions ({seen[d]} and {p.path})"
        seen[d] = p.path
    return None


def reported_once(w: World, scope: object) -> str | None:
    for d, reporters in w.reports.items():
        if len(reporters) > 1:
            return f"delegation {d[:12]}… reported {len(reporters)} times (by {', '.join(reporters)})"
    for d, n in w.taken.items():
        if n > 1:
            return f"the parent's door took the completion of {d[:12]}… {n} times"
    for p in w.procs.values():
        if p.owed and not w.reports.get(dlg(p.path)):
            return f"{p.path} ended under a live parent and its delegation was never reported"
    return None


def total_bound(w: World, scope: object) -> str | None:
    """Delegations launched under one root (the truth: children the model started, not the
    product's count) never exceed ``--max-tree-total``; an approval's replayed copy is no launch."""
    total = scope.total  # type: ignore[attr-defined]
    if total is None:
        return None
    launched: dict[str, int] = {}
    for p in w.procs.values():
        if p.parent is not None and "'" not in p.path:
            root = w.root_of(p.path)
            launched[root] = launched.get(root, 0) + 1
    for root, n in sorted(launched.items()):
        if n > total:
            return f"the tree of {root} launched {n} delegations (--max-tree-total {total})"
    return None


def same_chain_bound(w: World, scope: object) -> str | None:
    """No chain of consecutive parent -> child steps of one capsule is longer than
    ``--max-same-capsule-chain`` (the design's SameKitBound, for capsules)."""
    cap = scope.same_chain  # type: ignore[attr-defined]
    if cap is None:
        return None
    for p in w.procs.values():
        steps, q = 0, p
        while q.parent is not None and w.procs[q.parent].capsule == q.capsule:
            steps, q = steps + 1, w.procs[q.parent]
        if steps > cap:
            return f"{p.path} ends a chain of {steps} steps of '{p.capsule}' (--max-same-capsule-chain {cap})"
    return None


def eventually_settled(w: World, scope: object, protocol: object) -> str | None:
    drained = protocol.drain(w)  # type: ignore[attr-defined]
    left = sorted(p.path for p in drained.procs.values() if p.alive)
    if left:
        return f"once every root's task ended and every grace passed, still live: {', '.join(left)}"
    return None


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("LineageWF", "every node's parent exists, depth = parent's + 1, the parent's root; one root per tree", lineage_wf),
    Invariant("Attenuation", "a child's grants on every envelope axis within its parent's", attenuation),
    Invariant("SpawnSetAttenuates", "a child is in its parent's spawn set and its own set is no wider", spawn_set_attenuates),
    Invariant("DepthBound", "no session deeper than --max-depth levels below its root", depth_bound),
    Invariant("ConcurrencyBound", "live children plus unredeemed approvals of a session <= --max-concurrent", concurrency_bound),
    Invariant("CeilingBound", "no spawn granted while the host holds --max-live-capsules (sessions + approvals)", ceiling_bound, per_step=True),
    Invariant("TotalBound", "delegations launched under one root <= --max-tree-total", total_bound),
    Invariant("SameCapsuleChainBound", "no same-capsule parent -> child chain longer than --max-same-capsule-chain",
              same_chain_bound),
    Invariant("LiveUnderLive", "no live node under an ended parent once the grace has passed", live_under_live),
    Invariant("CancelPropagates", "a cascade reaches every live descendant at the same moment", cancel_propagates, per_step=True),
    Invariant("RevokedAtRestart", "nothing minted before a mur-roost restart is honoured after it", revoked_at_restart, per_step=True),
    Invariant("NoReplay", "a delegation starts at most one session", no_replay),
    Invariant("ReportedOnce", "every delegation reported at most once, and exactly once when its parent lived", reported_once),
    Invariant("EventuallySettled", "once every root has ended and the grace has passed, nothing is live", eventually_settled),
)
