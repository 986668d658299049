"""In-process tests of the mur-roost app over real TCP (seed 000: every endpoint table row)."""

from __future__ import annotations

import httpx
import trio
import trio.testing

from murmur.manifest.model import Containment, NetworkCaps, SpawnCaps
from murmur.roost.app import APPROVAL_HEADER, CREDENTIAL_HEADER
from murmur.tokens import ApprovalClaims, Keyring

from .conftest import IDENTITY, MANIFESTS, StartRoost, capsule, fake_registry

APPROVAL_LIFETIME_S = 60


def assert_identity(r: httpx.Response) -> None:
    """The one identity refusal."""
    assert r.status_code == 403
    assert r.json() == IDENTITY


class TestHealth:
    async def test_health(self, start_roost: StartRoost) -> None:
        """GET /health answers 200 with the top-level allow list once listening."""
        roost = await start_roost()
        r = await roost.client.get("/health")
        assert (r.status_code, r.json()) == (200, {"spawn_allow": ["loop", "orch", "worker-a"]})
        assert r.headers["content-type"] == "application/json"

    async def test_unknown_route_and_method(self, start_roost: StartRoost) -> None:
        """Unknown paths and methods answer JSON 404 and 405."""
        roost = await start_roost()
        r = await roost.client.get("/nope")
        assert (r.status_code, r.json()) == (404, {"error": "not found"})
        r = await roost.client.get("/spawn")
        assert (r.status_code, r.json()) == (405, {"error": "method not allowed"})

    async def test_oversized_body(self, start_roost: StartRoost) -> None:
        """A body past the size bound is refused without being read."""
        roost = await start_roost()
        r = await roost.client.post("/register", content=b"{" + b" " * 70_000 + b"}")
        assert r.status_code == 413


