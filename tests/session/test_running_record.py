"""Tests of running records: write, verify pid + start time, prune."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from murmur import procstat
from murmur.session.running_record import (
    RunningRecord,
    check_alive,
    list_running,
    read_running,
    record_path,
    remove_running,
    write_running,
)


def record(sid: str, pid: int, start: int | None = None, **kw: object) -> RunningRecord:
    st = procstat.start_time(pid) if start is None else start
    return RunningRecord(
        session_id=sid, url="http://127.0.0.1:1", pid=pid, start_time=st or 0, name="n", version="1",
        workdir="/w", records_dir="/r", started_at="2026-01-01T00:00:00.000Z", **kw,  # type: ignore[arg-type]
    )


class TestStartTime:
    def test_self(self) -> None:
        """Our own start time is readable and stable."""
        a = procstat.start_time(os.getpid())
        assert isinstance(a, int) and a == procstat.start_time(os.getpid())

    def test_gone(self) -> None:
        """A reaped process has none."""
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        assert procstat.start_time(p.pid) is None


class TestRecords:
    def test_write_modes_and_remove(self, murmur_home: Path) -> None:
        """Directory 0700, file 0600, None fields left out; remove deletes it."""
        p = write_running(record("ses_a", os.getpid()))
        assert os.stat(p.parent).st_mode & 0o777 == 0o700
        assert os.stat(p).st_mode & 0o777 == 0o600
        data = json.loads(p.read_text())
        assert "door_token" not in data and data["pid"] == os.getpid()
        remove_running("ses_a")
        assert not p.exists()
        remove_running("ses_a")  # idempotent

    def test_live_pruned_unreadable(self, murmur_home: Path) -> None:
        """A live record is listed; a dead or reused pid is pruned; junk is reported, kept."""
        write_running(record("ses_live", os.getpid(), formation_id="frm_x"))
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        write_running(record("ses_dead", p.pid, start=5))
        write_running(record("ses_reused", os.getpid(), start=1))
        junk = record_path("ses_junk")
        junk.write_text("{not json")
        census = list_running()
        assert [r.session_id for r in census.live] == ["ses_live"]
        assert census.live[0].formation_id == "frm_x"
        assert sorted(s for s, _ in census.pruned) == ["ses_dead", "ses_reused"]
        assert "reused" in dict(census.pruned)["ses_reused"]
        aside = junk.parent / "unreadable" / "ses_junk.json"
        assert census.unreadable == ((aside, f"{census.unreadable[0][1].split(';')[0]}; set aside as {aside}"),)
        assert census.unreadable[0][1].startswith("it is malformed (not valid JSON")
        assert not record_path("ses_dead").exists() and not junk.exists()
        assert aside.read_text() == "{not json"  # kept, byte for byte
        again = list_running()  # reported once: the next census no longer sees it
        assert (again.unreadable, [r.session_id for r in again.live]) == ((), ["ses_live"])

    def test_without_prune_junk_stays(self, murmur_home: Path) -> None:
        junk = record_path("ses_junk")
        junk.parent.mkdir(parents=True, exist_ok=True)
        junk.write_text("[]")
        census = list_running(prune=False)
        assert census.unreadable == ((junk, "it is malformed (not a JSON object)"),)
        assert junk.exists()

    @pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
    def test_non_regular_record_is_malformed(self, murmur_home: Path, kind: str) -> None:
        """A FIFO or /dev/zero named like a record is skipped unread (no hang, no huge read)."""
        bad = record_path("ses_odd")
        bad.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(bad)
        else:
            bad.symlink_to("/dev/zero")
        census = list_running(prune=False)
        assert census.live == () and census.unreadable[0][0] == bad
        assert "not a regular file" in census.unreadable[0][1]

    def test_running_dir_not_a_directory(self, murmur_home: Path) -> None:
        d = record_path("ses_x").parent
        d.parent.mkdir(parents=True, exist_ok=True)
        d.write_text("")
        census = list_running()
        assert census.directory_error == "Not a directory"

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("{}", "it is malformed (missing session_id, url, pid, start_time, name, version, "
                   "workdir, records_dir, started_at)"),
            ('{"session_id": "ses_x"}', "it is malformed (missing url, pid, start_time"),
            ("[1]", "it is malformed (not a JSON object)"),
            ("{not json", "it is malformed (not valid JSON: "),
        ],
        ids=["empty-object", "partial", "list", "bad-json"],
    )
    def test_malformed_record_reason(self, murmur_home: Path, text: str, reason: str) -> None:
        """A malformed record's reason says so and names what is missing, not Python internals."""
        bad = record_path("ses_bad")
        bad.parent.mkdir(parents=True, exist_ok=True)
        bad.write_text(text)
        with pytest.raises(ValueError) as info:
            read_running(bad)
        assert str(info.value).startswith(reason)
        assert "__init__" not in str(info.value) and "positional" not in str(info.value)

    def test_check_alive(self) -> None:
        """check_alive names why a record is stale."""
        assert check_alive(record("s", os.getpid())) is None
        assert "reused" in (check_alive(record("s", os.getpid(), start=1)) or "")
