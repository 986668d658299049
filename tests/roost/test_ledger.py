"""Table tests of the roost ledger (seed 000: Delegation bounds, Credentials and approvals)."""

from __future__ import annotations

import pytest

from murmur.roost.envelope import Envelope
from murmur.roost.ledger import (
    APPROVAL_LIFETIME_MS,
    IDENTITY_MESSAGE,
    Artifact,
    Bounds,
    Ledger,
    Outcome,
    Refusal,
    RefusalKind,
    SessionStatus,
    StatusView,
)
from murmur.tokens import ApprovalClaims

T0 = 1_756_531_200_000


def art(name: str, spawn: tuple[str, ...] = (), sha: str = "00", version: str = "0.1.0", **kw: object) -> Artifact:
    """An artifact whose envelope spawns ``spawn``."""
    return Artifact(name, version, sha, Envelope(name, spawn_allow=spawn, **kw))  # type: ignore[arg-type]


ORCH = art("orch", spawn=("worker-a", "orch"))
WORKER = art("worker-a", sha="aa")


def ledger(**bounds: int) -> Ledger:
    """A ledger with orch on the top-level list."""
    return Ledger(Bounds(**bounds), spawn_allow=["orch", "worker-a"])


def root(led: Ledger, sid: str = "ses_root", a: Artifact = ORCH) -> str:
    """Register a top-level session and return its id."""
    assert led.register_top_level(sid, a.name, a, T0) is None
    return sid


def grant(led: Ledger, sid: str, child: Artifact = WORKER, now: int = T0) -> ApprovalClaims:
    """Grant a spawn and return its claims (fails the test on a refusal)."""
    out = led.grant_spawn(sid, child.name, child, now)
    assert isinstance(out, ApprovalClaims), out
    return out


def kind(out: object) -> RefusalKind:
    """The kind of a refusal (fails the test otherwise)."""
    assert isinstance(out, Refusal), out
    return out.kind


class TestBounds:
    def test_defaults(self) -> None:
        """Depth 3 and concurrency 4 by default."""
        assert (Bounds().max_depth, Bounds().max_concurrent) == (3, 4)

    @pytest.mark.parametrize("bad", [-1, True, 1.5])
    def test_whole_numbers_only(self, bad: object) -> None:
        """A bound must be a whole number."""
        with pytest.raises(ValueError, match="whole number"):
            Bounds(max_depth=bad)  # type: ignore[arg-type]


class TestSpawnOrder:
    def test_no_credential_is_identity(self) -> None:
        """A credential that did not verify gets the identity refusal."""
        out = ledger().check_spawn(None, "worker-a", T0)
        assert out is not None and out.kind is RefusalKind.IDENTITY and out.message == IDENTITY_MESSAGE

    def test_unknown_and_retired_sessions_are_identity(self) -> None:
        """A credential naming no session, or a deregistered one, gets the identity refusal."""
        led = ledger()
        sid = root(led)
        assert kind(led.check_spawn("ses_nobody", "worker-a", T0)) is RefusalKind.IDENTITY
        assert led.deregister(sid, Outcome.COMPLETE, T0) is None
        assert kind(led.check_spawn(sid, "worker-a", T0)) is RefusalKind.IDENTITY

    def test_name_list_uses_callers_own_manifest(self) -> None:
        """The per-session list applies even where --spawn-allow permits more (seed's example)."""
        led = Ledger(Bounds(), spawn_allow=["orchestrator", "worker-a", "worker-b"])
        a = art("orchestrator", spawn=("worker-a",))
        sid = root(led, a=a)
        out = led.check_spawn(sid, "worker-b", T0)
        assert out == Refusal(RefusalKind.NAME_LIST, "capsule 'worker-b' is not in parent's spawn_allow")

    def test_name_before_depth(self) -> None:
        """The name check comes before the depth bound."""
        led = ledger(max_depth=0)
        sid = root(led)
        assert kind(led.check_spawn(sid, "nope", T0)) is RefusalKind.NAME_LIST
        assert kind(led.check_spawn(sid, "worker-a", T0)) is RefusalKind.DEPTH

    def test_depth_before_ceiling_before_concurrency(self) -> None:
        """With all three bounds at 0, depth is heard; then the ceiling; then concurrency."""
        led = ledger(max_depth=0, max_live_capsules=0, max_concurrent=0)
        assert kind(led.check_spawn(root(led, "a"), "worker-a", T0)) is RefusalKind.DEPTH
        led = ledger(max_live_capsules=0, max_concurrent=0)
        assert kind(led.check_spawn(root(led, "a"), "worker-a", T0)) is RefusalKind.CEILING
        led = ledger(max_concurrent=0)
        assert kind(led.check_spawn(root(led, "a"), "worker-a", T0)) is RefusalKind.CONCURRENCY

    def test_envelope_after_bounds(self) -> None:
        """A child exceeding the envelope is refused only once every bound passed."""
        led = ledger(max_concurrent=0)
        sid = root(led)
        wide = art("worker-a", shell_allow=("rm",))
        assert kind(led.grant_spawn(sid, "worker-a", wide, T0)) is RefusalKind.CONCURRENCY
        led = ledger()
        sid = root(led)
        out = led.grant_spawn(sid, "worker-a", wide, T0)
        assert kind(out) is RefusalKind.ENVELOPE
        assert isinstance(out, Refusal) and out.message.startswith("capabilities.shell.allow: the child declares 'rm'")

    def test_a_remembered_verdict_is_of_the_same_envelopes_only(self) -> None:
        """The envelope verdict is remembered per pair of envelope objects: a child re-lowered
        to other capabilities (a reinstall) is judged afresh, either way round."""
        led = ledger()
        sid = root(led)
        wide, narrow = art("worker-a", shell_allow=("rm",)), art("worker-a", sha="bb")
        for child, fits in ((wide, False), (wide, False), (narrow, True), (wide, False), (narrow, True)):
            out = led.grant_spawn(sid, "worker-a", child, T0)
            assert isinstance(out, ApprovalClaims) is fits, out

    def test_refused_spawn_leaves_no_trace(self) -> None:
        """A refusal changes no count and reserves nothing."""
        led = ledger()
        sid = root(led)
        before = led.status(sid, T0)
        led.grant_spawn(sid, "worker-a", art("worker-a", shell_allow=("rm",)), T0)
        led.grant_spawn(sid, "nope", WORKER, T0)
        assert led.status(sid, T0) == before
        assert grant(led, sid).approval_id == "apr_1"