class TestSpawn:
    async def test_success_body(self, start_roost: StartRoost, mock_clock: trio.testing.MockClock) -> None:
        """200: approval, name, version, sha256, expires_at_ms 60 s on; nothing started."""
        roost = await start_roost()
        _, cred = await roost.root()
        before = trio.current_time()
        r = await roost.client.post(
            "/spawn", json={"name": "worker-a", "version": "0.1.0", "extra": [1]}, headers={CREDENTIAL_HEADER: cred}
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"approval", "name", "version", "sha256", "expires_at_ms"}
        assert body["approval"].startswith("msa1.eyJ2IjoxLCJz")
        assert (body["name"], body["version"]) == ("worker-a", "0.1.0")
        assert body["sha256"] == roost.registry.items[("worker-a", "0.1.0")].sha256
        claims = roost.keyring.verify_approval(body["approval"])
        assert claims is not None and claims.expires_at_ms == body["expires_at_ms"]
        assert trio.current_time() == before  # the mock clock did not move
        assert claims.depth_remaining == 2

    async def test_bad_json_and_missing_field(self, start_roost: StartRoost) -> None:
        """400 for a body that is not JSON, not an object, or lacks a required field."""
        roost = await start_roost()
        _, cred = await roost.root()
        h = {CREDENTIAL_HEADER: cred}
        for content in (b"{nope", b"[1]", b'{"name": "worker-a"}', b'{"version": "0.1.0"}', b'{"name": 1, "version": "x"}'):
            r = await roost.client.post("/spawn", content=content, headers=h)
            assert r.status_code == 400, content
            assert "error" in r.json()

    async def test_identity_rows(self, start_roost: StartRoost) -> None:
        """403 identity: credential absent, invalid, or naming a session that is not running."""
        roost = await start_roost()
        _, cred = await roost.root()
        assert_identity(await roost.spawn(None, "worker-a"))
        assert_identity(await roost.spawn("msc1.garbage.x", "worker-a"))
        assert_identity(await roost.spawn(roost.keyring.mint_credential("ses_never"), "worker-a"))
        assert (await roost.deregister(cred)).status_code == 200
        assert_identity(await roost.spawn(cred, "worker-a"))

    async def test_name_list(self, start_roost: StartRoost) -> None:
        """403 when the name is not in the caller's own capabilities.spawn.allow."""
        roost = await start_roost(spawn_allow=["orch", "worker-a", "lonely"])
        _, cred = await roost.root()
        r = await roost.spawn(cred, "lonely")
        assert (r.status_code, r.json()) == (403, {"error": "capsule 'lonely' is not in parent's spawn_allow"})

    async def test_depth(self, start_roost: StartRoost) -> None:
        """403 when the caller has no depth left: --max-depth 3 runs four levels of a self-spawner."""
        roost = await start_roost(max_depth=3)
        sid, cred = await roost.root("loop")
        for expected in (2, 1, 0):
            sid, cred = await roost.child(cred, "loop")
            assert (await roost.status(sid))["depth_remaining"] == expected
        r = await roost.spawn(cred, "loop")
        assert r.status_code == 403
        assert r.json()["error"].startswith(
            "delegation depth bound reached: this daemon allows 3 levels of delegation below a "
            "top-level capsule (--max-depth 3), and this session has none left to spend"
        )

    async def test_machine_ceiling(self, start_roost: StartRoost) -> None:
        """403 naming --max-live-capsules when the host is full, even inside --max-concurrent."""
        roost = await start_roost(max_live_capsules=3)
        _, cred = await roost.root()
        for _ in range(2):
            assert (await roost.spawn(cred, "worker-a")).status_code == 200
        r = await roost.spawn(cred, "worker-a")
        assert r.status_code == 403
        assert r.json()["error"].startswith(
            "machine capsule ceiling reached: this daemon allows 3 live capsules on this host "
            "across every formation (--max-live-capsules 3), and it is already holding 3"
        )

    async def test_concurrency(self, start_roost: StartRoost) -> None:
        """403 naming --max-concurrent and the count when the caller holds that many children."""
        roost = await start_roost(max_concurrent=2)
        _, cred = await roost.root()
        for _ in range(2):
            assert (await roost.spawn(cred, "worker-a")).status_code == 200
        r = await roost.spawn(cred, "worker-a")
        assert r.status_code == 403
        assert r.json()["error"] == (
            "delegation concurrency bound reached: this daemon allows a capsule 2 live children "
            "at a time (--max-concurrent 2), and this session already holds 2 — wait for one to "
            "finish, or raise --max-concurrent"
        )

    async def test_envelope(self, start_roost: StartRoost) -> None:
        """403 naming the manifest key and the child entry that exceeded."""
        roost = await start_roost()
        _, cred = await roost.root()
        r = await roost.spawn(cred, "wide")
        assert r.status_code == 403
        assert r.json()["error"] == (
            "capabilities.network.allow: the child declares 'api.example.com', which its parent "
            "does not hold — a spawned capsule can never hold more capability than the capsule "
            "that spawned it"
        )

    async def test_containment_may_only_rise(self, start_roost: StartRoost) -> None:
        """A scoped parent may spawn a sealed child; an advisory (undeclared) child is refused."""
        parent = capsule("boss", spawn=SpawnCaps(("worker-a", "soft")), containment=Containment.SCOPED, network=NetworkCaps(("example.com",)))
        roost = await start_roost(spawn_allow=["boss"], registry=fake_registry((*MANIFESTS, parent, capsule("soft"))))
        _, cred = await roost.root("boss")
        assert (await roost.spawn(cred, "worker-a")).status_code == 200  # sealed under scoped
        r = await roost.spawn(cred, "soft")
        assert r.status_code == 403
        assert r.json()["error"].startswith("capabilities.containment: the child declares no floor")

    async def test_unresolvable(self, start_roost: StartRoost) -> None:
        """500 when the capsule cannot be resolved from the registry."""
        roost = await start_roost()
        _, cred = await roost.root()
        r = await roost.spawn(cred, "worker-b", version="9.9.9")
        assert r.status_code == 500
        assert r.json() == {"error": "capsule 'worker-b@9.9.9' could not be resolved from this daemon's registry"}

    async def test_unresolvable_reference(self, start_roost: StartRoost) -> None:
        """A ${VAR} the daemon's environment lacks fails the spawn with a clear error."""
        roost = await start_roost()
        _, cred = await roost.root()
        r = await roost.spawn(cred, "refs")
        assert r.status_code == 500
        assert "E-MAN-003" in r.json()["error"] and "ROOST_TEST_HOST" in r.json()["error"]
        roost2 = await start_roost(environ={"ROOST_TEST_HOST": "api.example.com"})
        _, cred2 = await roost2.root()
        assert (await roost2.spawn(cred2, "refs")).status_code == 200

    async def test_api_key_never_resolved(self, start_roost: StartRoost) -> None:
        """A child referencing ${OPENAI_API_KEY} spawns from a daemon with an empty environment."""
        roost = await start_roost(environ={})
        _, cred = await roost.root()
        r = await roost.spawn(cred, "keyed")
        assert r.status_code == 200, r.text
        r = await roost.register("keyed", approval=r.json()["approval"])
        assert r.status_code == 200, r.text

    async def test_check_order(self, start_roost: StartRoost) -> None:
        """Name list, then depth, ceiling, concurrency -- all before the registry is read."""
        roost = await start_roost(max_depth=0, max_live_capsules=0, max_concurrent=0)
        _, cred = await roost.root()
        r = await roost.spawn(cred, "nope")
        assert r.json()["error"] == "capsule 'nope' is not in parent's spawn_allow"
        r = await roost.spawn(cred, "worker-b", version="9.9.9")  # unresolvable: bounds first
        assert r.json()["error"].startswith("delegation depth bound reached")
        roost = await start_roost(max_live_capsules=0, max_concurrent=0)
        _, cred = await roost.root()
        r = await roost.spawn(cred, "worker-b", version="9.9.9")
        assert r.json()["error"].startswith("machine capsule ceiling reached")
        roost = await start_roost(max_concurrent=0)
        _, cred = await roost.root()
        r = await roost.spawn(cred, "worker-b", version="9.9.9")
        assert r.json()["error"].startswith("delegation concurrency bound reached")
        roost = await start_roost()
        _, cred = await roost.root()
        assert (await roost.spawn(cred, "worker-b", version="9.9.9")).status_code == 500

    async def test_refused_spawn_leaves_no_trace(self, start_roost: StartRoost) -> None:
        """A refused spawn changes no figure."""
        roost = await start_roost()
        sid, cred = await roost.root()
        before = await roost.status(sid)
        for name in ("wide", "nope", "refs"):
            assert (await roost.spawn(cred, name)).status_code in (403, 500)
        assert await roost.status(sid) == before


