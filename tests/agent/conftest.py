"""Fixtures for the agent tests: a live scripted provider on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from .scripted import ScriptedServer


@pytest.fixture
async def provider(nursery: trio.Nursery) -> AsyncIterator[ScriptedServer]:
    """A ScriptedServer serving on 127.0.0.1:<free port> until the test ends."""
    server = ScriptedServer()
    await nursery.start(server.serve)
    yield server
