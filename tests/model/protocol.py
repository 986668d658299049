"""The delegation and teardown protocol as an explicit-state model (spec/model.md).

A :class:`World` is one state of the whole protocol: mur-roost (its generation and its real
:class:`murmur.roost.ledger.Ledger`), every process the scope started (roots, formation
members, delegated children, an approval's replayed copy) and what the launchers and doors
recorded (cascades with a pending grace, completion claims, completions in flight, what each
parent's door took). :class:`Protocol` enumerates the actions enabled in a world and applies
each to a copy. Wherever the product has a pure decision, the action calls it:

* ``POST /spawn`` / ``/register`` / ``/deregister``, expiry, the census and the peer watch:
  :class:`~murmur.roost.ledger.Ledger` (``grant_spawn``, ``register_top_level``,
  ``register_delegated``, ``deregister``, ``process_ended``), with the referee
  :func:`murmur.roost.envelope.referee` inside ``grant_spawn``;
* the give-back of a failed launch's slot: the exchange :func:`murmur.delegation.release.give_back`
  makes (redeem under a fresh session id, then deregister ``failed``), on the ledger;
* lineage and the spawn set: :meth:`murmur.tree.lineage.Lineage.hand_down`,
  :func:`~murmur.tree.lineage.parse_handed`, :func:`~murmur.tree.lineage.effective_spawn`,
  :func:`~murmur.tree.lineage.child_lineage`, :func:`~murmur.tree.lineage.root_lineage`,
  :func:`~murmur.tree.lineage.member_lineage`;
* the cascade: :func:`murmur.tree.cascade.plan_cascade` over real :class:`murmur.tree.forest.Node`
  values;
* the tree caps (spec/tree.md "Caps"): :func:`murmur.tree.caps.cap_refusal` decides each attempt,
  :func:`~murmur.tree.caps.parse_caps` reads and :meth:`~murmur.tree.caps.TreeCaps.hand_down`
  writes the ``MURMUR_TREE_CAPS`` a child runs under; the per-tree count (``take_one``, a file
  under ``flock``) is :attr:`World.totals`, kept saturated at ``total + 1`` (every count past the
  total decides alike, so the abstraction loses no behaviour);
* a task's end: :func:`murmur.session.states.step`; the parent door's admission of a completion:
  :meth:`murmur.session.lifecycle.Policy.admit`, then :meth:`murmur.delegation.book.DelegationBook.decide`.

What is restated here (the runtime's I/O paths have no pure function to call) is kept to a
line each and named after the code it mirrors: the runtime's spawn guard
(``DelegationRuntime._refusal``), a refused registration ending the child (the start hook),
the end hook's cascade (``cascade_from_session``), the exclusive completion claim
(``completion.claim``) and the grace's kill (``cascade.kill_left``).

Time: ``now_ms`` moves only by :data:`TICK_MS` (one approval lifetime), so a tick expires
every approval granted before it. The grace is an event (:meth:`Protocol.grace_expires`), not
a clock: a winding-down process may exit at its own guard any time before it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, NamedTuple

import attrs

from murmur.delegation.book import DelegationBook, Entry
from murmur.manifest.model import AfterTask, TaskAcceptance
from murmur.roost.envelope import Envelope
from murmur.roost.ledger import (
    APPROVAL_LIFETIME_MS,
    Artifact,
    Bounds,
    Ledger,
    Outcome,
    Refusal,
    RefusalKind,
)
from murmur.roost.ledger import _Approval as _LApproval
from murmur.roost.ledger import _Session as _LSession
from murmur.session.completion_hook import CompletionRequest
from murmur.session.lifecycle import Admission, Policy
from murmur.session.states import TaskEvent, TaskState, step
from murmur.session.wire import InboundMessage
from murmur.tokens import ApprovalClaims
from murmur.tree import cascade as real_cascade
from murmur.tree import lineage as real_lineage
from murmur.tree.caps import CAPS_ENV, TreeCaps, cap_refusal, parse_caps
from murmur.tree.forest import Node as ForestNode
from murmur.tree.lineage import Lineage

T0 = 1_700_000_000_000
TICK_MS = APPROVAL_LIFETIME_MS
ALIVE = frozenset({"starting", "running", "winding"})
_FOREST_STATE = {"starting": "starting", "running": "running", "winding": "winding-down", "ended": "ended"}

# -- the scope -----------------------------------------------------------------------------------

CAPSULES: dict[str, Artifact] = {
    # names itself; may ask for b and c
    "a": Artifact("a", "0.1.0", "a" * 64, Envelope("a", network_allow=("api.x", "api.y"), spawn_allow=("a", "b", "c"))),
    # a leaf within a's grants
    "b": Artifact("b", "0.1.0", "b" * 64, Envelope("b", network_allow=("api.x",))),
    # a leaf that declares a host a does not hold: the referee refuses a -> c
    "c": Artifact("c", "0.1.0", "c" * 64, Envelope("c", network_allow=("api.z",))),
}


@attrs.frozen
class RootSpec:
    """One root the operator may start: ``mur run`` (operator) or a formation member."""

    path: str
    capsule: str
    kind: str  # "operator" | "formation"
    narrow: tuple[str, ...] | None = None  # MURMUR_SPAWN / --spawn, None: not narrowed


@attrs.frozen
class Scope:
    """How far the exploration goes."""

    roots: tuple[RootSpec, ...]
    bounds: Bounds
    steps: int
    restarts: int = 1
    replays: int = 1
    spawn_allow: tuple[str, ...] = ("a",)  # mur-roost --spawn-allow
    total: int | None = None  # mur run --max-tree-total (the roots')
    same_chain: int | None = None  # mur run --max-same-capsule-chain

    def describe(self) -> str:
        b = self.bounds
        roots = ", ".join(f"{r.path}={r.kind}:{r.capsule}" + (f"[spawn {','.join(r.narrow)}]" if r.narrow is not None else "")
                          for r in self.roots)
        caps = "".join(f" {flag} {v}" for flag, v in (("--max-tree-total", self.total),
                                                       ("--max-same-capsule-chain", self.same_chain)) if v is not None)
        return (f"capsules a (spawn a,b,c), b, c; roots {roots}; --max-depth {b.max_depth} "
                f"--max-concurrent {b.max_concurrent} --max-live-capsules {b.max_live_capsules}{caps}; "
                f"{self.steps} steps; {self.restarts} mur-roost restart(s); {self.replays} replayed approval(s)")

    def root_caps(self) -> str:
        """The ``MURMUR_TREE_CAPS`` a root runs under ("" when no cap is set)."""
        if self.total is None and self.same_chain is None:
            return ""
        return TreeCaps(self.total, self.same_chain).to_env()


OPERATOR = RootSpec("R", "a", "operator", narrow=("a", "c"))
"""``mur run a --spawn a,c``: names itself; ``b`` is outside its effective set, ``c`` outside its grants."""
MEMBER = RootSpec("F", "b", "formation")
"""A formation launch with one member, a leaf: it counts toward the census, delegates nothing."""
MEMBER_DELEGATING = RootSpec("F", "a", "formation", narrow=("b",))
"""A formation member of ``a`` with ``MURMUR_SPAWN=b``."""
SMALL = Scope((OPERATOR, MEMBER), Bounds(max_depth=2, max_concurrent=2, max_live_capsules=4), steps=8)
"""The CI scope."""
LARGE = Scope((OPERATOR, MEMBER_DELEGATING), Bounds(max_depth=2, max_concurrent=2, max_live_capsules=4), steps=8)
"""The ``slow`` scope: a delegating formation member (MURMUR_SPAWN=b) beside the operator's root."""
CAPPED = Scope((OPERATOR,), Bounds(max_depth=2, max_concurrent=2, max_live_capsules=4), steps=8, total=3,
               same_chain=1)
