"""A hypothesis state machine over the roost ledger, checking the seed's invariants."""

from __future__ import annotations

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from murmur.roost.envelope import Envelope
from murmur.roost.ledger import (
    Artifact,
    Bounds,
    Ledger,
    Outcome,
    Refusal,
    RefusalKind,
    SessionStatus,
)
from murmur.tokens import ApprovalClaims

T0 = 1_700_000_000_000
NAMES = ("orch", "worker")
ARTS = {
    "orch": Artifact("orch", "1", "o1", Envelope("orch", spawn_allow=("orch", "worker"))),
    "worker": Artifact("worker", "1", "w1", Envelope("worker")),
    "wide": Artifact("worker", "1", "w1", Envelope("worker", shell_allow=("rm",))),
    "rebuilt": Artifact("worker", "1", "w2", Envelope("worker")),
}


@attrs.define
class Model:
    """What the test believes about one session."""

    root: bool
    depth: int
    parent: str | None
    running: bool = True
    excess: bool = False
    ended: str | None = None  # how it stopped running: "complete" | "failed"  # a root registered while the census was at or above the ceiling


class LedgerMachine(RuleBasedStateMachine):
    """Random sequences of register / spawn / redeem / deregister / process end / time passing."""

    sessions = Bundle("sessions")
    approvals = Bundle("approvals")

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.model: dict[str, Model] = {}
        self.pending: dict[str, ApprovalClaims] = {}
        self.redeemed: set[str] = set()
        self.counter = 0

    @initialize(depth=st.integers(0, 3), conc=st.integers(0, 3), ceiling=st.integers(0, 6))
    def setup(self, depth: int, conc: int, ceiling: int) -> None:
        """Start a ledger with random small bounds."""
        self.bounds = Bounds(depth, conc, ceiling)
        self.led = Ledger(self.bounds, spawn_allow=["orch"])

    def fresh(self) -> str:
        """A new session id."""
        self.counter += 1
        return f"ses_{self.counter}"

    def expected_census(self) -> int:
        """Running sessions plus pending unexpired approvals of running sessions."""
        running = sum(m.running for m in self.model.values())
        pending = sum(
            1
            for c in self.pending.values()
            if c.expires_at_ms > self.now and self.model[c.granted_by].running
        )
        return running + pending

    @rule(target=sessions, name=st.sampled_from(NAMES))
    def register_root(self, name: str) -> str:
        """The operator starts a capsule with no approval."""
        sid = self.fresh()
        census = self.led.census(self.now)
        out = self.led.register_top_level(sid, name, ARTS[name], self.now)
        if name != "orch":
            assert isinstance(out, Refusal) and out.kind is RefusalKind.NAME_LIST
            return sid
        assert out is None  # the ceiling never refuses a root
        self.model[sid] = Model(True, self.bounds.max_depth, None, excess=census >= self.bounds.max_live_capsules)
        return sid

    @rule(target=approvals, sid=sessions, which=st.sampled_from(["orch", "worker", "wide"]))
    def spawn(self, sid: str, which: str) -> ApprovalClaims | None:
        """A session asks to spawn a child."""
        m = self.model.get(sid)
        census = self.expected_census()
        children = self.live_children(sid)
        art = ARTS[which]
        out = self.led.grant_spawn(sid, art.name, art, self.now)
        if not isinstance(out, ApprovalClaims):
            assert self.led.census(self.now) == census  # a refused spawn leaves no trace
            if m is None or not m.running:
                assert out.kind is RefusalKind.IDENTITY
            return None
        assert m is not None and m.running  # never granted to a session not running
        assert census < self.bounds.max_live_capsules
        assert children < self.bounds.max_concurrent
        assert which != "wide"
        assert out.depth_remaining == m.depth - 1 >= 0
        self.pending[out.approval_id] = out
        return out

    def live_children(self, sid: str) -> int:
        """The model's count of a session's live children."""
        running = sum(1 for m in self.model.values() if m.parent == sid and m.running)
        pending = sum(1 for c in self.pending.values() if c.granted_by == sid and c.expires_at_ms > self.now)
        return running + pending if sid in self.model and self.model[sid].running else running

    @rule(target=sessions, claims=approvals, which=st.sampled_from(["worker", "orch", "rebuilt"]))
    def redeem(self, claims: ApprovalClaims | None, which: str) -> str:
        """A launched child presents its approval."""
        sid = self.fresh()
        if claims is None:
            assert self.led.register_delegated(sid, None, ARTS["worker"], self.now) is not None
            return sid
        art = ARTS[which] if claims.name == "worker" else ARTS["orch"]
        out = self.led.register_delegated(sid, claims, art, self.now)
        self.pending.pop(claims.approval_id, None)
        if out is None:
            assert claims.approval_id not in self.redeemed  # never redeemed twice
            assert self.model[claims.granted_by].running
            assert self.now < claims.expires_at_ms
            self.model[sid] = Model(False, claims.depth_remaining, claims.granted_by)
        self.redeemed.add(claims.approval_id)
        return sid

    @rule(sid=sessions, outcome=st.sampled_from(list(Outcome)))
    def deregister(self, sid: str, outcome: Outcome) -> None:
        """A session ends."""
        m = self.model.get(sid)
        out = self.led.deregister(sid, outcome, self.now)
        if m is None or not m.running:
            assert out is not None and out.kind is RefusalKind.IDENTITY
            return
        assert out is None
        self.retire(m, sid, outcome.value)

    @rule(sid=sessions)
    def process_ends(self, sid: str) -> None:
        """A session's process ends without deregistering (SIGKILL): the daemon retires it."""
        m = self.model.get(sid)
        changed = self.led.process_ended(sid, self.now)
        assert changed == (m is not None and m.running)
        if changed:
            assert m is not None
            self.retire(m, sid, "failed")

    def retire(self, m: Model, sid: str, outcome: str) -> None:
        """The model's view of a session that stopped running: its reservations go with it."""
        m.running = False
        m.ended = outcome
        for aid in [a for a, c in self.pending.items() if c.granted_by == sid]:
            del self.pending[aid]

    @rule(ms=st.integers(0, 70_000))
    def advance(self, ms: int) -> None:
        """Time passes."""
        self.now += ms

    @invariant()
    def census_matches_model(self) -> None:
        """The census is exactly running sessions plus unexpired reservations."""
        if hasattr(self, "led"):
            assert self.led.census(self.now) == self.expected_census()

    @invariant()
    def census_bounded(self) -> None:
        """The census never exceeds the ceiling except by roots the operator started past it."""
        if hasattr(self, "led"):
            excess = sum(m.running and m.excess for m in self.model.values())
            assert self.led.census(self.now) <= self.bounds.max_live_capsules + excess

    @invariant()
    def children_bounded(self) -> None:
        """A running session's live children never exceed --max-concurrent."""
        for sid, m in self.model.items():
            if m.running:
                assert self.led.live_children(sid, self.now) <= self.bounds.max_concurrent

    @invariant()
    def depth_falls_along_chains(self) -> None:
        """Every delegated session holds one level less than its parent, never below 0."""
        for sid, m in self.model.items():
            status = self.led.status(sid, self.now)
            assert status is not None and status.depth_remaining == m.depth >= 0
            assert status.status is (SessionStatus.RUNNING if m.running else SessionStatus(m.ended))
            if m.parent is not None:
                assert m.depth == self.model[m.parent].depth - 1


LedgerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestLedgerMachine = LedgerMachine.TestCase
