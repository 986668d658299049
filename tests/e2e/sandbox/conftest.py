"""Shared set-up for the sandbox end-to-end tests: a scratch capsule tree and the interpreter."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from murmur.manifest.model import Containment
from murmur.sandbox.host import probe


def backed(klass: Containment) -> None:
    """Skip, saying why, when this host cannot back ``klass``."""
    lacks = probe().lacks(klass)
    if lacks:
        pytest.skip(f"this host cannot back {klass.value}: it lacks {'; '.join(lacks)}")


@pytest.fixture
def bin_dir(tmp_path: Path) -> Iterator[Path]:
    """A PATH directory granting ``python3`` (the system interpreter when there is one)."""
    d = tmp_path / "bin"
    d.mkdir()
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
    if python is None:
        pytest.skip("no system python3 to grant")
    (d / "python3").symlink_to(python)
    yield d