class TestRegister:
    async def test_top_level_success(self, start_roost: StartRoost) -> None:
        """200 with an msc1 credential; the session is running at --max-depth."""
        roost = await start_roost(max_depth=5)
        sid, cred = await roost.root()
        assert cred.startswith("msc1.eyJ2IjoxLCJz")
        assert await roost.status(sid) == {
            "status": "running",
            "depth_remaining": 5,
            "live_children": 0,
            "live_capsules": 1,
        }

    async def test_bad_body(self, start_roost: StartRoost) -> None:
        """400 when the body is not JSON or session_id is empty."""
        roost = await start_roost()
        assert (await roost.client.post("/register", content=b"nope")).status_code == 400
        r = await roost.client.post("/register", json={"session_id": "", "name": "orch", "version": "0.1.0"})
        assert r.status_code == 400
        r = await roost.client.post("/register", json={"name": "orch", "version": "0.1.0"})
        assert r.status_code == 400

    async def test_not_in_spawn_allow_published_or_not(self, start_roost: StartRoost) -> None:
        """403 naming --spawn-allow, whether or not the name is published."""
        roost = await start_roost(spawn_allow=["orch"])
        for name in ("worker-b", "unpublished"):
            r = await roost.register(name)
            assert (r.status_code, r.json()) == (403, {"error": f"capsule '{name}' is not in --spawn-allow"})

    async def test_top_level_unresolvable(self, start_roost: StartRoost) -> None:
        """No approval: the name check passes, then the registry resolve fails with 500."""
        roost = await start_roost(spawn_allow=["ghost"])
        r = await roost.register("ghost")
        assert r.status_code == 500

    async def test_approval_path_resolves_first(self, start_roost: StartRoost) -> None:
        """With an approval: an unresolvable name is 500 even when the approval is garbage."""
        roost = await start_roost()
        r = await roost.register("ghost", approval="msa1.garbage")
        assert r.status_code == 500
        assert_identity(await roost.register("worker-a", approval="msa1.garbage"))

    async def test_bad_approval_never_falls_back(self, start_roost: StartRoost) -> None:
        """An approval that does not verify is refused even for a name in --spawn-allow."""
        roost = await start_roost(spawn_allow=["orch", "worker-a"])
        for token in ("", "msa1.x.y", Keyring.generate().mint_approval(ApprovalClaims("a", "s", "worker-a", "0.1.0", "h", 1, 0))):
            assert_identity(await roost.register("worker-a", approval=token))

    async def test_credential_as_approval(self, start_roost: StartRoost) -> None:
        """A credential presented as an approval is the identity refusal."""
        roost = await start_roost()
        _, cred = await roost.root()
        assert_identity(await roost.register("worker-a", approval=cred))
        r = await roost.spawn(cred, "worker-a")
        assert_identity(await roost.spawn(r.json()["approval"], "worker-a"))

    async def test_already_registered(self, start_roost: StartRoost) -> None:
        """A session_id that is already registered is the identity refusal, on both paths."""
        roost = await start_roost()
        sid, cred = await roost.root()
        assert_identity(await roost.register("orch", session_id=sid))
        r = await roost.spawn(cred, "worker-a")
        assert_identity(await roost.register("worker-a", approval=r.json()["approval"], session_id=sid))

    async def test_granting_session_ended(self, start_roost: StartRoost) -> None:
        """An approval whose granting session has deregistered is the identity refusal."""
        roost = await start_roost()
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        await roost.deregister(cred)
        assert_identity(await roost.register("worker-a", approval=approval))

    async def test_expired(self, start_roost: StartRoost, mock_clock: trio.testing.MockClock) -> None:
        """403 expired at 60 s after the grant; 59.9 s still redeems."""
        roost = await start_roost()
        _, cred = await roost.root()
        a1 = (await roost.spawn(cred, "worker-a")).json()["approval"]
        a2 = (await roost.spawn(cred, "worker-a")).json()["approval"]
        mock_clock.jump(APPROVAL_LIFETIME_S - 0.1)
        assert (await roost.register("worker-a", approval=a1)).status_code == 200
        mock_clock.jump(0.1)
        r = await roost.register("worker-a", approval=a2)
        assert (r.status_code, r.json()) == (
            403,
            {
                "error": "this spawn approval has passed its expiry; an approval is valid for 60 "
                "seconds from the POST /spawn that granted it"
            },
        )

    async def test_replayed(self, start_roost: StartRoost) -> None:
        """403 replayed on the second presentation."""
        roost = await start_roost()
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        assert (await roost.register("worker-a", approval=approval)).status_code == 200
        r = await roost.register("worker-a", approval=approval)
        assert (r.status_code, r.json()) == (
            403,
            {
                "error": "this spawn approval has already been redeemed; an approval covers one "
                "launch, so ask POST /spawn for another"
            },
        )

    async def test_different_coordinates_consumes(self, start_roost: StartRoost) -> None:
        """403 for another artifact; the approval is spent before the comparison."""
        roost = await start_roost()
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        r = await roost.register("worker-b", approval=approval)
        assert (r.status_code, r.json()) == (
            403,
            {"error": "this spawn approval was granted for 'worker-a@0.1.0', not 'worker-b@0.1.0'"},
        )
        r = await roost.register("worker-a", approval=approval)
        assert r.json()["error"].startswith("this spawn approval has already been redeemed")

    async def test_different_bytes(self, start_roost: StartRoost) -> None:
        """403 naming both hashes when the coordinates now resolve to other bytes."""
        roost = await start_roost()
        _, cred = await roost.root()
        body = (await roost.spawn(cred, "worker-a")).json()
        worker = roost.registry.items[("worker-a", "0.1.0")].manifest
        new = roost.registry.add(worker, salt="rebuilt")
        r = await roost.register("worker-a", approval=body["approval"])
        assert (r.status_code, r.json()) == (
            403,
            {
                "error": "'worker-a@0.1.0' now resolves to a different artifact than the one this "
                f"spawn approval was granted for (approved sha256 {body['sha256']}, resolved "
                f"sha256 {new.sha256})"
            },
        )

    async def test_extra_keys_change_nothing(self, start_roost: StartRoost) -> None:
        """A body carrying its own capabilities, envelope or depth_remaining registers the registry's grants."""
        roost = await start_roost(max_depth=1)
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        sid = roost.fresh_id()
        r = await roost.register(
            "worker-a",
            approval=approval,
            session_id=sid,
            capabilities={"spawn": {"allow": ["worker-a"]}},
            envelope={"spawn_allow": ["worker-a"]},
            depth_remaining=99,
        )
        assert r.status_code == 200
        assert (await roost.status(sid))["depth_remaining"] == 0
        r = await roost.spawn(r.json()["credential"], "worker-a")
        assert r.json() == {"error": "capsule 'worker-a' is not in parent's spawn_allow"}

    async def test_per_session_allow_list(self, start_roost: StartRoost) -> None:
        """The seed's example: a capsule spawns only its own list even where --spawn-allow has more."""
        reg = fake_registry((capsule("orchestrator", spawn=SpawnCaps(("worker-a",))), *MANIFESTS))
        roost = await start_roost(spawn_allow=["orchestrator", "worker-a", "worker-b"], registry=reg)
        _, cred = await roost.root("orchestrator")
        r = await roost.spawn(cred, "worker-b")
        assert (r.status_code, r.json()) == (403, {"error": "capsule 'worker-b' is not in parent's spawn_allow"})


    async def test_no_spawn_allow_admits_only_approved(self, start_roost: StartRoost) -> None:
        """Started with no --spawn-allow, the daemon admits only capsules launched under its approval."""
        roost = await start_roost(spawn_allow=())
        r = await roost.register("orch")
        assert (r.status_code, r.json()) == (403, {"error": "capsule 'orch' is not in --spawn-allow"})

    async def test_approval_path_consults_parents_list_not_global(self, start_roost: StartRoost) -> None:
        """Per-session lists: with an approval, --spawn-allow is not consulted (worker-b is not in it)."""
        roost = await start_roost(spawn_allow=["orch"])
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-b")).json()["approval"]
        assert (await roost.register("worker-b", approval=approval)).status_code == 200
        assert (await roost.register("worker-b")).status_code == 403


