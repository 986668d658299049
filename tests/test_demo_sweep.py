"""Tests of the demo's process-tree sweep (the pure linking, and real trees of processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from murmur import procstat
from murmur.demo import sweep
from murmur.demo.sweep import ProcInfo, linked


def _row(ppid: int, pgid: int, sid: int, state: str = "S") -> ProcInfo:
    return ProcInfo(ppid=ppid, pgid=pgid, sid=sid, state=state)


class TestLinked:
    def test_children_groups_and_sessions_are_followed(self) -> None:
        """A child, a member of the group and a member of the session of a found process are found."""
        table = {
            10: _row(1, 10, 10),
            11: _row(10, 11, 11),   # child in a session of its own (a formation member)
            12: _row(11, 12, 12),   # its child (a plan step's shell)
            13: _row(1, 10, 10),    # reparented, still in 10's group
            14: _row(1, 14, 11),    # reparented, still in 11's session
            20: _row(1, 20, 20),    # unrelated
        }
        assert linked({10}, table) == {10, 11, 12, 13, 14}

    def test_zombies_and_excluded_pids_are_left_out(self) -> None:
        """Zombies and excluded pids are not returned and link nothing further."""
        table = {10: _row(1, 10, 10), 11: _row(10, 11, 11, "Z"), 12: _row(10, 12, 12), 13: _row(12, 13, 13)}
        assert linked({10}, table, exclude={12}) == {10}

    def test_a_gone_seed_still_links_its_group(self) -> None:
        """A seed no longer in the table is not returned, but its group's members are."""
        table = {11: _row(1, 10, 10), 12: _row(1, 12, 12)}
        assert linked({10}, table) == {11}

    def test_pid_one_is_never_a_seed(self) -> None:
        """init is never a seed (everything would link to it)."""
        assert linked({1}, {1: _row(0, 1, 1), 5: _row(1, 5, 5)}) == set()


