"""A launch that falls short gives its mur-roost slot back (murmur.delegation.release; issue 11).

Against an in-process mur-roost over real TCP (tests/delegation/conftest.py).
"""

from __future__ import annotations

import trio

from murmur.delegation.release import Slot, give_back
from murmur.manifest.model import Capabilities, Manifest, SpawnCaps
from murmur.roost.client import RoostClient, RoostRefused, SpawnApproval

from .conftest import StartRoost

PARENT = Manifest("orch", "0.1.0", capabilities=Capabilities(spawn=SpawnCaps(("worker",))))
WORKER = Manifest("worker", "0.1.0")


async def parent_with_grant(url: str) -> tuple[RoostClient, str, SpawnApproval]:
    """A registered parent and one granted spawn; (client, credential, grant)."""
    client = RoostClient(url)
    credential = await client.register("ses_" + "1" * 32, "orch", "0.1.0")
    grant = await client.spawn(credential, "worker", "0.1.0")
    return client, credential, grant


class TestGiveBack:
    async def test_unredeemed_approval_is_given_back(self, roost: StartRoost) -> None:
        """Redeemed in the child's place and deregistered: live_children and the census drop."""
        url = await roost([PARENT, WORKER], spawn_allow=["orch"], max_concurrent=1)
        client, credential, grant = await parent_with_grant(url)
        async with client:
            figures = await client.status("ses_" + "1" * 32)
            assert figures is not None and (figures.live_children, figures.live_capsules) == (1, 2)
            try:
                await client.spawn(credential, "worker", "0.1.0")
            except RoostRefused as exc:
                assert exc.message.startswith("delegation concurrency bound reached")
            else:
                raise AssertionError("the second spawn was granted past --max-concurrent 1")
            assert await give_back(url, grant) is Slot.GIVEN_BACK
            figures = await client.status("ses_" + "1" * 32)
            assert figures is not None and (figures.live_children, figures.live_capsules) == (0, 1)
            assert (await client.spawn(credential, "worker", "0.1.0")).name == "worker"
            # the approval is spent: a child that still presented it would be refused
            try:
                await client.register("ses_" + "2" * 32, "worker", "0.1.0", approval=grant.approval)
            except RoostRefused as exc:
                assert exc.message.startswith("this spawn approval has already been redeemed")
            else:
                raise AssertionError("a given-back approval was redeemed again")

    async def test_redeemed_by_the_child_is_not_held(self, roost: StartRoost) -> None:
        """The child registered: nothing to give back here; its own session holds the slot."""
        url = await roost([PARENT, WORKER], spawn_allow=["orch"])
        client, _credential, grant = await parent_with_grant(url)
        async with client:
            child = await client.register("ses_" + "3" * 32, "worker", "0.1.0", approval=grant.approval)
            assert await give_back(url, grant) is Slot.NOT_HELD
            figures = await client.status("ses_" + "1" * 32)
            assert figures is not None and figures.live_children == 1
            await client.deregister(child, "complete")
            figures = await client.status("ses_" + "1" * 32)
            assert figures is not None and figures.live_children == 0

    async def test_granting_session_ended_is_not_held(self, roost: StartRoost) -> None:
        """The parent deregistered first: its reservations went with it; nothing is held."""
        url = await roost([PARENT, WORKER], spawn_allow=["orch"])
        client, credential, grant = await parent_with_grant(url)
        async with client:
            await client.deregister(credential, "complete")
            assert await give_back(url, grant) is Slot.NOT_HELD
            figures = await client.status("ses_" + "1" * 32)
            assert figures is not None and figures.live_capsules == 0

    async def test_unreachable_daemon_is_still_held(self) -> None:
        """Nothing answers: STILL_HELD, quickly, no exception."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        for listener in listeners:
            await listener.aclose()
        grant = SpawnApproval("msa1.x.y", "worker", "0.1.0", "00", 0)
        with trio.fail_after(10):
            assert await give_back(f"http://127.0.0.1:{port}", grant) is Slot.STILL_HELD

    async def test_silent_daemon_is_bounded(self, nursery: trio.Nursery) -> None:
        """A daemon that accepts and never answers: STILL_HELD once the bound has passed."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        held: list[trio.SocketStream] = []

        async def hold(stream: trio.SocketStream) -> None:
            held.append(stream)
            await trio.sleep_forever()

        nursery.start_soon(trio.serve_listeners, hold, listeners)
        grant = SpawnApproval("msa1.x.y", "worker", "0.1.0", "00", 0)
        with trio.fail_after(10):
            began = trio.current_time()
            assert await give_back(f"http://127.0.0.1:{port}", grant, bound=0.5) is Slot.STILL_HELD
            assert 0.4 <= trio.current_time() - began < 5
        assert held  # the request did reach it
        nursery.cancel_scope.cancel()

    async def test_runs_shielded_under_a_cancelled_scope(self, roost: StartRoost) -> None:
        """Clean-up: a give-back called under an already cancelled scope still gives back."""
        url = await roost([PARENT, WORKER], spawn_allow=["orch"])
        client, _credential, grant = await parent_with_grant(url)
        async with client:
            with trio.CancelScope() as scope:
                scope.cancel()
                slot = await give_back(url, grant)
            assert slot is Slot.GIVEN_BACK
            figures = await client.status("ses_" + "1" * 32)
            assert figures is not None and figures.live_children == 0
