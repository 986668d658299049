"""Tests of the async roost client against a live in-process daemon."""

from __future__ import annotations

import pytest

from murmur.roost.client import (
    RoostClient,
    RoostRefused,
    RoostUnreachable,
    SessionFigures,
    roost_url_fault,
    roost_url_from_env,
)

from .conftest import StartRoost


class TestClient:
    async def test_full_cycle(self, start_roost: StartRoost) -> None:
        """register -> spawn -> child register -> status -> deregister through the client."""
        roost = await start_roost()
        async with RoostClient(roost.url) as client:
            assert await client.health()
            cred = await client.register("ses_root", "orch", "0.1.0")
            grant = await client.spawn(cred, "worker-a", "0.1.0")
            assert (grant.name, grant.version) == ("worker-a", "0.1.0")
            assert grant.approval not in repr(grant)
            child = await client.register("ses_child", "worker-a", "0.1.0", approval=grant.approval)
            assert await client.status("ses_root") == SessionFigures("running", 3, 1, 2)
            await client.deregister(child, "complete")
            await client.deregister(cred, "failed")
            figures = await client.status("ses_root")
            assert figures is not None and figures.status == "failed"
            assert await client.status("ses_unknown") is None

    async def test_refusal_carries_status_and_message(self, start_roost: StartRoost) -> None:
        """A refusal raises RoostRefused with the daemon's status and sentence, never the token."""
        roost = await start_roost()
        async with RoostClient(roost.url) as client:
            cred = await client.register("ses_root", "orch", "0.1.0")
            with pytest.raises(RoostRefused) as info:
                await client.spawn(cred, "wide", "0.1.0")
            assert info.value.status == 403
            assert info.value.message.startswith("capabilities.network.allow:")
            assert cred not in str(info.value)
            with pytest.raises(RoostRefused) as info:
                await client.register("ses_x", "worker-b", "0.1.0")
            assert info.value.message == "capsule 'worker-b' is not in --spawn-allow"

    async def test_unreachable(self) -> None:
        """Nothing listening raises RoostUnreachable."""
        async with RoostClient("http://127.0.0.1:9", timeout=2.0) as client:
            with pytest.raises(RoostUnreachable):
                await client.health()


class TestEnv:
    @pytest.mark.parametrize(
        ("env", "url"),
        [({}, None), ({"MURMUR_ROOST_URL": "  "}, None), ({"MURMUR_ROOST_URL": "http://h:1"}, "http://h:1")],
    )
    def test_roost_url_from_env(self, env: dict[str, str], url: str | None) -> None:
        """Unset or blank MURMUR_ROOST_URL is None."""
        assert roost_url_from_env(env) == url

    @pytest.mark.parametrize(
        ("url", "why"),
        [
            ("garbage", "no http:// scheme"),
            ("https://127.0.0.1:7700", "not an http:// URL"),
            ("http://127.0.0.1", "no port"),
            ("http://:7700", "no host"),
            ("http://127.0.0.1:99999", "port is not a number"),
            ("http://127.0.0.1:7700/spawn", "no user, path"),
            ("http://u@127.0.0.1:7700", "no user, path"),
        ],
    )
    def test_a_url_that_cannot_be_a_daemon(self, url: str, why: str) -> None:
        """MURMUR_ROOST_URL=garbage used to be reported as "did not answer"."""
        fault = roost_url_fault(url)
        assert fault is not None and why in fault

    @pytest.mark.parametrize("url", ["http://127.0.0.1:7700", "http://localhost:1/", "http://[::1]:7700"])
    def test_a_base_url(self, url: str) -> None:
        assert roost_url_fault(url) is None