class TestDepthBudget:
    def test_depth_message_and_four_levels(self) -> None:
        """A self-spawning capsule runs at four levels under --max-depth 3; the fourth is refused."""
        led = ledger(max_depth=3)
        loop = art("orch", spawn=("orch",))
        sid = root(led, "ses_0", loop)
        depths = [3]
        for level in range(1, 4):
            claims = grant(led, sid, loop)
            assert claims.depth_remaining == depths[-1] - 1
            child = f"ses_{level}"
            assert led.register_delegated(child, claims, loop, T0) is None
            status = led.status(child, T0)
            assert status is not None
            depths.append(status.depth_remaining)
            sid = child
        assert depths == [3, 2, 1, 0]
        out = led.check_spawn(sid, "orch", T0)
        assert out == Refusal(
            RefusalKind.DEPTH,
            "delegation depth bound reached: this daemon allows 3 levels of delegation below a "
            "top-level capsule (--max-depth 3), and this session has none left to spend — a "
            "capsule whose capabilities.spawn.allow names itself terminates here rather than "
            "recursing",
        )

    def test_zero_depth_refuses_every_delegation(self) -> None:
        """--max-depth 0: a root holds 0 and every spawn is refused."""
        led = ledger(max_depth=0)
        sid = root(led)
        assert kind(led.check_spawn(sid, "worker-a", T0)) is RefusalKind.DEPTH


class TestConcurrency:
    def test_message_names_bound_and_count(self) -> None:
        """The refusal names --max-concurrent and how many the session holds."""
        led = ledger(max_concurrent=2)
        sid = root(led)
        grant(led, sid)
        grant(led, sid)
        assert led.check_spawn(sid, "worker-a", T0) == Refusal(
            RefusalKind.CONCURRENCY,
            "delegation concurrency bound reached: this daemon allows a capsule 2 live children "
            "at a time (--max-concurrent 2), and this session already holds 2 — wait for one to "
            "finish, or raise --max-concurrent",
        )

    def test_event_table(self) -> None:
        """Grant reserves; redeem keeps the count; child deregister releases."""
        led = ledger()
        sid = root(led)
        assert led.live_children(sid, T0) == 0
        claims = grant(led, sid)
        assert led.live_children(sid, T0) == 1  # the approval reserves a slot
        assert led.register_delegated("ses_c", claims, WORKER, T0) is None
        assert led.live_children(sid, T0) == 1  # redemption leaves the count unchanged
        assert led.deregister("ses_c", Outcome.COMPLETE, T0) is None
        assert led.live_children(sid, T0) == 0  # the child's deregister releases it

    def test_unredeemed_expiry_releases(self) -> None:
        """An approval's 60 s expiry passing unredeemed releases the slot (evaluated on read)."""
        led = ledger()
        sid = root(led)
        grant(led, sid)
        assert led.live_children(sid, T0 + APPROVAL_LIFETIME_MS - 1) == 1
        assert led.live_children(sid, T0 + APPROVAL_LIFETIME_MS) == 0

    def test_parent_deregister_releases_every_reservation(self) -> None:
        """A parent's own deregister releases all its reservations, and they cannot be redeemed."""
        led = ledger()
        sid = root(led)
        c1, c2 = grant(led, sid), grant(led, sid)
        assert led.census(T0) == 3
        assert led.deregister(sid, Outcome.FAILED, T0) is None
        assert led.census(T0) == 0
        assert led.live_children(sid, T0) == 0
        assert kind(led.register_delegated("ses_c", c1, WORKER, T0)) is RefusalKind.IDENTITY
        assert kind(led.register_delegated("ses_d", c2, WORKER, T0)) is RefusalKind.IDENTITY


