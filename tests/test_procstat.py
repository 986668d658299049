"""What ``/proc/<pid>/stat`` says of a process (``murmur.procstat``), and the janitor's copy of the rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from murmur import procstat
from murmur.containment import janitor
from murmur.procstat import ProcStat, parse_stat

TAIL = "0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0"  # fields 7..21, then field 22

# (a /proc/<pid>/stat line, what parse_stat reads from it)
TABLE = [
    pytest.param(f"7788 (cat) R 7786 7786 2030 {TAIL} 57213 3133440 380",
                 ProcStat("R", 7786, 7786, 2030, 57213), id="plain"),
    pytest.param(f"13 (sp ace) S 1 13 13 {TAIL} 4242 0 0", ProcStat("S", 1, 13, 13, 4242), id="comm with a space"),
    pytest.param(f"14 (a) (b) S 2 14 14 {TAIL} 99 0 0", ProcStat("S", 2, 14, 14, 99), id="comm a) (b"),
    pytest.param(f"12 (a) b (c)) S 1 12 12 {TAIL} 98 0 0", ProcStat("S", 1, 12, 12, 98), id="comm ends in )"),
    pytest.param(f"15 ()) S 1 15 15 {TAIL} 7", ProcStat("S", 1, 15, 15, 7), id="comm is )"),
    pytest.param(f"16 (sh) Z 1 16 16 {TAIL} 555 0 0", ProcStat("Z", 1, 16, 16, 555), id="zombie"),
    pytest.param(f"17 (x) S 0 0 0 {TAIL} 0 0 0", ProcStat("S", 0, 0, 0, 0), id="start time 0"),
    pytest.param("", None, id="empty"),
    pytest.param("1 (x) S 1 2 3", None, id="too short"),
    pytest.param(f"no parens at all S 1 2 3 {TAIL} 5", None, id="no command name"),
    pytest.param(f"18 (x) S 1 2 3 {TAIL} soon 0 0", None, id="start time not a number"),
    pytest.param(f"19 (x) S one 2 3 {TAIL} 5 0 0", None, id="ppid not a number"),
]


@pytest.mark.parametrize(("line", "expected"), TABLE)
def test_parse_stat(line: str, expected: ProcStat | None) -> None:
    """Fields are counted from the last ')', whatever the command name holds; a malformed line is None."""
    assert parse_stat(line) == expected


@pytest.mark.parametrize(("line", "expected"), TABLE)
def test_the_janitor_reads_the_same(line: str, expected: ProcStat | None) -> None:
    """The janitor's own copy (it cannot import the package) agrees; a zombie is not alive to it."""
    alive = expected is not None and expected.state != "Z"
    assert janitor._parse_start(line) == (str(expected.start_time) if alive and expected else None)


def _fake_proc(tmp_path: Path, pid: int, line: str) -> Path:
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "stat").write_text(line)
    return tmp_path


def test_read_from_a_proc_folder(tmp_path: Path) -> None:
    """read_stat/start_time/parent_pid read ``<proc>/<pid>/stat``; a vanished pid is None."""
    proc = _fake_proc(tmp_path, 14, f"14 (a) (b) S 2 14 14 {TAIL} 99 0 0")
    assert procstat.read_stat(14, proc) == ProcStat("S", 2, 14, 14, 99)
    assert procstat.start_time(14, proc) == 99
    assert procstat.parent_pid(14, proc) == 2
    for gone in (15, 0, -1):
        assert procstat.read_stat(gone, proc) is None
        assert procstat.start_time(gone, proc) is None
        assert procstat.parent_pid(gone, proc) is None


def test_this_process() -> None:
    """Our own start time is stable and our parent is the one os reports."""
    me = os.getpid()
    start = procstat.start_time(me)
    assert isinstance(start, int) and start == procstat.start_time(me)
    own = parse_stat(Path(f"/proc/{me}/stat").read_text())
    assert own is not None and own.start_time == start
    assert procstat.parent_pid(me) == os.getppid()
    assert janitor._start_time(me) == str(start)


def test_a_real_zombie_and_a_reaped_child() -> None:
    """A zombie keeps its start time (state ``Z``); the janitor counts it gone; a reaped pid is None."""
    child = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
        stat = procstat.read_stat(child.pid)
        assert stat is not None and stat.state == "Z" and stat.start_time > 0
        assert procstat.start_time(child.pid) == stat.start_time
        assert janitor._start_time(child.pid) is None
    finally:
        child.wait()
    assert procstat.read_stat(child.pid) is None
    assert procstat.start_time(child.pid) is None
    assert janitor._start_time(child.pid) is None