class TestDeregister:
    async def test_outcomes(self, start_roost: StartRoost) -> None:
        """200 {}; the outcome becomes the status."""
        roost = await start_roost()
        for outcome in ("complete", "failed"):
            sid, cred = await roost.root()
            r = await roost.deregister(cred, outcome)
            assert (r.status_code, r.json()) == (200, {})
            assert (await roost.status(sid))["status"] == outcome

    async def test_bad_body(self, start_roost: StartRoost) -> None:
        """400 for a body that is not JSON or an outcome that is neither complete nor failed."""
        roost = await start_roost()
        _, cred = await roost.root()
        h = {CREDENTIAL_HEADER: cred}
        for content in (b"x", b'{"outcome": "done"}', b"{}"):
            assert (await roost.client.post("/deregister", content=content, headers=h)).status_code == 400

    async def test_identity_rows(self, start_roost: StartRoost) -> None:
        """403 identity: absent, invalid, or naming a session that is not running."""
        roost = await start_roost()
        _, cred = await roost.root()
        assert_identity(await roost.deregister(None))
        assert_identity(await roost.deregister("msc1.a.b"))
        assert (await roost.deregister(cred)).status_code == 200
        assert_identity(await roost.deregister(cred))


class TestStatus:
    async def test_not_found(self, start_roost: StartRoost) -> None:
        """404 session not found."""
        roost = await start_roost()
        r = await roost.client.get("/status/ses_nobody")
        assert (r.status_code, r.json()) == (404, {"error": "session not found"})

    async def test_restart_forgets_everything(self, start_roost: StartRoost) -> None:
        """A new daemon process knows no session and honours no credential or approval."""
        first = await start_roost()
        sid, cred = await first.root()
        approval = (await first.spawn(cred, "worker-a")).json()["approval"]
        second = await start_roost()
        assert (await second.client.get(f"/status/{sid}")).status_code == 404
        assert_identity(await second.spawn(cred, "worker-a"))
        assert_identity(await second.deregister(cred))
        assert_identity(await second.register("worker-a", approval=approval))

    async def test_live_children_counts_unlaunched(self, start_roost: StartRoost) -> None:
        """live_children counts an approved, not yet launched child; live_capsules is global."""
        roost = await start_roost()
        sid, cred = await roost.root()
        other, _ = await roost.root()
        await roost.spawn(cred, "worker-a")
        assert (await roost.status(sid))["live_children"] == 1
        assert (await roost.status(sid))["live_capsules"] == 3
        assert (await roost.status(other))["live_capsules"] == 3