class TestMachineCeiling:
    def test_message(self) -> None:
        """The refusal names --max-live-capsules and the census."""
        led = ledger(max_live_capsules=3)
        sid = root(led)
        grant(led, sid)
        grant(led, sid)
        assert led.check_spawn(sid, "worker-a", T0) == Refusal(
            RefusalKind.CEILING,
            "machine capsule ceiling reached: this daemon allows 3 live capsules on this host "
            "across every formation (--max-live-capsules 3), and it is already holding 3 — this "
            "is the host's ceiling rather than this capsule's own --max-concurrent, so narrowing "
            "the formation does not help; the same request may be granted once other capsules finish",
        )

    def test_event_table(self) -> None:
        """Census: grant reserves, redeem unchanged, deregister and expiry give back."""
        led = ledger()
        sid = root(led)
        assert led.census(T0) == 1  # a running root counts
        c = grant(led, sid)
        assert led.census(T0) == 2
        assert led.register_delegated("ses_c", c, WORKER, T0) is None
        assert led.census(T0) == 2
        assert led.deregister("ses_c", Outcome.COMPLETE, T0) is None
        assert led.census(T0) == 1
        grant(led, sid, now=T0 + 10)
        assert led.census(T0 + 10 + APPROVAL_LIFETIME_MS - 1) == 2
        assert led.census(T0 + 10 + APPROVAL_LIFETIME_MS) == 1

    def test_roots_counted_never_refused(self) -> None:
        """Roots past the ceiling register; the next delegated spawn is refused until it falls."""
        led = ledger(max_live_capsules=2)
        ids = [root(led, f"ses_{i}") for i in range(3)]
        assert led.census(T0) == 3
        out = led.check_spawn(ids[0], "worker-a", T0)
        assert isinstance(out, Refusal) and out.kind is RefusalKind.CEILING
        assert "already holding 3" in out.message
        led.deregister(ids[1], Outcome.COMPLETE, T0)
        led.deregister(ids[2], Outcome.COMPLETE, T0)
        assert isinstance(led.grant_spawn(ids[0], "worker-a", WORKER, T0), ApprovalClaims)

    def test_cycled_daemon_refuses_no_more(self) -> None:
        """A daemon that has cycled a hundred sessions holds only what is live."""
        led = ledger(max_live_capsules=2)
        for i in range(100):
            sid = root(led, f"ses_{i}")
            c = grant(led, sid)
            assert led.register_delegated(f"ses_c{i}", c, WORKER, T0) is None
            led.deregister(f"ses_c{i}", Outcome.COMPLETE, T0)
            led.deregister(sid, Outcome.COMPLETE, T0)
        assert led.census(T0) == 0


