"""Tests of `mur demo` refusals through the real command line: coded diagnostics, no traceback,
nothing left running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def mur_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "murmur.cli.mur", "demo", *args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


class TestRefusals:
    def test_missing_target(self, tmp_path: Path) -> None:
        """A PATH that is not a directory is E-IO-001 (exit 1) and starts nothing."""
        done = mur_demo(str(tmp_path / "missing"), "--home", str(tmp_path / "d"))
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith("error[E-IO-001]: nothing to audit:")
        assert "Traceback" not in done.stderr and not (tmp_path / "d").exists()

    def test_home_with_other_contents(self, tmp_path: Path) -> None:
        """--home naming a directory with someone else's files is E-DMO-001 and touches nothing."""
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "notes.txt").write_text("mine")
        done = mur_demo(str(tmp_path), "--home", str(tmp_path / "d"))
        assert done.returncode == 1 and done.stderr.startswith("error[E-DMO-001]:")
        assert [p.name for p in (tmp_path / "d").iterdir()] == ["notes.txt"]
