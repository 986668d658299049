"""Tests of the records directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from murmur.session.console import Console
from murmur.session.records import (
    create_records,
    open_private_append,
    records_dir_for,
    result_text,
    write_private,
)


class TestLayout:
    def test_records_dir_mirrors_workdir(self, murmur_home: Path, tmp_path: Path) -> None:
        """Records live under $MURMUR_HOME/records/<workdir without leading />/<ses>."""
        wd = tmp_path / "proj"
        wd.mkdir()
        d = records_dir_for(wd, "ses_abc")
        assert d == murmur_home / "records" / str(wd.resolve()).lstrip("/") / "ses_abc"

    def test_create_private(self, murmur_home: Path) -> None:
        """Every directory is created owner-only."""
        rec = create_records(murmur_home / "records" / "x" / "ses_1")
        for d in (rec.root, rec.out, rec.logs, rec.home, rec.tmp):
            assert d.is_dir()
            assert os.stat(d).st_mode & 0o777 == 0o700
        assert rec.result == rec.root / "out" / "result.txt"
        assert rec.task_result("tsk_1").name == "result_tsk_1.txt"


class TestResultText:
    @pytest.mark.parametrize(
        ("state", "text", "expected"),
        [
            ("completed", "hello", "hello\n"),
            ("completed", "hello\n", "hello\n"),
            ("completed", "", ""),
            ("failed", "boom", "error: boom\n"),
            ("canceled", "CancelTask", "canceled: CancelTask\n"),
        ],
    )
    def test_bodies(self, state: str, text: str, expected: str) -> None:
        """Answers verbatim; failures `error: …`; cancels `canceled: …`."""
        assert result_text(state, text) == expected


class TestWritePrivate:
    def test_atomic_0600(self, tmp_path: Path) -> None:
        """The file is replaced whole with mode 0600 and no temp file is left."""
        p = tmp_path / "f.txt"
        write_private(p, "one")
        write_private(p, "two")
        assert p.read_text() == "two"
        assert os.stat(p).st_mode & 0o777 == 0o600
        assert [x.name for x in tmp_path.iterdir()] == ["f.txt"]


class TestPrivateLogs:
    def test_open_private_append_0600(self, tmp_path: Path) -> None:
        """A log opened for appending is created 0600, and an existing 0644 one is narrowed."""
        fresh, old = tmp_path / "a.log", tmp_path / "b.log"
        old.write_text("x\n")
        os.chmod(old, 0o644)
        for p in (fresh, old):
            os.close(open_private_append(p))
            assert os.stat(p).st_mode & 0o777 == 0o600
        assert old.read_text() == "x\n"

    def test_symlink_refused(self, tmp_path: Path) -> None:
        """A symlink where the log goes is refused, never followed."""
        target = tmp_path / "elsewhere"
        target.write_text("")
        (tmp_path / "l.log").symlink_to(target)
        with pytest.raises(OSError):
            open_private_append(tmp_path / "l.log")

    def test_bootstrap_log_0600(self, tmp_path: Path) -> None:
        """Console lines diverted to bootstrap.log land in a 0600 file."""
        con = Console()
        con.attach_log(tmp_path / "bootstrap.log")
        con._log("a line")
        assert (tmp_path / "bootstrap.log").read_text() == "a line\n"
        assert os.stat(tmp_path / "bootstrap.log").st_mode & 0o777 == 0o600


class TestRecordWriter:
    def test_writes_in_background_and_flushes(self, tmp_path: Path) -> None:
        """Queued writes land by flush; the latest text of a path wins; mode 0600."""
        from murmur.session.records import RecordWriter

        errors: list[tuple[Path, OSError]] = []
        w = RecordWriter(lambda p, e: errors.append((p, e)))
        for i in range(50):
            w.write(tmp_path / "latest.txt", f"v{i}")
            w.write(tmp_path / f"each{i}.txt", f"e{i}")
        assert w.flush(timeout=10)
        assert (tmp_path / "latest.txt").read_text() == "v49"
        assert all((tmp_path / f"each{i}.txt").read_text() == f"e{i}" for i in range(50))
        assert os.stat(tmp_path / "latest.txt").st_mode & 0o777 == 0o600
        w.write(tmp_path / "missing-dir" / "x.txt", "x")
        w.close()
        assert [p.name for p, _ in errors] == ["x.txt"]