class TestRegister:
    def test_top_level_name_list(self) -> None:
        """No approval: the name must be in --spawn-allow."""
        led = ledger()
        out = led.register_top_level("ses_x", "other", art("other"), T0)
        assert out == Refusal(RefusalKind.NAME_LIST, "capsule 'other' is not in --spawn-allow")
        assert led.status("ses_x", T0) is None

    def test_already_registered_is_identity(self) -> None:
        """A session id registers once, on either path."""
        led = ledger()
        sid = root(led)
        assert kind(led.register_top_level(sid, "orch", ORCH, T0)) is RefusalKind.IDENTITY
        c = grant(led, sid)
        assert kind(led.register_delegated(sid, c, WORKER, T0)) is RefusalKind.IDENTITY
        assert led.register_delegated("ses_new", c, WORKER, T0) is None  # not consumed

    def test_unverified_approval_is_identity(self) -> None:
        """An approval that did not verify is identity, never a fallback to --spawn-allow."""
        assert kind(ledger().register_delegated("ses_x", None, WORKER, T0)) is RefusalKind.IDENTITY

    def test_expired(self) -> None:
        """Presented at 60 s after its grant, an approval has expired."""
        led = ledger()
        c = grant(led, root(led))
        out = led.register_delegated("ses_c", c, WORKER, T0 + APPROVAL_LIFETIME_MS)
        assert out == Refusal(
            RefusalKind.EXPIRED,
            "this spawn approval has passed its expiry; an approval is valid for 60 seconds from "
            "the POST /spawn that granted it",
        )

    def test_just_before_expiry_admits(self) -> None:
        """At 59.999 s an approval still redeems."""
        led = ledger()
        c = grant(led, root(led))
        assert led.register_delegated("ses_c", c, WORKER, T0 + APPROVAL_LIFETIME_MS - 1) is None

    def test_replayed(self) -> None:
        """A second presentation of a redeemed approval is refused as a replay."""
        led = ledger()
        c = grant(led, root(led))
        assert led.register_delegated("ses_c", c, WORKER, T0) is None
        assert led.register_delegated("ses_d", c, WORKER, T0) == Refusal(
            RefusalKind.REPLAYED,
            "this spawn approval has already been redeemed; an approval covers one launch, so "
            "ask POST /spawn for another",
        )

    def test_different_coordinates_consumes(self) -> None:
        """A different name is refused, and the approval is spent (and its slot released)."""
        led = ledger()
        sid = root(led)
        c = grant(led, sid)
        other = art("worker-b", sha="aa")
        assert led.register_delegated("ses_c", c, other, T0) == Refusal(
            RefusalKind.COORDINATES,
            "this spawn approval was granted for 'worker-a@0.1.0', not 'worker-b@0.1.0'",
        )
        assert led.live_children(sid, T0) == 0
        assert kind(led.register_delegated("ses_c", c, WORKER, T0)) is RefusalKind.REPLAYED

    def test_different_version(self) -> None:
        """A different version is a different coordinate."""
        led = ledger()
        c = grant(led, root(led))
        out = led.register_delegated("ses_c", c, art("worker-a", sha="aa", version="0.2.0"), T0)
        assert isinstance(out, Refusal) and out.message.endswith("not 'worker-a@0.2.0'")

    def test_different_bytes(self) -> None:
        """The same coordinates resolving to other bytes are refused with both hashes."""
        led = ledger()
        c = grant(led, root(led))
        out = led.register_delegated("ses_c", c, art("worker-a", sha="bb"), T0)
        assert out == Refusal(
            RefusalKind.BYTES,
            "'worker-a@0.1.0' now resolves to a different artifact than the one this spawn "
            "approval was granted for (approved sha256 aa, resolved sha256 bb)",
        )

    def test_granting_session_ended_is_identity(self) -> None:
        """An approval whose granting session has deregistered is refused as identity."""
        led = ledger()
        sid = root(led)
        c = grant(led, sid)
        led.deregister(sid, Outcome.COMPLETE, T0)
        assert kind(led.register_delegated("ses_c", c, WORKER, T0)) is RefusalKind.IDENTITY

    def test_delegated_ignores_spawn_allow(self) -> None:
        """A delegated registration is not gated by --spawn-allow."""
        led = Ledger(Bounds(), spawn_allow=["orch"])
        c = grant(led, root(led))
        assert led.register_delegated("ses_c", c, WORKER, T0) is None


class TestDeregisterAndStatus:
    def test_status_figures(self) -> None:
        """Status reports status, depth_remaining, live_children and live_capsules."""
        led = ledger()
        sid = root(led)
        grant(led, sid)
        assert led.status(sid, T0) == StatusView(SessionStatus.RUNNING, 3, 1, 2)
        assert led.status("ses_unknown", T0) is None

    @pytest.mark.parametrize("outcome", list(Outcome))
    def test_outcome_becomes_status(self, outcome: Outcome) -> None:
        """The deregister outcome becomes the session's status."""
        led = ledger()
        sid = root(led)
        assert led.deregister(sid, outcome, T0) is None
        status = led.status(sid, T0)
        assert status is not None and status.status.value == outcome.value

    def test_second_deregister_is_identity(self) -> None:
        """A retired session's credential authorises nothing, not even another deregister."""
        led = ledger()
        sid = root(led)
        led.deregister(sid, Outcome.COMPLETE, T0)
        assert kind(led.deregister(sid, Outcome.COMPLETE, T0)) is RefusalKind.IDENTITY
        assert kind(led.deregister(None, Outcome.COMPLETE, T0)) is RefusalKind.IDENTITY

    def test_live_capsules_same_whichever_session(self) -> None:
        """live_capsules is the same figure whichever session is polled."""
        led = ledger()
        a, b = root(led, "a"), root(led, "b")
        grant(led, a)
        sa, sb = led.status(a, T0), led.status(b, T0)
        assert sa is not None and sb is not None
        assert sa.live_capsules == sb.live_capsules == 3


