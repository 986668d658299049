"""The kill scenarios: however a formation's launcher or entry member dies, no member survives.

Real processes, real pipes, real signals (members are ``fake_mur.py``, which winds down on
lifeline EOF as a member must). Each test asserts on the process table and prints the time
from the kill to the moment nothing of the formation was left (the promise is 30 s; the aim
is under 2 s).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from ._formation import Spec, alive, launched, make_project, wait_for

pytestmark = pytest.mark.e2e

FOUR = [
    Spec("lead", entry=True),
    Spec("p1"),
    Spec("p2"),
    Spec("p3"),
]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return make_project(tmp_path, FOUR)


def _report(what: str, seconds: float) -> None:
    print(f"\n[kill suite] {what}: nothing left after {seconds:.2f}s")


class TestKillLauncher:
    def test_kill_launcher(self, proj: Path, tmp_path: Path) -> None:
        """kill -KILL of the launcher: every member reads lifeline EOF and is gone."""
        with launched(proj, tmp_path, {"p1": {"grandchild": True}}, ["--json"]) as run:
            run.wait_ready(["lead", "p1", "p2", "p3"])
            pids = run.all_pids()
            assert len(pids) == 5  # four members and p1's grandchild
            t0 = time.monotonic()
            os.kill(run.proc.pid, signal.SIGKILL)
            run.wait(10)
            took = run.time_to_nothing_left(30.0)
            members_gone = wait_for(lambda: not any(alive(p) for p in run.member_pids().values()), 30)
            _report("kill -KILL launcher", time.monotonic() - t0)
            assert members_gone <= took + 0.1
            for m in ("lead", "p1", "p2", "p3"):
                assert run.events(m, "lifeline_eof"), m

    def test_kill_entry(self, proj: Path, tmp_path: Path) -> None:
        """kill -KILL of the entry member: the launcher closes every peer's lifeline, exits 137."""
        with launched(proj, tmp_path, {}, ["--json"]) as run:
            run.wait_ready(["lead", "p1", "p2", "p3"])
            t0 = time.monotonic()
            os.kill(run.member_pids()["lead"], signal.SIGKILL)
            assert run.wait(30) == 137
            took = run.time_to_nothing_left(30.0)
            _report("kill -KILL entry member", time.monotonic() - t0)
            assert took < 30
            for m in ("p1", "p2", "p3"):
                assert run.events(m, "lifeline_eof"), m

    def test_kill_launcher_group(self, proj: Path, tmp_path: Path) -> None:
        """kill -KILL of the launcher's whole group takes the entry; peers wind down on EOF."""
        with launched(proj, tmp_path, {}, ["--json"]) as run:
            run.wait_ready(["lead", "p1", "p2", "p3"])
            lead = run.member_pids()["lead"]
            assert os.getpgid(lead) == run.proc.pid  # the entry shares the launcher's group
            assert all(os.getpgid(run.member_pids()[p]) == run.member_pids()[p] for p in ("p1", "p2", "p3"))
            t0 = time.monotonic()
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.wait(10)
            run.time_to_nothing_left(30.0)
            _report("kill -KILL launcher's process group", time.monotonic() - t0)
            assert not run.events("lead", "lifeline_eof")  # killed with the group
            for m in ("p1", "p2", "p3"):
                assert run.events(m, "lifeline_eof"), m

    @pytest.mark.parametrize("delay", [0.25, 0.32, 0.4, 0.5, 0.8, 1.2])
    def test_kill_launcher_during_startup(self, proj: Path, tmp_path: Path, delay: float) -> None:
        """kill -KILL of the launcher at moments during peer start-up leaves no survivor."""
        plan = {p: {"delay": 0.4} for p in ("p1", "p2", "p3")}
        with launched(proj, tmp_path, plan, ["--json"]) as run:
            time.sleep(delay)
            started = len(run.all_pids())
            ready = len(run.events(event="ready"))
            t0 = time.monotonic()
            os.kill(run.proc.pid, signal.SIGKILL)
            run.wait(10)
            run.time_to_nothing_left(30.0)
            _report(f"kill -KILL launcher at {delay}s ({started} started, {ready} ready)",
                    time.monotonic() - t0)
            lead = run.events("lead", "start")
            if lead:  # the entry member started only after every peer was ready
                peers_ready = [run.events(p, "ready") for p in ("p1", "p2", "p3")]
                assert all(r and r[0]["t"] < lead[0]["t"] for r in peers_ready)


class TestSignals:
    def test_sigterm_twice(self, proj: Path, tmp_path: Path) -> None:
        """A second SIGTERM exits at once (143) and SIGKILLs members still winding down."""
        with launched(proj, tmp_path, {"p2": {"on_lifeline": "ignore"}}, ["--json"]) as run:
            run.wait_ready(["lead", "p1", "p2", "p3"])
            os.kill(run.proc.pid, signal.SIGTERM)
            wait_for(lambda: bool(run.events("p1", "exit")), 10)
            p2 = run.member_pids()["p2"]
            assert alive(p2)  # ignores its lifeline: the launcher would wait 25 s for it
            t0 = time.monotonic()
            os.kill(run.proc.pid, signal.SIGTERM)
            assert run.wait(10) == 143
            exited = time.monotonic() - t0
            run.time_to_nothing_left(5.0)
            print(f"\n[kill suite] second SIGTERM: launcher exited after {exited:.2f}s")
            assert exited < 5.0


@pytest.mark.slow
class TestStubbornMembers:
    def test_hang_and_ignore(self, proj: Path, tmp_path: Path) -> None:
        """A member that exits 143 at 20 s is left to do so; one that ignores its lifeline is
        SIGKILLed (with its group) 25 s after the launcher closed it, then reaped."""
        plan = {
            "lead": {"task_seconds": 0.2},
            "p1": {"on_lifeline": "hang", "hang_after": 20.0},
            "p2": {"on_lifeline": "ignore", "grandchild": True},
        }
        with launched(proj, tmp_path, plan, ["--task", "x"]) as run:
            assert run.wait(60) == 0
            closed = run.events("p3", "lifeline_eof")[0]["t"]  # the moment lifelines closed
            ended = time.time()
            p1_exit = run.events("p1", "exit")[0]
            assert p1_exit["code"] == 143
            assert 19.0 <= p1_exit["t"] - closed <= 22.0
            assert not run.events("p2", "exit")  # it never exited by itself
            # the launcher closed the lifelines at most as late as p3 saw EOF, and its exit
            # comes after the SIGKILL, 25 s later (plus its own teardown; slack for load)
            assert 24.5 <= ended - closed <= 29.0
            assert run.survivors() == []  # p2 and its grandchild were killed and reaped
            print(f"\n[kill suite] stubborn member killed {ended - closed:.2f}s after lifeline close")
