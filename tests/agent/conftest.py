"""Fixtures for the agent tests: a live scripted provider on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from .npm_cli import npm_bin
from .scripted import ScriptedServer


@pytest.fixture
async def provider(nursery: trio.Nursery) -> AsyncIterator[ScriptedServer]:
    """A ScriptedServer serving on 127.0.0.1:<free port> until the test ends."""
    server = ScriptedServer()
    await nursery.start(server.serve)
    yield server


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The directory holding the real ``claude`` (Claude Code from npm, pinned in .ci/npm-clis.txt)."""
    return npm_bin("@anthropic-ai/claude-code", "claude")
