"""The roost ledger: every decision mur-roost makes, pure, synchronous and clock-injected.

Specification: ``spec/roost.md``, "Endpoints" (the check order of ``POST /spawn`` and
``POST /register``), "Tokens" and "Bounds and census". The ledger does no I/O and reads no clock: every
method that depends on time takes ``now_ms`` (unix milliseconds). Tokens are verified by the
caller (:mod:`murmur.tokens`) and arrive here as claims, or as ``None`` when they did not
verify; registry lookups are done by the caller and arrive as :class:`Artifact` values.

State (all in memory; a restart forgets everything):

* sessions -- never removed. ``running`` until deregistered (or, :meth:`Ledger.process_ended`,
  until the daemon saw its process end), then ``complete``/``failed``.
* approvals -- ``pending`` from the grant until redeemed, released or expired; a redeemed
  approval is kept (for the replay refusal) until its expiry, then forgotten.
* census -- running sessions plus pending, unexpired approvals. Expiry is evaluated whenever
  the census is read (:meth:`Ledger.expire`), never swept on a timer.

Because every method is synchronous, a caller that makes no ``await`` between a check and
the state change it guards gets an atomic decision; :meth:`Ledger.grant_spawn` re-checks every
bound anyway, so even a caller that awaited between :meth:`Ledger.check_spawn` and the grant
(e.g. reading the registry in a thread) can never exceed a bound.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable

import attrs

from murmur.jsonbody import echo
from murmur.roost.envelope import Envelope, EnvelopeRefusal, referee
from murmur.timing import APPROVAL_LIFETIME
from murmur.tokens import ApprovalClaims

__all__ = [
    "APPROVAL_LIFETIME_MS",
    "IDENTITY_MESSAGE",
    "Artifact",
    "Bounds",
    "Ledger",
    "Outcome",
    "Refusal",
    "RefusalKind",
    "SessionStatus",
    "StatusView",
]

APPROVAL_LIFETIME_MS = int(APPROVAL_LIFETIME * 1000)
_VERDICTS_KEPT = 1024  # envelope pairs whose verdict is remembered

IDENTITY_MESSAGE = (
    "not authorised: this daemon answers only a credential it minted for a running session, "
    "and an approval it minted for that same session"
)
_EXPIRED = (
    "this spawn approval has passed its expiry; an approval is valid for 60 seconds from the "
    "POST /spawn that granted it"
)
_REPLAYED = (
    "this spawn approval has already been redeemed; an approval covers one launch, so ask "
    "POST /spawn for another"
)


class RefusalKind(enum.Enum):
    """The class of a refusal; every one answers ``403``."""

    IDENTITY = "identity"
    NAME_LIST = "name_list"
    DEPTH = "depth"
    CEILING = "ceiling"
    CONCURRENCY = "concurrency"
    ENVELOPE = "envelope"
    EXPIRED = "expired"
    REPLAYED = "replayed"
    COORDINATES = "coordinates"
    BYTES = "bytes"


@attrs.frozen
class Refusal:
    """A refused request: its class and the exact message the daemon answers with."""

    kind: RefusalKind
    message: str


IDENTITY = Refusal(RefusalKind.IDENTITY, IDENTITY_MESSAGE)


class SessionStatus(enum.Enum):
    """``GET /status`` values."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"


class Outcome(enum.Enum):
    """The two outcomes ``POST /deregister`` accepts."""

    COMPLETE = "complete"
    FAILED = "failed"


