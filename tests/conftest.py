"""Shared fixtures: every test gets a private MURMUR_HOME so nothing touches ~/.murmur."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def murmur_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh MURMUR_HOME per test (sync, so it is safe beside trio tests)."""
    home = tmp_path_factory.mktemp("murmur-home")
    monkeypatch.setenv("MURMUR_HOME", str(home))
    yield home