"""The tree caps' scope (CI): the self-naming operator root under ``--max-tree-total 3
--max-same-capsule-chain 1``; mur-roost alone would let it launch more, and deeper."""


@cache
def _hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@cache
def sid(path: str) -> str:
    """The ``ses_…`` id of the process at ``path`` (deterministic, so states hash)."""
    return "ses_" + _hex("ses" + path)


@cache
def dlg(path: str) -> str:
    """The ``dlg_…`` id of the delegation that launched ``path``."""
    return "dlg_" + _hex("dlg" + path.rstrip("'"))


@cache
def frm(path: str) -> str:
    return "frm_" + _hex("frm" + path)


# -- the state -----------------------------------------------------------------------------------


class Proc(NamedTuple):
    """One process of the scope (a session), as the model knows it.

    ``depth`` and ``parent`` are the truth (who launched whom), against which the recorded
    ``lineage`` is checked.
    """

    path: str
    parent: str | None
    capsule: str
    depth: int
    proc: str  # starting | running | winding | ended
    task: TaskState = TaskState.WORKING
    status: str | None = None
    lineage: Lineage | None = None
    handed: str | None = None  # MURMUR_LINEAGE its parent handed it
    approval: tuple[int, ApprovalClaims] | None = None  # (mur-roost generation, claims)
    registered: int | None = None  # generation it registered in
    started: int | None = None  # generation it began running in
    noticed_restart: bool = False  # got the identity refusal: uncertain, delegates nothing
    roost_told: bool = True  # mur-roost knows it ended (deregister / peer watch)
    next_child: int = 0
    owed: bool = False  # ended while its parent's launcher lived: a report is owed
    caps: str = ""  # the MURMUR_TREE_CAPS it runs under (a root's from the scope, a child's handed down)

    @property
    def alive(self) -> bool:
        return self.proc in ALIVE

    @property
    def dlg(self) -> str | None:
        return dlg(self.path) if self.parent is not None else None


