"""Shared roost fixtures: an in-memory registry, test manifests, and live daemons on port 0."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import attrs
import httpx
import pytest
import trio

from murmur.manifest.model import (
    Capabilities,
    Containment,
    Inference,
    Manifest,
    NetworkCaps,
    ShellCaps,
    SpawnCaps,
    StateCaps,
)
from murmur.roost.app import CREDENTIAL_HEADER, create_app, hypercorn_config, serve
from murmur.roost.ledger import Bounds
from murmur.roost.registry import ResolvedArtifact
from murmur.roost.watch import ProcessWatch
from murmur.tokens import Keyring

IDENTITY = {
    "error": "not authorised: this daemon answers only a credential it minted for a running "
    "session, and an approval it minted for that same session"
}


def capsule(name: str, version: str = "0.1.0", **caps: Any) -> Manifest:
    """A manifest with the given capabilities block."""
    return Manifest(name, version, capabilities=Capabilities(**caps))


MANIFESTS: tuple[Manifest, ...] = (
    capsule(
        "orch",
        spawn=SpawnCaps(("worker-a", "worker-b", "wide", "refs", "keyed", "orch")),
        network=NetworkCaps(("example.com",)),
        shell=ShellCaps(("git",)),
        state=StateCaps(),
        containment=Containment.SCOPED,
    ),
    capsule("worker-a", network=NetworkCaps(("https://example.com",)), containment=Containment.SEALED),
    capsule("worker-b", containment=Containment.SCOPED),
    capsule("wide", network=NetworkCaps(("api.example.com",)), containment=Containment.SCOPED),
    capsule("loop", spawn=SpawnCaps(("loop",))),
    attrs.evolve(
        capsule("refs", containment=Containment.SCOPED),
        inference=Inference(endpoint="https://${ROOST_TEST_HOST}/v1", model="m"),
    ),
    attrs.evolve(
        capsule("keyed", containment=Containment.SCOPED),
        inference=Inference(endpoint="https://api.example.com/v1", model="m", api_key="${OPENAI_API_KEY}"),
    ),
    capsule("lonely"),
)


def sha_of(manifest: Manifest, salt: str = "") -> str:
    """A stable fake content hash for a manifest."""
    return hashlib.sha256(f"{manifest.name}@{manifest.version}{salt}".encode()).hexdigest()


@attrs.define
class FakeRegistry:
    """An in-memory :class:`~murmur.roost.registry.Registry`."""

    items: dict[tuple[str, str], ResolvedArtifact] = attrs.field(factory=dict)

    def add(self, manifest: Manifest, salt: str = "") -> ResolvedArtifact:
        """Publish (or republish with other bytes) one manifest."""
        art = ResolvedArtifact(manifest.name, manifest.version, sha_of(manifest, salt), manifest)
        self.items[(manifest.name, manifest.version)] = art
        return art

    def resolve(self, name: str, version: str) -> ResolvedArtifact | None:
        """Look up ``name@version``."""
        return self.items.get((name, version))


def fake_registry(manifests: Iterable[Manifest] = MANIFESTS) -> FakeRegistry:
    """A registry holding the test manifests."""
    reg = FakeRegistry()
    for m in manifests:
        reg.add(m)
    return reg


@attrs.define
class Roost:
    """A live daemon and a client for it."""

    url: str
    port: int
    client: httpx.AsyncClient
    keyring: Keyring
    registry: FakeRegistry
    counter: int = 0

    def fresh_id(self) -> str:
        """A session id not used before in this test."""
        self.counter += 1
        return f"ses_{self.counter:032x}"

    async def register(
        self, name: str, approval: str | None = None, session_id: str | None = None, **extra: object
    ) -> httpx.Response:
        """POST /register."""
        headers = {"x-murmur-spawn-approval": approval} if approval is not None else {}
        body = {"session_id": session_id or self.fresh_id(), "name": name, "version": "0.1.0", **extra}
        return await self.client.post("/register", json=body, headers=headers)

    async def root(self, name: str = "orch") -> tuple[str, str]:
        """Register a top-level session; return (session_id, credential)."""
        sid = self.fresh_id()
        r = await self.register(name, session_id=sid)
        assert r.status_code == 200, r.text
        return sid, r.json()["credential"]

    async def spawn(self, credential: str | None, name: str, version: str = "0.1.0") -> httpx.Response:
        """POST /spawn."""
        headers = {CREDENTIAL_HEADER: credential} if credential is not None else {}
        return await self.client.post("/spawn", json={"name": name, "version": version}, headers=headers)

    async def child(self, credential: str, name: str = "worker-a") -> tuple[str, str]:
        """Spawn and register a child; return (session_id, credential)."""
        r = await self.spawn(credential, name)
        assert r.status_code == 200, r.text
        sid = self.fresh_id()
        r = await self.register(name, approval=r.json()["approval"], session_id=sid)
        assert r.status_code == 200, r.text
        return sid, r.json()["credential"]

    async def deregister(self, credential: str | None, outcome: str = "complete") -> httpx.Response:
        """POST /deregister."""
        headers = {CREDENTIAL_HEADER: credential} if credential is not None else {}
        return await self.client.post("/deregister", json={"outcome": outcome}, headers=headers)

    async def status(self, session_id: str) -> dict[str, Any]:
        """GET /status/{id} (asserting 200)."""
        r = await self.client.get(f"/status/{session_id}")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body


StartRoost = Callable[..., Awaitable[Roost]]


async def _until_cancelled(
    run: Callable[..., Awaitable[None]],
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``run(task_status=...)`` inside ``scope`` (cancelled at the fixture's teardown)."""
    with scope:
        await run(task_status=task_status)


@pytest.fixture
async def start_roost() -> AsyncIterator[StartRoost]:
    """Start daemons on 127.0.0.1:0 in-process; every one is shut down at teardown."""
    async with AsyncExitStack() as stack, trio.open_nursery() as nursery:
        stops: list[trio.Event] = []
        watch_scope = trio.CancelScope()

        async def start(
            *,
            spawn_allow: Iterable[str] = ("orch", "loop", "worker-a"),
            max_depth: int = 3,
            max_concurrent: int = 4,
            max_live_capsules: int = 16,
            environ: dict[str, str] | None = None,
            registry: FakeRegistry | None = None,
            keyring: Keyring | None = None,
            max_connections: int = 100,
            watch: ProcessWatch | None = None,
            notice: Callable[[str], None] | None = None,
        ) -> Roost:
            reg = registry if registry is not None else fake_registry()
            keys = keyring or Keyring.generate()
            app = create_app(
                bounds=Bounds(max_depth, max_concurrent, max_live_capsules),
                spawn_allow=tuple(spawn_allow),
                registry=reg,
                environ=environ or {},
                keyring=keys,
                watch=watch,
                notice=notice,
            )
            if watch is not None:
                await nursery.start(_until_cancelled, watch.run, watch_scope)
            stop = trio.Event()
            stops.append(stop)
            cfg = hypercorn_config(0, keep_alive_timeout=3600.0)
            binds = await nursery.start(partial(serve, app, cfg, stop.wait))
            url = binds[0]
            # No keep-alive: a MockClock jump made the moment a response arrives can pass the
            # 5 s deadline of shield_send's scope while the server is still finishing that send
            # (re-arming its idle timer), which leaves that one connection unanswered. Fresh
            # connections make the tests independent of when they jump.
            limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
            client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0))
            return Roost(url, int(url.rsplit(":", 1)[1]), client, keys, reg)

        try:
            yield start
        finally:
            await stack.aclose()
            for stop in stops:
                stop.set()
            watch_scope.cancel()