@attrs.frozen
class Bounds:
    """The operator's three delegation bounds (whole numbers; ``0`` refuses every delegation).

    Attributes:
        max_depth (int): levels of delegation below a top-level capsule (``--max-depth``).
        max_concurrent (int): live children one session may hold (``--max-concurrent``).
        max_live_capsules (int): the machine ceiling (``--max-live-capsules``).
    """

    max_depth: int = 3
    max_concurrent: int = 4
    max_live_capsules: int = 16

    def __attrs_post_init__(self) -> None:
        for name in ("max_depth", "max_concurrent", "max_live_capsules"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a whole number, got {value!r}")


@attrs.frozen
class Artifact:
    """A capsule resolved from the registry and lowered: what the referee judges.

    Attributes:
        name (str): the artifact's name as resolved.
        version (str): its version.
        sha256 (str): the content hash of the archive the registry holds.
        envelope (Envelope): its lowered manifest.
    """

    name: str
    version: str
    sha256: str
    envelope: Envelope

    @property
    def coordinates(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"


@attrs.frozen
class StatusView:
    """``GET /status/{session_id}``: the figures at the moment of the read."""

    status: SessionStatus
    depth_remaining: int
    live_children: int
    live_capsules: int


class _ApprovalState(enum.Enum):
    PENDING = "pending"
    REDEEMED = "redeemed"


@attrs.define
class _Session:
    session_id: str
    artifact: Artifact
    depth_remaining: int
    parent: str | None
    status: SessionStatus = SessionStatus.RUNNING
    running_children: int = 0
    pending: set[str] = attrs.field(factory=set)  # approval ids this session was granted


@attrs.define
class _Approval:
    claims: ApprovalClaims
    state: _ApprovalState = _ApprovalState.PENDING


class Ledger:
    """Sessions, approvals, reservations, census and depth budgets of one daemon.

    Args:
        bounds (Bounds): the three delegation bounds.
        spawn_allow (Iterable[str]): the ``--spawn-allow`` names (top-level path only).
    """

    def __init__(self, bounds: Bounds, spawn_allow: Iterable[str] = ()) -> None:
        self.bounds = bounds
        self.spawn_allow = frozenset(spawn_allow)
        self._sessions: dict[str, _Session] = {}
        self._approvals: dict[str, _Approval] = {}
        self._expiries: list[tuple[int, str]] = []  # heap of (expires_at_ms, approval_id)
        self._running = 0
        self._pending = 0
        self._next_approval = 0
        # (id(parent), id(child)) -> (parent, child, verdict): referee() is pure, and a daemon
        # judges the same few envelope pairs again and again (the objects kept, so no id is reused)
        self._verdicts: dict[tuple[int, int], tuple[Envelope, Envelope, EnvelopeRefusal | None]] = {}

    # --- reading -----------------------------------------------------------------------

    def expire(self, now_ms: int) -> None:
        """Release every pending approval whose expiry has passed and forget spent ones.

        Called by every reading method; exposed for callers and tests.
        """
        while self._expiries and self._expiries[0][0] <= now_ms:
            _, aid = heapq.heappop(self._expiries)
            approval = self._approvals.pop(aid, None)
            if approval is not None and approval.state is _ApprovalState.PENDING:
                owner = self._sessions.get(approval.claims.granted_by)
                if owner is not None:
                    self._unreserve(owner, aid)

    def census(self, now_ms: int) -> int:
        """Capsules held live: running sessions plus pending, unexpired approvals."""
        self.expire(now_ms)
        return self._running + self._pending

    def live_children(self, session_id: str, now_ms: int) -> int:
        """Running children plus pending approvals of one session (0 for an unknown id)."""
        self.expire(now_ms)
        s = self._sessions.get(session_id)
        return 0 if s is None else s.running_children + len(s.pending)

    def status(self, session_id: str, now_ms: int) -> StatusView | None:
        """The ``GET /status`` figures, or None when no such session was ever registered."""
        self.expire(now_ms)
        s = self._sessions.get(session_id)
        if s is None:
            return None
        return StatusView(
            s.status,
            s.depth_remaining,
            s.running_children + len(s.pending),
            self._running + self._pending,
        )

    def is_running(self, session_id: str) -> bool:
        """Whether ``session_id`` is registered and not retired."""
        s = self._sessions.get(session_id)
        return s is not None and s.status is SessionStatus.RUNNING

    # --- POST /spawn -------------------------------------------------------------------

    def _referee(self, parent: Envelope, child: Envelope) -> EnvelopeRefusal | None:
        """:func:`~murmur.roost.envelope.referee`, remembered for the same two envelope objects."""
        key = (id(parent), id(child))
        known = self._verdicts.get(key)
        if known is not None and known[0] is parent and known[1] is child:
            return known[2]
        verdict = referee(parent, child)
        if len(self._verdicts) >= _VERDICTS_KEPT:
            self._verdicts.clear()
        self._verdicts[key] = (parent, child, verdict)
        return verdict

    def check_spawn(self, session_id: str | None, name: str, now_ms: int) -> Refusal | None:
        """Every check ``POST /spawn`` makes before the registry is read, in spec/roost.md's order.

        Args:
            session_id (str | None): the session the verified credential names, or None when
                the credential was absent or did not verify.
            name (str): the capsule name asked for.
            now_ms (int): unix milliseconds.

        Returns:
            Refusal | None: identity, name list, depth, machine ceiling, then concurrency --
            the first that applies -- or None.
        """
        self.expire(now_ms)
        if session_id is None or not self.is_running(session_id):
            return IDENTITY
        s = self._sessions[session_id]
        if name not in s.artifact.envelope.spawn_allow:
            return Refusal(RefusalKind.NAME_LIST, f"capsule '{echo(name)}' is not in parent's spawn_allow")
        b = self.bounds
        if s.depth_remaining <= 0:
            return Refusal(
                RefusalKind.DEPTH,
                f"delegation depth bound reached: this daemon allows {b.max_depth} levels of "
                f"delegation below a top-level capsule (--max-depth {b.max_depth}), and this "
                "session has none left to spend — a capsule whose capabilities.spawn.allow "
                "names itself terminates here rather than recursing",
            )
        held = self._running + self._pending
        if held >= b.max_live_capsules:
            return Refusal(
                RefusalKind.CEILING,
                f"machine capsule ceiling reached: this daemon allows {b.max_live_capsules} live "
                f"capsules on this host across every formation (--max-live-capsules "
                f"{b.max_live_capsules}), and it is already holding {held} — this is the host's "
                "ceiling rather than this capsule's own --max-concurrent, so narrowing the "
                "formation does not help; the same request may be granted once other capsules "
                "finish",
            )
        children = s.running_children + len(s.pending)
        if children >= b.max_concurrent:
            return Refusal(
                RefusalKind.CONCURRENCY,
                f"delegation concurrency bound reached: this daemon allows a capsule "
                f"{b.max_concurrent} live children at a time (--max-concurrent "
                f"{b.max_concurrent}), and this session already holds {children} — wait for one "
                "to finish, or raise --max-concurrent",
            )
        return None

    def grant_spawn(
        self, session_id: str | None, name: str, child: Artifact, now_ms: int
    ) -> ApprovalClaims | Refusal:
        """Referee ``child`` against the caller and, if it fits, reserve a slot and grant.

        Re-runs :meth:`check_spawn` first, so the grant is atomic with every bound check.

        Args:
            session_id (str | None): as for :meth:`check_spawn`.
            name (str): the capsule name asked for (checked against the spawn allow list).
            child (Artifact): the resolved, lowered registry artifact.
            now_ms (int): unix milliseconds.

        Returns:
            ApprovalClaims | Refusal: the claims to seal into the approval token (the child's
            depth budget is one less than the caller's; expiry is ``now_ms`` + 60 s), or the
            first refusal that applies (bounds, then the spawn envelope).
        """
        refusal = self.check_spawn(session_id, name, now_ms)
        if refusal is not None:
            return refusal
        assert session_id is not None  # check_spawn refuses None
        parent = self._sessions[session_id]
        verdict = self._referee(parent.artifact.envelope, child.envelope)
        if verdict is not None:
            return Refusal(RefusalKind.ENVELOPE, verdict.message)
        self._next_approval += 1
        claims = ApprovalClaims(
            approval_id=f"apr_{self._next_approval}",
            granted_by=session_id,
            name=child.name,
            version=child.version,
            sha256=child.sha256,
            depth_remaining=parent.depth_remaining - 1,
            expires_at_ms=now_ms + APPROVAL_LIFETIME_MS,
        )
        self._approvals[claims.approval_id] = _Approval(claims)
        heapq.heappush(self._expiries, (claims.expires_at_ms, claims.approval_id))
        parent.pending.add(claims.approval_id)
        self._pending += 1
        return claims

    # --- POST /register ----------------------------------------------------------------

    def check_top_level(self, name: str) -> Refusal | None:
        """The first check of a registration with no approval: ``name`` in ``--spawn-allow``."""
        if name in self.spawn_allow:
            return None
        return Refusal(RefusalKind.NAME_LIST, f"capsule '{echo(name)}' is not in --spawn-allow")

    def register_top_level(
        self, session_id: str, name: str, artifact: Artifact, now_ms: int
    ) -> Refusal | None:
        """Register a session that presented no approval (the operator's own launch).

        It holds ``--max-depth`` and counts toward the census; the ceiling never refuses it.

        Args:
            session_id (str): the registering session's own id.
            name (str): the capsule name the request gave (checked against ``--spawn-allow``).
            artifact (Artifact): what the registry resolved it to.
            now_ms (int): unix milliseconds.

        Returns:
            Refusal | None: the name-list refusal, the identity refusal when ``session_id`` is
            already registered, or None once the session is running.
        """
        refusal = self.check_top_level(name)
        if refusal is not None:
            return refusal
        self.expire(now_ms)
        if session_id in self._sessions:
            return IDENTITY
        self._add_session(session_id, artifact, self.bounds.max_depth, None)
        return None

    def register_delegated(
        self, session_id: str, claims: ApprovalClaims | None, artifact: Artifact, now_ms: int
    ) -> Refusal | None:
        """Register a session launched under an approval, in spec/roost.md's order.

        Order: the approval verifies (``claims`` not None) and its granting session is
        running, and ``session_id`` is new (identity); not expired; not already redeemed;
        then it is marked spent -- before the artifact is compared -- and the resolved
        coordinates and bytes must match what it was granted for.

        Args:
            session_id (str): the registering session's own id.
            claims (ApprovalClaims | None): the verified approval, None if it did not verify.
            artifact (Artifact): what the registry resolves the request's name@version to.
            now_ms (int): unix milliseconds.

        Returns:
            Refusal | None: the first refusal that applies, or None once the session is
            running with the depth budget sealed in the approval.
        """
        self.expire(now_ms)
        if claims is None or not self.is_running(claims.granted_by):
            return IDENTITY
        if session_id in self._sessions:
            return IDENTITY
        if now_ms >= claims.expires_at_ms:
            return Refusal(RefusalKind.EXPIRED, _EXPIRED)
        approval = self._approvals.get(claims.approval_id)
        if approval is None:  # released when it could no longer be redeemed
            return IDENTITY
        if approval.state is _ApprovalState.REDEEMED:
            return Refusal(RefusalKind.REPLAYED, _REPLAYED)
        approval.state = _ApprovalState.REDEEMED  # spent before the artifact is compared
        parent = self._sessions[claims.granted_by]
        self._unreserve(parent, claims.approval_id)
        granted = f"{claims.name}@{claims.version}"
        if (claims.name, claims.version) != (artifact.name, artifact.version):
            return Refusal(
                RefusalKind.COORDINATES,
                f"this spawn approval was granted for '{granted}', not '{artifact.coordinates}'",
            )
        if claims.sha256 != artifact.sha256:
            return Refusal(
                RefusalKind.BYTES,
                f"'{granted}' now resolves to a different artifact than the one this spawn "
                f"approval was granted for (approved sha256 {claims.sha256}, resolved sha256 "
                f"{artifact.sha256})",
            )
        self._add_session(session_id, artifact, claims.depth_remaining, claims.granted_by)
        parent.running_children += 1
        return None

    # --- POST /deregister --------------------------------------------------------------

    def deregister(self, session_id: str | None, outcome: Outcome, now_ms: int) -> Refusal | None:
        """Retire a running session and release everything it holds.

        Its parent's slot is released; every approval it was granted and nobody redeemed is
        released (it can no longer be redeemed by anybody).

        Returns:
            Refusal | None: the identity refusal when the credential did not verify
            (``session_id`` None) or names a session that is not running.
        """
        self.expire(now_ms)
        if session_id is None or not self.is_running(session_id):
            return IDENTITY
        self._retire(self._sessions[session_id], SessionStatus(outcome.value))
        return None

    # --- the session's process ended (this project's addition, spec/roost.md) ------------

    def process_ended(self, session_id: str, now_ms: int) -> bool:
        """The process that registered ``session_id`` has ended without deregistering.

        Exactly what ``POST /deregister`` with ``failed`` does -- the session becomes
        ``failed``, its parent's slot and every unredeemed approval it was granted are
        released -- but asked by the daemon itself, holding no credential. A session that is
        no longer running (it deregistered first, or was never registered) is left alone.

        Args:
            session_id (str): the session whose registering process ended.
            now_ms (int): unix milliseconds.

        Returns:
            bool: True when the session was running and is now ``failed``.
        """
        self.expire(now_ms)
        if not self.is_running(session_id):
            return False
        self._retire(self._sessions[session_id], SessionStatus.FAILED)
        return True

    # --- internals ---------------------------------------------------------------------

    def _add_session(self, session_id: str, artifact: Artifact, depth: int, parent: str | None) -> None:
        self._sessions[session_id] = _Session(session_id, artifact, depth, parent)
        self._running += 1

    def _retire(self, s: _Session, status: SessionStatus) -> None:
        """A running session ends: its census slot, its parent's slot, its reservations."""
        s.status = status
        self._running -= 1
        if s.parent is not None:
            self._sessions[s.parent].running_children -= 1
        for aid in list(s.pending):
            self._approvals.pop(aid, None)
            self._unreserve(s, aid)

    def _unreserve(self, owner: _Session, approval_id: str) -> None:
        if approval_id in owner.pending:
            owner.pending.discard(approval_id)
            self._pending -= 1
