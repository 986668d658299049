"""Delegation fixtures: an in-process mur-roost over real TCP with an in-memory registry."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from functools import partial

import attrs
import pytest
import trio

from murmur import lifeline
from murmur.manifest.model import Manifest
from murmur.roost.app import create_app, hypercorn_config, serve
from murmur.roost.ledger import Bounds
from murmur.roost.registry import ResolvedArtifact


@pytest.fixture(autouse=True)
def forget_lifeline_claims() -> Iterator[None]:
    """Claimed lifeline fds are process-wide; forget the ones a test claimed (their numbers are reused)."""
    before = set(lifeline._claimed)
    yield
    lifeline._claimed.intersection_update(before)


def sha_of(manifest: Manifest) -> str:
    """A stable fake content hash."""
    return hashlib.sha256(f"{manifest.name}@{manifest.version}".encode()).hexdigest()


@attrs.define
class MemoryRegistry:
    """An in-memory roost registry."""

    items: dict[tuple[str, str], ResolvedArtifact] = attrs.field(factory=dict)

    def add(self, manifest: Manifest) -> ResolvedArtifact:
        """Publish one manifest."""
        art = ResolvedArtifact(manifest.name, manifest.version, sha_of(manifest), manifest)
        self.items[(manifest.name, manifest.version)] = art
        return art

    def resolve(self, name: str, version: str) -> ResolvedArtifact | None:
        """``name@version`` or None."""
        return self.items.get((name.rsplit("/", 1)[-1], version))


StartRoost = Callable[..., Awaitable[str]]


@pytest.fixture
async def roost() -> AsyncIterator[StartRoost]:
    """``await roost(manifests, spawn_allow=..., ...)`` starts a daemon on 127.0.0.1:0; its URL."""
    async with trio.open_nursery() as nursery:
        stops: list[trio.Event] = []

        async def start(
            manifests: Iterable[Manifest],
            *,
            spawn_allow: Iterable[str] = (),
            max_depth: int = 3,
            max_concurrent: int = 4,
            max_live_capsules: int = 16,
        ) -> str:
            reg = MemoryRegistry()
            for m in manifests:
                reg.add(m)
            app = create_app(bounds=Bounds(max_depth, max_concurrent, max_live_capsules),
                             spawn_allow=tuple(spawn_allow), registry=reg)
            stop = trio.Event()
            stops.append(stop)
            binds = await nursery.start(partial(serve, app, hypercorn_config(0), stop.wait))
            return str(binds[0])

        try:
            yield start
        finally:
            for stop in stops:
                stop.set()