@attrs.frozen
class Event:
    """What a transition did that a transition invariant reads."""

    kind: str  # "grant" | "cascade" | "register"
    data: tuple[Any, ...]


@attrs.define
class World:
    """One state of the protocol. ``events`` (what the last step did) is not part of the key."""

    epoch: int
    now: int
    ledger: Ledger
    procs: dict[str, Proc]
    cascades: dict[str, frozenset[str]]  # trigger -> targets whose grace is pending
    reports: dict[str, tuple[str, ...]]  # dlg -> reporters that claimed it
    taken: dict[str, int]  # dlg -> times the parent's door took its completion
    inflight: frozenset[str]
    restarts: int = 0
    replays: int = 0
    serial: int = 0  # names cascades
    events: tuple[Event, ...] = ()
    totals: dict[str, int] = attrs.field(factory=dict)  # root path -> delegation attempts (take_one)

    def key(self) -> tuple[Any, ...]:
        return (
            self.epoch, self.now, ledger_fingerprint(self.ledger), tuple(sorted(self.procs.items())),
            tuple(sorted(self.cascades.items())), tuple(sorted(self.reports.items())),
            tuple(sorted(self.taken.items())), tuple(sorted(self.inflight)), self.restarts, self.replays,
            tuple(sorted(self.totals.items())),
        )

    def copy(self) -> World:
        return World(self.epoch, self.now, clone_ledger(self.ledger), dict(self.procs), dict(self.cascades),
                     dict(self.reports), dict(self.taken), self.inflight, self.restarts, self.replays,
                     self.serial, (), dict(self.totals))

    def root_of(self, path: str) -> str:
        """The path of the root of ``path``'s tree (the truth, not the lineage)."""
        while (parent := self.procs[path].parent) is not None:
            path = parent
        return path

    # -- reading the truth --

    def children(self, path: str) -> list[Proc]:
        return [p for p in self.procs.values() if p.parent == path]

    def descendants(self, path: str) -> list[Proc]:
        out: list[Proc] = []
        for c in self.children(path):
            out.append(c)
            out.extend(self.descendants(c.path))
        return out

    def pending_approval(self, p: Proc) -> bool:
        """A launched child holding an approval of this generation that is unexpired and unredeemed."""
        return (p.proc == "starting" and p.approval is not None and p.approval[0] == self.epoch
                and p.approval[1].expires_at_ms > self.now)

    def census(self) -> int:
        """Live sessions registered with this mur-roost plus its unexpired, unredeemed approvals."""
        return sum(1 for p in self.procs.values()
                   if (p.alive and p.registered == self.epoch) or self.pending_approval(p))

    def live_children(self, path: str) -> int:
        return sum(1 for c in self.children(path)
                   if (c.alive and c.registered is not None) or self.pending_approval(c))


