"""Concurrency: many simultaneous requests never exceed a bound and never 5xx (seed 000)."""

from __future__ import annotations

import collections

import httpx
import trio

from murmur.roost.app import APPROVAL_HEADER, CREDENTIAL_HEADER

from .conftest import StartRoost


class TestConcurrentSpawns:
    async def test_500_spawns_against_small_ceiling(self, start_roost: StartRoost) -> None:
        """500 concurrent /spawn never take the census past the ceiling and produce no 5xx."""
        roost = await start_roost(max_live_capsules=30, max_concurrent=4, max_connections=500)
        roots = [await roost.root() for _ in range(20)]
        statuses: collections.Counter[int] = collections.Counter()
        errors: list[str] = []

        async def one(i: int) -> None:
            _, cred = roots[i % len(roots)]
            r = await roost.client.post(
                "/spawn", json={"name": "worker-a", "version": "0.1.0"}, headers={CREDENTIAL_HEADER: cred}
            )
            statuses[r.status_code] += 1
            if r.status_code == 403:
                errors.append(r.json()["error"].split(":")[0])

        async with trio.open_nursery() as nursery:
            for i in range(500):
                nursery.start_soon(one, i)
        assert set(statuses) <= {200, 403}
        assert statuses[200] == 10  # 20 roots + 10 reservations = the ceiling of 30
        assert statuses[403] == 490
        assert set(errors) == {"machine capsule ceiling reached"}
        assert (await roost.status(roots[0][0]))["live_capsules"] == 30

    async def test_concurrency_cap_under_load(self, start_roost: StartRoost) -> None:
        """Concurrent spawns from one session never exceed --max-concurrent."""
        roost = await start_roost(max_concurrent=3, max_connections=200)
        sid, cred = await roost.root()
        codes: list[int] = []

        async def one() -> None:
            r = await roost.client.post(
                "/spawn", json={"name": "worker-a", "version": "0.1.0"}, headers={CREDENTIAL_HEADER: cred}
            )
            codes.append(r.status_code)

        async with trio.open_nursery() as nursery:
            for _ in range(200):
                nursery.start_soon(one)
        assert codes.count(200) == 3 and codes.count(403) == 197
        assert (await roost.status(sid))["live_children"] == 3


class TestConcurrentRedemptions:
    async def test_200_redemptions_admit_exactly_one(self, start_roost: StartRoost) -> None:
        """200 concurrent presentations of one approval admit exactly one session."""
        roost = await start_roost(max_connections=200)
        _, cred = await roost.root()
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]
        results: list[httpx.Response] = []

        async def one(i: int) -> None:
            r = await roost.client.post(
                "/register",
                json={"session_id": f"ses_racer_{i}", "name": "worker-a", "version": "0.1.0"},
                headers={APPROVAL_HEADER: approval},
            )
            results.append(r)

        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(one, i)
        codes = collections.Counter(r.status_code for r in results)
        assert codes == {200: 1, 403: 199}
        assert {r.json()["error"] for r in results if r.status_code == 403} == {
            "this spawn approval has already been redeemed; an approval covers one launch, so ask POST /spawn for another"
        }
