"""Tests of murmur.lock parsing and rendering."""

from __future__ import annotations

from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.registry.lock import Pin, check_pin, parse_lock, read_lock, render_lock, write_pin

SHA = "ab" * 32


class TestLock:
    def test_round_trip(self, tmp_path: Path) -> None:
        """Rendered pins parse back to the same pins; versions stay text."""
        pins = {"local/a": Pin("local/a", "1.10", SHA), "local/b": Pin("local/b", "0.1.0", SHA)}
        assert parse_lock(render_lock(pins), path="l") == pins
        p = tmp_path / "murmur.lock"
        write_pin(p, pins["local/b"])
        write_pin(p, pins["local/a"])
        assert read_lock(p) == pins
        assert [q.name for q in tmp_path.iterdir()] == ["murmur.lock"]

    def test_absent_lock_is_empty(self, tmp_path: Path) -> None:
        """No file means no pins."""
        assert read_lock(tmp_path / "murmur.lock") == {}

    def test_fifo_lock_is_coded(self, tmp_path: Path) -> None:
        """A murmur.lock that is a FIFO is E-REG-008 naming the path; no hang."""
        import os

        os.mkfifo(tmp_path / "murmur.lock")
        with pytest.raises(DiagnosticError) as info:
            read_lock(tmp_path / "murmur.lock")
        assert info.value.code == "E-REG-008" and "a FIFO, not a regular file" in str(info.value)

    @pytest.mark.parametrize(("text", "line"), [
        ("lock_version: 2\npins: {}\n", 1),
        ("lock_version: 1\nextra: 1\n", 2),
        ("lock_version: 1\npins:\n  demo:\n    version: '1'\n    sha256: " + SHA + "\n", 3),
        ("lock_version: 1\npins:\n  local/demo:\n    version: '1'\n    sha256: XYZ\n", 5),
        ("lock_version: 1\npins:\n  local/demo:\n    version: latest!\n    sha256: " + SHA + "\n", 4),
        ("lock_version: 1\npins: [a]\n", 2),
        ("lock_version: [1\n", 2),
    ])
    def test_malformed(self, text: str, line: int) -> None:
        """Every malformed lock is E-REG-008 at the offending line."""
        with pytest.raises(DiagnosticError) as info:
            parse_lock(text, path="murmur.lock")
        d = info.value.diagnostics[0]
        assert d.code == "E-REG-008" and d.location is not None and d.location.line == line

    def test_check_pin(self) -> None:
        """Unpinned refs pass; version or hash disagreement is E-REG-005."""
        pins = {"local/a": Pin("local/a", "1", SHA)}
        check_pin(pins, "local/b", "9", "0" * 64, where="l")
        check_pin(pins, "local/a", "1", SHA, where="l")
        for version, sha in (("2", SHA), ("1", "0" * 64)):
            with pytest.raises(DiagnosticError) as info:
                check_pin(pins, "local/a", version, sha, where="l")
            assert info.value.code == "E-REG-005"
