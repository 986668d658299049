"""Fixtures of the kill suite: a :class:`~._rig.Rig` per test, per containment class.

The rig owns every process the test starts and kills it (and every unit it made) in a
shielded ``finally``; ``klass`` runs a test once per containment class: ``cgroup`` (skipped
where this host cannot give it) and ``groups`` (forced with ``MURMUR_CONTAINMENT=groups`` in
the environment of every process the rig starts). ``start_path`` runs a formation test once
per way a member starts (``warm``: forked by the launcher's warm starter, ``MURMUR_STARTER=on``;
``exec``: a new ``mur run``, ``MURMUR_STARTER=off``); a module opts in with ``START_PATHS``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from murmur.containment import CGROUP, detect

from ._rig import CLASSES, START_PATHS, Rig

__all__ = ["START_PATHS"]


@pytest.fixture(params=CLASSES)
def klass(request: pytest.FixtureRequest) -> str:
    name = str(request.param)
    if name == CGROUP:
        host = detect({}, probe=True)
        if host.name != CGROUP:
            pytest.skip(f"this host gives no cgroup containment: {host.why}")
    return name


@pytest.fixture
def start_path(request: pytest.FixtureRequest) -> str:
    """``warm`` or ``exec`` where a module parametrizes it (indirect); else ``default``."""
    return str(getattr(request, "param", "default"))


@pytest.fixture
async def rig(tmp_path: Path, klass: str, start_path: str) -> AsyncIterator[Rig]:
    async with trio.open_nursery() as nursery:  # one owning task per started process
        r = Rig(tmp_path, klass, nursery, start_path=start_path)
        try:
            yield r
        finally:
            with trio.CancelScope(shield=True):
                await r.aclose()