def _read_pid(path: Path, within: float = 10.0) -> int:
    """The pid a script wrote to ``path`` (it writes it first thing), waiting up to ``within`` s."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():  # `echo $$` writes it in one write
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path} within {within}s")


def _spawn(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


def _dead(pid: int) -> bool:
    info = sweep.proc_info(pid)
    return info is None or info.state == "Z"


@pytest.mark.slow
class TestKillTree:
    def test_kills_grandchildren_in_sessions_of_their_own(self, tmp_path: Path) -> None:
        """A grandchild that called setsid (and ignores SIGTERM) dies with the tree."""
        pidfile = tmp_path / "g.pid"
        top = _spawn(f"setsid sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 60' & sleep 60")
        try:
            grandchild = _read_pid(pidfile)
            killed = sweep.kill_tree({top.pid})
            assert {top.pid, grandchild} <= killed
            assert all(_dead(pid) for pid in killed)
            assert top.wait(timeout=5) == -signal.SIGKILL
        finally:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(top.pid, signal.SIGKILL)
            top.wait()


    def test_what_a_scan_found_is_killed_even_past_the_bound(self) -> None:
        """A bound that has already run out (as a slow scan of a busy machine can use it up)
        still stops and kills what the scan found, instead of returning with nothing done."""
        top = _spawn("exec sleep 60")  # one process: a forking `sh` could fork after the one scan
        try:
            killed = sweep.kill_tree({top.pid}, bound=0.0)
            assert top.pid in killed
            assert top.wait(timeout=10) == -signal.SIGKILL
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(top.pid, signal.SIGKILL)  # its group: whatever it started too
            top.wait(timeout=10)
    def test_a_forking_loop_is_frozen_and_killed_whole(self) -> None:
        """A process forking without pause leaves no child behind: the tree is frozen first."""
        top = _spawn("while :; do setsid sleep 60 & done")
        try:
            time.sleep(0.2)  # let it fork a few (how many does not matter)
            killed = sweep.kill_tree({top.pid})
            assert top.pid in killed and len(killed) > 1
            table = sweep.process_table()
            assert [p for p, info in table.items() if info.ppid == top.pid and info.state != "Z"] == []
            assert all(_dead(pid) for pid in killed)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(top.pid, signal.SIGKILL)
            top.wait()

    def test_excluded_pids_survive(self) -> None:
        """An excluded child is never signalled."""
        top = _spawn("sleep 60 & echo $! > /dev/null; wait")
        keep = subprocess.Popen(["sleep", "60"], start_new_session=True)
        try:
            killed = sweep.kill_tree({top.pid, keep.pid}, exclude={keep.pid})
            assert keep.pid not in killed and keep.poll() is None
        finally:
            for p in (top, keep):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()


class TestSessionPids:
    def test_only_records_whose_process_still_runs_count(self, tmp_path: Path) -> None:
        """A record counts only when its pid has the recorded start time."""
        running = tmp_path / "running"
        running.mkdir()
        me = os.getpid()
        started = procstat.start_time(me)
        assert started is not None
        (running / "ses_a.json").write_text(json.dumps({"pid": me, "start_time": started}))
        (running / "ses_b.json").write_text(json.dumps({"pid": me, "start_time": started + 1}))
        (running / "ses_c.json").write_text("{not json")
        (running / "ses_d.json").write_text(json.dumps({"pid": "1", "start_time": 0}))
        assert sweep.session_pids(tmp_path) == {me}

    def test_no_running_directory(self, tmp_path: Path) -> None:
        """A home without running records names nothing."""
        assert sweep.session_pids(tmp_path / "absent") == set()


class TestUnitsRemoved:
    def test_a_killed_trees_units_are_removed(self) -> None:
        """kill_tree removes the murmur-* units the tree lived in (here no janitor is there to)."""
        from murmur.containment import cgroup
        from murmur.containment.host import CGROUP, detect

        host = detect(probe=True)
        if host.name != CGROUP or host.base is None:
            pytest.skip(f"needs the cgroup class ({host.why})")
        unit = cgroup.make_unit(host.base / f"murmur-test-sweep-{os.getpid()}")
        inner = cgroup.make_unit(unit / "cmd-1")
        proc = subprocess.Popen([*cgroup.join_prefix(inner), "/bin/sh", "-c", "sleep 300 & wait"],
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 5
            while len(cgroup.procs(inner)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # the sleep has forked: /proc offers no event for it
            assert len(cgroup.procs(inner)) == 2
            killed = sweep.kill_tree([proc.pid])
            assert proc.pid in killed
            assert proc.wait(timeout=5) == -signal.SIGKILL
            assert not unit.exists()
        finally:
            cgroup.kill(unit)
            proc.wait(timeout=5)
            deadline = time.monotonic() + 5
            while not cgroup.remove(unit) and time.monotonic() < deadline:
                time.sleep(0.01)

    def test_a_unit_nobody_is_in_yet_is_removed_by_the_spared_janitor(self) -> None:
        """A root that has made a unit and started nothing in it yet (a formation's ``starter-1``
        before its starter is moved in): no killed process is in it, so only the root's janitor
        knows it. kill_tree spares the janitor, which then removes the unit and its session unit
        (issue 32 item 1: killed with the tree, it left ``murmur-frm_…`` and ``starter-1``)."""
        import select
        import sys

        from murmur.containment.host import CGROUP, UNIT_ENV, detect

        host = detect(probe=True)
        if host.name != CGROUP:
            pytest.skip(f"needs the cgroup class ({host.why})")
        script = ("import json, secrets, time\n"
                  "from murmur import containment, procs\n"
                  "c = containment.here('frm_sweep' + secrets.token_hex(4))\n"
                  "unit = procs.new_unit('starter')\n"
                  "print(json.dumps({'janitor': c.janitor_pid, 'unit': str(unit.path)}), flush=True)\n"
                  "time.sleep(300)\n")
        env = {k: v for k, v in os.environ.items() if k != UNIT_ENV}
        root = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env,
                                start_new_session=True)
        unit: Path | None = None
        try:
            assert root.stdout is not None
            made = json.loads(root.stdout.readline())
            unit = Path(made["unit"])
            assert unit.is_dir() and unit.parent.name.startswith("murmur-frm_sweep")
            janitor = os.pidfd_open(made["janitor"])
            try:
                killed = sweep.kill_tree([root.pid])
                assert root.pid in killed and made["janitor"] not in killed
                poller = select.poll()
                poller.register(janitor, select.POLLIN)
                assert poller.poll(40_000), "the janitor did not exit"  # a hang guard: its bound is 25 s + 5 s
            finally:
                os.close(janitor)
            assert root.wait(timeout=10) == -signal.SIGKILL
            assert not unit.exists() and not unit.parent.exists()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(root.pid, signal.SIGKILL)
            root.wait(timeout=10)
            if root.stdout is not None:
                root.stdout.close()
            if unit is not None:
                from murmur.containment import cgroup

                cgroup.remove(unit.parent)