class TestBoundsEvents:
    async def test_concurrency_event_table(self, start_roost: StartRoost, mock_clock: trio.testing.MockClock) -> None:
        """Grant reserves, redeem keeps, child deregister releases, expiry releases, parent deregister releases all."""
        roost = await start_roost()
        sid, cred = await roost.root()

        async def children() -> int:
            return int((await roost.status(sid))["live_children"])

        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        assert await children() == 1
        r = await roost.register("worker-a", approval=approval)
        assert await children() == 1
        assert (await roost.deregister(r.json()["credential"])).status_code == 200
        assert await children() == 0
        await roost.spawn(cred, "worker-a")
        mock_clock.jump(APPROVAL_LIFETIME_S - 0.5)
        assert await children() == 1
        mock_clock.jump(0.5)
        assert await children() == 0
        pending = [(await roost.spawn(cred, "worker-a")).json()["approval"] for _ in range(3)]
        assert await children() == 3
        await roost.deregister(cred)
        assert await children() == 0
        for approval in pending:
            assert_identity(await roost.register("worker-a", approval=approval))

    async def test_ceiling_event_table(self, start_roost: StartRoost, mock_clock: trio.testing.MockClock) -> None:
        """The census moves on the same events, and expiry is evaluated when it is read."""
        roost = await start_roost(max_live_capsules=2)
        sid, cred = await roost.root()

        async def census() -> int:
            return int((await roost.status(sid))["live_capsules"])

        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        assert await census() == 2
        assert (await roost.spawn(cred, "worker-a")).status_code == 403  # full
        r = await roost.register("worker-a", approval=approval)
        assert await census() == 2
        await roost.deregister(r.json()["credential"])
        assert await census() == 1
        assert (await roost.spawn(cred, "worker-a")).status_code == 200
        mock_clock.jump(APPROVAL_LIFETIME_S)
        assert (await roost.spawn(cred, "worker-a")).status_code == 200  # the expired slot came back

    async def test_roots_counted_never_refused(self, start_roost: StartRoost) -> None:
        """Roots past the ceiling register; the next delegated spawn is refused until the census falls."""
        roost = await start_roost(max_live_capsules=2)
        roots = [await roost.root() for _ in range(3)]
        r = await roost.spawn(roots[0][1], "worker-a")
        assert r.status_code == 403 and "it is already holding 3" in r.json()["error"]
        await roost.deregister(roots[1][1])
        await roost.deregister(roots[2][1])
        assert (await roost.spawn(roots[0][1], "worker-a")).status_code == 200

    async def test_zero_bounds_refuse_every_delegation(self, start_roost: StartRoost) -> None:
        """Each bound at 0 refuses every delegation, while roots still register."""
        for flag in ("max_depth", "max_concurrent", "max_live_capsules"):
            roost = await start_roost(**{flag: 0})
            _, cred = await roost.root()
            assert (await roost.spawn(cred, "worker-a")).status_code == 403