def clone_ledger(ledger: Ledger) -> Ledger:
    """A copy of a ledger's in-memory store (its private fields; the ledger has no copy hook)."""
    c = Ledger.__new__(type(ledger))
    c.bounds = ledger.bounds
    c.spawn_allow = ledger.spawn_allow
    c._sessions = {k: _LSession(s.session_id, s.artifact, s.depth_remaining, s.parent, s.status,
                                s.running_children, set(s.pending)) for k, s in ledger._sessions.items()}
    c._approvals = {k: _LApproval(a.claims, a.state) for k, a in ledger._approvals.items()}
    c._expiries = list(ledger._expiries)
    c._running = ledger._running
    c._pending = ledger._pending
    c._next_approval = ledger._next_approval
    c._verdicts = {}  # the envelope-verdict memo: a fresh one is always right
    return c


def ledger_fingerprint(ledger: Ledger) -> tuple[Any, ...]:
    sessions = tuple(sorted(
        (k, s.status.value, s.depth_remaining, s.parent, s.running_children, tuple(sorted(s.pending)))
        for k, s in ledger._sessions.items()))
    approvals = tuple(sorted((k, a.state.value) for k, a in ledger._approvals.items()))
    return (sessions, approvals, tuple(sorted(ledger._expiries)), ledger._running, ledger._pending, ledger._next_approval)


# -- the real functions the actions call (a control swaps one for a mutant) ---------------------


@attrs.define
class Real:
    """The product code the transitions call; each control replaces exactly one entry."""

    ledger_cls: type[Ledger] = Ledger
    hand_down: Callable[..., str] = Lineage.hand_down
    plan_cascade: Callable[..., Any] = real_cascade.plan_cascade
    parse_handed: Callable[..., Any] = real_lineage.parse_handed
    effective_spawn: Callable[..., Any] = real_lineage.effective_spawn
    child_lineage: Callable[..., Any] = real_lineage.child_lineage
    cap_refusal: Callable[..., Any] = cap_refusal


_DOOR_POLICY = Policy(acceptance=TaskAcceptance.QUEUE, queue_depth=4, after_task=AfterTask.SLEEP,
                      launch_task=False, idle_timeout=None)
"""A delegating capsule declares queue + sleep so its completions can arrive (seed 000)."""


Step = tuple[str, World]


