"""Tests of `mur stop`: a formation through its launcher, a session by its address."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from murmur import ids, procstat
from murmur.errors import DiagnosticError
from murmur.formation.launch import dirs, stop
from murmur.session.running_record import RunningRecord, write_running

# A stand-in launcher: exits 143 on SIGTERM (killing its child first), or ignores it.
LAUNCHER = r"""
import os, signal, subprocess, sys, time
mode = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) if mode == "child" else None
member = child.pid if child else 0
if mode == "starter":  # a warm starter between the launcher and its member
    child = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True)
    member = int(child.stdout.readline())
def term(*_):
    if mode == "ignore":
        return
    if member:
        try: os.kill(member, 9)
        except OSError: pass
    if child is not None:
        child.kill(); child.wait()
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
print(member, flush=True)
time.sleep(60)
"""
STARTER = (
    "import setproctitle, subprocess, sys, time; setproctitle.setproctitle('mur starter (launcher)'); "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); print(c.pid, flush=True); "
    "time.sleep(60)"
)
LAUNCHER = f"STARTER = {STARTER!r}\n" + LAUNCHER


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def _launcher(procs: list[subprocess.Popen[str]], mode: str, *extra: str) -> tuple[subprocess.Popen[str], int]:
    p = subprocess.Popen([sys.executable, "-c", LAUNCHER, mode, *extra], stdout=subprocess.PIPE, text=True)
    procs.append(p)
    assert p.stdout is not None
    child = int(p.stdout.readline())
    return p, child


def _marker(frm: str, pid: int, start: int | None) -> None:
    d = dirs.formations_root() / "proj" / frm
    d.mkdir(parents=True)
    (d / "formation.json").write_text(dirs.Marker("/proj", pid, "" if start is None else str(start)).to_json())


def _record(pid: int, *, formation: str | None = None) -> RunningRecord:
    rec = RunningRecord(
        session_id=ids.new_id("ses"), url="http://127.0.0.1:1", pid=pid,
        start_time=procstat.start_time(pid) or 0, name="cap", version="0.1.0",
        workdir="/w", records_dir="/r", started_at="2026-01-01T00:00:00Z", formation_id=formation,
    )
    write_running(rec)
    return rec


class TestStopFormation:
    def test_sigterm_to_launcher(self, procs: list[subprocess.Popen[str]]) -> None:
        """The launcher named by formation.json (pid + start time) gets SIGTERM and ends."""
        p, _ = _launcher(procs, "plain")
        frm = ids.new_id("frm")
        _marker(frm, p.pid, procstat.start_time(p.pid))
        report = stop.stop_named(frm)
        assert report.lines == (f"stopped: {frm}", f"launcher: pid {p.pid}", "signal: SIGTERM")
        assert p.wait(5) == 143

    def test_stubborn_launcher_killed(self, procs: list[subprocess.Popen[str]]) -> None:
        """A launcher still running after the timeout is SIGKILLed."""
        p, _ = _launcher(procs, "ignore")
        frm = ids.new_id("frm")
        _marker(frm, p.pid, procstat.start_time(p.pid))
        report = stop.stop_named(frm, timeout=0.3)
        assert "signal: SIGKILL" in report.lines
        assert p.wait(5) == -9

    def test_reused_pid_is_not_the_launcher(self, procs: list[subprocess.Popen[str]]) -> None:
        """A marker whose start time does not match names nothing running: E-RUN-022."""
        p, _ = _launcher(procs, "plain")
        frm = ids.new_id("frm")
        _marker(frm, p.pid, "1")
        with pytest.raises(DiagnosticError) as exc:
            stop.stop_named(frm)
        assert exc.value.code == "E-RUN-022"
        assert p.poll() is None  # nothing was signalled

    def test_unknown(self) -> None:
        """An id naming nothing is E-RUN-022."""
        with pytest.raises(DiagnosticError) as exc:
            stop.stop_named(ids.new_id("frm"))
        assert exc.value.code == "E-RUN-022"

    def test_no_marker_launcher_found_through_entry(
        self, procs: list[subprocess.Popen[str]]
    ) -> None:
        """Without a marker (no peers), the entry's record leads to its `run --roster` parent."""
        p, child = _launcher(procs, "child", "run", "--roster", "x")
        frm = ids.new_id("frm")
        _record(child, formation=frm)
        report = stop.stop_named(frm)
        assert report.lines[1] == f"launcher: pid {p.pid}"
        assert p.wait(5) == 143

    def test_no_marker_launcher_found_through_its_starter(
        self, procs: list[subprocess.Popen[str]]
    ) -> None:
        """An entry forked by the warm starter: its grandparent is the `run --roster`."""
        p, member = _launcher(procs, "starter", "run", "--roster", "x")
        frm = ids.new_id("frm")
        _record(member, formation=frm)
        report = stop.stop_named(frm)
        assert report.lines[1] == f"launcher: pid {p.pid}"
        assert p.wait(5) == 143

    def test_hand_started_member_stopped_as_session(
        self, procs: list[subprocess.Popen[str]]
    ) -> None:
        """A member no launcher owns is stopped as one session."""
        p, _ = _launcher(procs, "plain")
        frm = ids.new_id("frm")
        rec = _record(p.pid, formation=frm)
        report = stop.stop_named(frm)
        assert report.lines == (f"stopped: {frm}", f"session: {rec.session_id} (SIGTERM)")
        assert p.wait(5) == 143


class TestStopSession:
    def test_by_suffix_and_ordinal(self, procs: list[subprocess.Popen[str]]) -> None:
        """A session is named by a 4+ character suffix or @N and ended with SIGTERM."""
        p, _ = _launcher(procs, "plain")
        rec = _record(p.pid)
        assert stop.resolve_session("@1").session_id == rec.session_id
        report = stop.stop_named(rec.session_id[-6:].upper())
        assert report.lines == (f"stopped: {rec.session_id}", "capsule: cap 0.1.0", "signal: SIGTERM")
        assert p.wait(5) == 143

    @pytest.mark.parametrize("name", ["abc", "@0", "@9", "ses_" + "f" * 32])
    def test_nothing(self, name: str) -> None:
        """Too short, out of range or unknown: E-RUN-022."""
        with pytest.raises(DiagnosticError) as exc:
            stop.stop_named(name)
        assert exc.value.code == "E-RUN-022"


class TestCli:
    def test_mur_stop_unknown(self, tmp_path: Path) -> None:
        """`mur stop frm_…` for nothing running exits 1 with E-RUN-022."""
        from murmur.cli.mur import main

        assert main(["stop", ids.new_id("frm")]) == 1