class TestCycle:
    async def test_full_chain(self, start_roost: StartRoost) -> None:
        """Root -> child -> grandchild, then everything deregisters and the census returns to 0."""
        roost = await start_roost()
        root_id, root_cred = await roost.root()
        child_id, child_cred = await roost.child(root_cred, "orch")
        grand_id, grand_cred = await roost.child(child_cred, "worker-a")
        assert [(await roost.status(s))["depth_remaining"] for s in (root_id, child_id, grand_id)] == [3, 2, 1]
        for cred in (grand_cred, child_cred, root_cred):
            assert (await roost.deregister(cred)).status_code == 200
        assert (await roost.status(root_id))["live_capsules"] == 0

    async def test_approval_header_name(self, start_roost: StartRoost) -> None:
        """The approval travels in x-murmur-spawn-approval, the credential in x-murmur-spawn-credential."""
        roost = await start_roost()
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        r = await roost.client.post(
            "/register",
            json={"session_id": roost.fresh_id(), "name": "worker-a", "version": "0.1.0"},
            headers={APPROVAL_HEADER: approval},
        )
        assert r.status_code == 200

    async def test_repeated_credential_header_is_identity(self, start_roost: StartRoost) -> None:
        """A credential header sent twice is not a credential."""
        roost = await start_roost()
        _, cred = await roost.root()
        r = await roost.client.post(
            "/spawn",
            json={"name": "worker-a", "version": "0.1.0"},
            headers=[(CREDENTIAL_HEADER, cred), (CREDENTIAL_HEADER, cred)],
        )
        assert_identity(r)