class Protocol:
    """The actions of the protocol over :class:`World` (the transition relation)."""

    def __init__(self, scope: Scope, real: Real | None = None) -> None:
        self.scope = scope
        self.real = real or Real()

    def initial(self) -> World:
        return World(0, T0, self.new_ledger(), {}, {}, {}, {}, frozenset())

    def new_ledger(self) -> Ledger:
        return self.real.ledger_cls(self.scope.bounds, self.scope.spawn_allow)

    # -- enumeration ---------------------------------------------------------------------------

    def successors(self, w: World) -> Iterator[Step]:
        for spec in self.scope.roots:
            if spec.path not in w.procs:
                yield from self._one(f"start root {spec.path} ({spec.kind}, capsule {spec.capsule})",
                                     w, lambda n, spec=spec: self.start_root(n, spec))
        for p in sorted(w.procs.values(), key=lambda p: p.path):
            if p.proc == "running":
                for name in CAPSULES[p.capsule].envelope.spawn_allow:
                    yield from self._one(f"{p.path} asks POST /spawn {name}", w,
                                         lambda n, p=p, name=name: self.spawn(n, p.path, name))
            if p.proc == "starting":
                yield from self._one(f"{p.path} POST /register (redeems its approval)", w,
                                     lambda n, p=p: self.register(n, p.path))
            if p.proc in ("running", "winding"):
                yield from self._one(f"{p.path} ends ({'its task is done' if p.proc == 'running' else 'exits 143 at its guard'})",
                                     w, lambda n, p=p: self.exit(n, p.path))
            if p.proc in ("starting", "running"):
                yield from self._one(f"mur stop {p.path} (cancel its subtree)", w, lambda n, p=p: self.cancel(n, p.path))
            if p.alive:
                yield from self._one(f"kill -KILL {p.path}", w, lambda n, p=p: self.kill_action(n, p.path))
            if p.proc == "ended" and not p.roost_told:
                yield from self._one(f"mur-roost sees {p.path}'s process end (peer watch)", w,
                                     lambda n, p=p: self.roost_sees_end(n, p.path))
            if (p.registered is not None and p.approval is not None and w.replays < self.scope.replays
                    and "'" not in p.path):
                yield from self._one(f"a copy of {p.path} presents its approval again", w,
                                     lambda n, p=p: self.replay(n, p.path))
        for trigger in sorted(w.cascades):
            yield from self._one(f"grace of {trigger} passes (25 s)", w, lambda n, t=trigger: self.grace_expires(n, t))
        for d in sorted(w.inflight):
            yield from self._one(f"completion of {d} reaches the parent's door", w, lambda n, d=d: self.deliver(n, d))
        if any(w.pending_approval(p) for p in w.procs.values()):
            yield from self._one("60 s pass (approvals granted before expire)", w, self.tick)
        if w.restarts < self.scope.restarts:
            yield from self._one("mur-roost restarts", w, self.restart)

    def _one(self, label: str, w: World, act: Callable[[World], bool | None]) -> Iterator[Step]:
        n = w.copy()
        if act(n) is not False:
            yield label, n

    # -- helpers -------------------------------------------------------------------------------

    def _set(self, w: World, path: str, **changes: Any) -> Proc:
        p = w.procs[path]._replace(**changes)
        w.procs[path] = p
        return p

    def _forest(self, w: World, path: str) -> ForestNode:
        p = w.procs[path]
        node = ForestNode(sid(path), "session", _FOREST_STATE[p.proc], lineage={"depth": p.depth},
                          pid=1000 + len(path), start_time=0)
        node.children = [self._forest(w, c.path) for c in w.children(path)]
        return node

    def _cascade(self, w: World, path: str, *, include_self: bool) -> None:
        """Every live process of ``path``'s subtree starts its wind-down now, one grace for all."""
        plan = self.real.plan_cascade(self._forest(w, path), float(w.serial), include_self=include_self)
        by_sid = {sid(p): p for p in w.procs}
        targets = frozenset(by_sid[t.session_id] for t in plan.targets)
        covered = set().union(*w.cascades.values()) if w.cascades else set()
        if not targets or (not include_self and targets <= covered):
            return
        for t in targets:
            p = w.procs[t]
            if p.proc in ("starting", "running"):
                self._set(w, t, proc="winding", task=step(p.task, TaskEvent.CANCEL) or p.task)
        w.serial += 1
        trigger = f"cascade#{w.serial} from {path}"
        w.cascades[trigger] = targets
        w.events += (Event("cascade", (trigger, path, include_self, targets)),)

    def _claim(self, w: World, d: str, reporter: str) -> bool:
        """The exclusive completion claim (``completion.claim``: ``completion.json`` created O_EXCL)."""
        if w.reports.get(d):
            return False
        w.reports[d] = (*w.reports.get(d, ()), reporter)
        return True

    def _launcher_alive(self, w: World, p: Proc) -> bool:
        return p.parent is not None and w.procs[p.parent].alive

    def _give_back(self, w: World, p: Proc) -> None:
        """``release.give_back``: redeem a failed launch's approval under a fresh id, deregister failed."""
        if p.approval is None:
            return
        epoch, claims = p.approval
        fresh = "ses_" + _hex("giveback" + p.path)
        refused = w.ledger.register_delegated(fresh, claims if epoch == w.epoch else None,
                                              CAPSULES[p.capsule], w.now)
        if refused is None:
            w.ledger.deregister(fresh, Outcome.FAILED, w.now)

    def _ended(self, w: World, path: str, status: str, *, lifeline: bool) -> None:
        """What happens around a process that has just ended (its own exit, or a kill)."""
        p = w.procs[path]
        if lifeline:  # its children's lifelines close; the janitor / launcher kills at the bound
            self._cascade(w, path, include_self=False)
        told = p.registered != w.epoch
        self._set(w, path, proc="ended", status=status, roost_told=told or (p.roost_told and status != "killed"))
        p = w.procs[path]
        if p.parent is None:
            return
        launcher = self._launcher_alive(w, p)
        if launcher:
            self._set(w, path, owed=True)
            self._claim(w, dlg(path), "launcher")  # crashed / could not start; no-op once claimed
            if p.registered is None:
                self._give_back(w, p)

    # -- actions -------------------------------------------------------------------------------

    def start_root(self, w: World, spec: RootSpec) -> bool:
        art = CAPSULES[spec.capsule]
        narrow = () if spec.narrow is None else (real_lineage.Narrowing("MURMUR_SPAWN", spec.narrow),)
        spawn = self.real.effective_spawn(art.envelope.spawn_allow, narrow=narrow).spawn
        if spec.kind == "formation":
            lineage = real_lineage.member_lineage(frm(spec.path), "m", spawn)
        else:
            lineage = real_lineage.root_lineage(sid(spec.path), spawn)
        if w.ledger.register_top_level(sid(spec.path), spec.capsule, art, w.now) is not None:
            return False
        w.procs[spec.path] = Proc(spec.path, None, spec.capsule, 1, "running", lineage=lineage,
                                  registered=w.epoch, started=w.epoch, caps=self.scope.root_caps())
        return True

    def spawn(self, w: World, path: str, name: str) -> bool:
        p = w.procs[path]
        assert p.lineage is not None
        # the tree caps first (DelegationRuntime._cap_refusal): every attempt counts toward the total
        caps = parse_caps({CAPS_ENV: p.caps} if p.caps else {})
        same = name == p.capsule  # identity: name and installed bytes (one artifact per name here)
        taken, before = None, 0
        if caps.total is not None:
            root = w.root_of(path)
            before = w.totals.get(root, 0)
            taken = min(before + 1, caps.total + 1)
            w.totals[root] = taken
        if self.real.cap_refusal(caps, name, taken=taken, same_identity=same) is not None:
            return taken is not None and taken != before  # a refused attempt is counted; nothing starts
        # the runtime's own guard (DelegationRuntime._refusal): before mur-roost is asked
        if p.noticed_restart:
            return False
        if name in CAPSULES[p.capsule].envelope.spawn_allow and name not in p.lineage.spawn:
            return False
        census, children = w.census(), w.live_children(path)
        credential = sid(path) if p.registered == w.epoch else None
        granted = w.ledger.grant_spawn(credential, name, CAPSULES[name], w.now)
        if isinstance(granted, Refusal):
            if granted.kind is RefusalKind.IDENTITY and not p.noticed_restart:
                self._set(w, path, noticed_restart=True)  # uncertain; delegates nothing more
                return True
            return False
        p = self._set(w, path, next_child=p.next_child + 1)
        child = f"{path}.{p.next_child}"
        handed = self.real.hand_down(p.lineage, sid(path), dlg(child))
        w.procs[child] = Proc(child, path, name, p.depth + 1, "starting", handed=handed,
                              approval=(w.epoch, granted), caps=caps.hand_down(same) if p.caps else "")
        w.events += (Event("grant", (path, child, census, children, p.registered)),)
        return True

    def register(self, w: World, path: str) -> bool:
        p = w.procs[path]
        assert p.parent is not None and p.approval is not None
        try:
            handed = self.real.parse_handed(p.handed, spawner_session=sid(p.parent), spawner_delegation=dlg(path))
        except real_lineage.DiagnosticError:
            self._ended(w, path, "refused: E-TRE-001", lifeline=True)
            return True
        spawn = self.real.effective_spawn(CAPSULES[p.capsule].envelope.spawn_allow, ceiling=handed.ceiling).spawn
        lineage = self.real.child_lineage(handed, spawn)
        epoch, claims = p.approval
        refused = w.ledger.register_delegated(sid(path), claims if epoch == w.epoch else None,
                                              CAPSULES[p.capsule], w.now)
        if refused is not None:  # the start hook: a refused registration ends the child
            self._ended(w, path, f"could not register: {refused.kind.value}", lifeline=True)
            return True
        self._set(w, path, proc="running", lineage=lineage,
                  registered=w.epoch if refused is None else None, started=w.epoch, roost_told=True)
        w.events += (Event("register", (path,)),)
        return True

    def exit(self, w: World, path: str) -> bool:
        p = w.procs[path]
        task = step(p.task, TaskEvent.COMPLETE) or p.task
        status = "ok" if task is TaskState.COMPLETED else "canceled"
        self._set(w, path, task=task)
        self._cascade(w, path, include_self=False)  # the end hook: cascade_from_session
        if p.registered == w.epoch:
            w.ledger.deregister(sid(path), Outcome.COMPLETE if status == "ok" else Outcome.FAILED, w.now)
        if p.parent is not None and self._claim(w, dlg(path), "child"):
            w.inflight = w.inflight | {dlg(path)}
        self._ended(w, path, status, lifeline=False)
        return True

    def cancel(self, w: World, path: str) -> bool:
        self._cascade(w, path, include_self=True)
        return True

    def kill(self, w: World, path: str) -> None:
        self._ended(w, path, "killed", lifeline=True)

    def kill_action(self, w: World, path: str) -> bool:
        self.kill(w, path)
        return True

    def _kill_left(self, w: World, targets: frozenset[str]) -> None:
        """``cascade.kill_left``: SIGKILL what of the plan is still alive."""
        for t in sorted(targets, key=lambda t: -w.procs[t].depth):
            if w.procs[t].alive:
                self.kill(w, t)

    def grace_expires(self, w: World, trigger: str) -> bool:
        targets = w.cascades.pop(trigger)
        self._kill_left(w, targets)
        return True

    def roost_sees_end(self, w: World, path: str) -> bool:
        if w.procs[path].registered == w.epoch:
            w.ledger.process_ended(sid(path), w.now)
        self._set(w, path, roost_told=True)
        return True

    def replay(self, w: World, path: str) -> bool:
        p = w.procs[path]
        assert p.approval is not None and p.parent is not None
        epoch, claims = p.approval
        copy = path + "'"
        w.replays += 1
        if w.ledger.register_delegated(sid(copy), claims if epoch == w.epoch else None,
                                       CAPSULES[p.capsule], w.now) is not None:
            return False  # refused: leaves no record anywhere
        w.procs[copy] = p._replace(path=copy, proc="running", registered=w.epoch, started=w.epoch,
                                     next_child=0, roost_told=True, owed=False)
        w.events += (Event("register", (copy,)),)
        return True

    def deliver(self, w: World, d: str) -> bool:
        w.inflight = w.inflight - {d}
        child = next(p for p in w.procs.values() if p.dlg == d)
        assert child.parent is not None
        parent = w.procs[child.parent]
        if not parent.alive or parent.proc == "starting":
            return True  # delivered: false; completion.json stays the record
        closing = parent.proc == "winding"
        if _DOOR_POLICY.admit(running=False, queued=0, taken=1, closing=closing) is not Admission.ACCEPT:
            return True
        book = DelegationBook(lambda *a, **k: None)
        for c in w.children(parent.path):
            if c.dlg is not None and book.get(c.dlg) is None:
                entry = book.open(Entry(c.dlg, c.capsule, "0.1.0", "ctx", "trusted", "w"))
                entry.closed = w.taken.get(c.dlg, 0) > 0 or "launcher" in w.reports.get(c.dlg, ())
        message = InboundMessage({}, json.dumps({"delegation_id": d, "status": child.status}), None, None, 0)
        if book.decide(CompletionRequest(d, "trusted", message)).accept:
            w.taken[d] = w.taken.get(d, 0) + 1
        return True

    def tick(self, w: World) -> bool:
        w.now += TICK_MS
        w.ledger.expire(w.now)
        return True

    def restart(self, w: World) -> bool:
        w.epoch += 1
        w.restarts += 1
        w.ledger = self.new_ledger()  # every credential and approval minted before is void
        return True

    # -- liveness: what the environment eventually does ---------------------------------------

    def drain(self, w: World) -> World:
        """Every root's task ends, then every pending grace passes (repeated until quiet)."""
        n = w.copy()
        for _ in range(4 * len(n.procs) + 4):
            roots = [p.path for p in n.procs.values() if p.parent is None and p.proc == "running"]
            for r in roots:
                self.exit(n, r)
            if not roots and not n.cascades:
                break
            for t in sorted(n.cascades):
                if t in n.cascades:
                    self.grace_expires(n, t)
        return n