class TestProcessEnded:
    """A session's process ended without deregistering (spec/roost.md; issue 11, item 5)."""

    def test_root_becomes_failed_and_gives_its_slot_back(self) -> None:
        """A running root: failed, out of the census, True."""
        led = ledger()
        sid, other = root(led), root(led, "ses_other")
        assert led.census(T0) == 2
        assert led.process_ended(sid, T0) is True
        assert led.status(sid, T0) == StatusView(SessionStatus.FAILED, 3, 0, 1)
        assert not led.is_running(sid) and led.is_running(other)

    def test_child_gives_its_parents_slot_back(self) -> None:
        """A delegated child's end frees its parent's live_children slot at once."""
        led = ledger(max_concurrent=1)
        parent = root(led)
        claims = grant(led, parent)
        assert led.register_delegated("ses_child", claims, WORKER, T0) is None
        assert kind(led.check_spawn(parent, "worker-a", T0)) is RefusalKind.CONCURRENCY
        assert led.process_ended("ses_child", T0) is True
        assert led.live_children(parent, T0) == 0
        assert led.check_spawn(parent, "worker-a", T0) is None

    def test_parent_releases_every_reservation(self) -> None:
        """Its unredeemed approvals are released and can no longer be redeemed."""
        led = ledger(max_live_capsules=3)
        parent = root(led)
        first, second = grant(led, parent), grant(led, parent)
        assert led.census(T0) == 3
        assert led.process_ended(parent, T0) is True
        assert led.census(T0) == 0
        assert kind(led.register_delegated("ses_late", first, WORKER, T0)) is RefusalKind.IDENTITY
        assert kind(led.register_delegated("ses_later", second, WORKER, T0)) is RefusalKind.IDENTITY

    def test_running_child_of_an_ended_parent_still_deregisters(self) -> None:
        """The parent's end leaves its running child running; the child retires itself later."""
        led = ledger()
        parent = root(led)
        assert led.register_delegated("ses_child", grant(led, parent), WORKER, T0) is None
        assert led.process_ended(parent, T0) is True
        assert led.census(T0) == 1 and led.is_running("ses_child")
        assert led.deregister("ses_child", Outcome.COMPLETE, T0) is None
        assert led.census(T0) == 0
        assert led.status(parent, T0) == StatusView(SessionStatus.FAILED, 3, 0, 0)

    @pytest.mark.parametrize("outcome", list(Outcome))
    def test_a_deregistered_session_keeps_its_outcome(self, outcome: Outcome) -> None:
        """A session that deregistered first is left alone: False, its outcome unchanged."""
        led = ledger()
        sid = root(led)
        led.deregister(sid, outcome, T0)
        assert led.process_ended(sid, T0) is False
        status = led.status(sid, T0)
        assert status is not None and status.status.value == outcome.value
        assert led.census(T0) == 0

    def test_unknown_and_twice(self) -> None:
        """An unknown session, or the same end reported twice: False, nothing changes."""
        led = ledger()
        sid = root(led)
        assert led.process_ended("ses_unknown", T0) is False
        assert led.process_ended(sid, T0) is True
        assert led.process_ended(sid, T0) is False
        assert led.census(T0) == 0

    def test_same_as_deregister_failed(self) -> None:
        """Every figure afterwards equals what POST /deregister `failed` leaves."""
        def built() -> tuple[Ledger, str, str]:
            led = ledger()
            parent = root(led)
            mid_claims = grant(led, parent, child=art("orch", spawn=("worker-a", "orch")))
            assert led.register_delegated("ses_mid", mid_claims, ORCH, T0) is None
            grant(led, "ses_mid")
            assert led.register_delegated("ses_leaf", grant(led, "ses_mid"), WORKER, T0) is None
            return led, parent, "ses_mid"

        a, parent, mid = built()
        b, _, _ = built()
        assert a.deregister(mid, Outcome.FAILED, T0 + 5) is None
        assert b.process_ended(mid, T0 + 5) is True
        for sid in (parent, mid, "ses_leaf"):
            assert a.status(sid, T0 + 5) == b.status(sid, T0 + 5)
        assert a.census(T0 + 5) == b.census(T0 + 5) == 2
