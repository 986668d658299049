"""Tests of the demo's watchdog, as the real process it is in production."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from murmur.demo import sweep

pytestmark = pytest.mark.slow


def _group(script: str) -> subprocess.Popen[bytes]:
    """A shell script leading a process group of its own."""
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


@contextlib.contextmanager
def watchdog(grace: float, home: str | None = None,
             remove: str | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The watchdog with the write end of its pipe (the demo's side)."""
    read_fd, write_fd = os.pipe()
    code = ("import sys; from murmur.demo.watchdog import watchdog_main; "
            f"sys.exit(watchdog_main({read_fd}, {grace}, {home!r}, {remove!r}))")
    proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(read_fd,), start_new_session=True)
    os.close(read_fd)
    try:
        yield proc, write_fd
    finally:
        with contextlib.suppress(OSError):
            os.close(write_fd)
        proc.kill()
        proc.wait()


def _read_pid(path: Path, within: float = 10.0) -> int:
    """The pid a script wrote to ``path`` (it writes it first thing), waiting up to ``within`` s."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():  # `echo $$` writes it in one write
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path} within {within}s")


def _gone(proc: subprocess.Popen[bytes], within: float) -> bool:
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        return False
    return True


def _cleanup(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


class TestWatchdog:
    def test_eof_stops_every_group_it_was_told_about(self) -> None:
        """The demo dies (EOF): each remembered group gets SIGTERM and ends."""
        a, b = _group("sleep 60"), _group("sleep 60 & wait")
        try:
            with watchdog(grace=30.0) as (wd, w):
                os.write(w, f"+{a.pid}\n+{b.pid}\n".encode())
                os.close(w)
                # (reaped here: in production the groups' leaders were the demo's children and
                # are reaped by init once the demo is gone)
                assert _gone(a, 10) and a.returncode == -signal.SIGTERM
                assert _gone(b, 10)
                assert _gone(wd, 10) and wd.returncode == 0
        finally:
            _cleanup(a, b)

    def test_a_group_ignoring_sigterm_is_killed_after_the_grace(self) -> None:
        """What survives SIGTERM for the grace period is SIGKILLed."""
        stubborn = _group("trap '' TERM; while :; do sleep 0.05; done")
        try:
            with watchdog(grace=0.5) as (wd, w):
                os.write(w, f"+{stubborn.pid}\n".encode())
                t0 = time.monotonic()
                os.close(w)
                assert _gone(stubborn, 10) and stubborn.returncode == -signal.SIGKILL
                assert time.monotonic() - t0 >= 0.5
                assert _gone(wd, 5)
        finally:
            _cleanup(stubborn)

    def test_done_leaves_everything_alone(self) -> None:
        """`done` (the demo ended in order) makes the watchdog exit without a signal."""
        a = _group("sleep 60")
        try:
            with watchdog(grace=0.1) as (wd, w):
                os.write(w, f"+{a.pid}\ndone\n".encode())
                assert _gone(wd, 10) and wd.returncode == 0
                os.close(w)
                assert not _gone(a, 0.3)
        finally:
            _cleanup(a)

    def test_forgotten_group_is_not_signalled(self) -> None:
        """`-<pgid>` (the demo reaped it) removes the group from the list."""
        a, b = _group("sleep 60"), _group("sleep 60")
        try:
            with watchdog(grace=0.1) as (wd, w):
                os.write(w, f"+{a.pid}\n+{b.pid}\n-{a.pid}\nnoise\n".encode())
                os.close(w)
                assert _gone(b, 10) and _gone(wd, 10)
                assert not _gone(a, 0.3)
        finally:
            _cleanup(a, b)

    def test_eof_kills_grandchildren_in_groups_of_their_own_then_removes_the_directory(
            self, tmp_path: Path) -> None:
        """After EOF the watchdog ends what the groups started in new sessions, then deletes the dir."""
        base = tmp_path / "mur-demo-x"
        (base / "home").mkdir(parents=True)
        pidfile = tmp_path / "grandchild.pid"
        # Like the formation launcher: it survives SIGTERM long enough for its member (a new
        # session that ignores SIGTERM) to be orphaned, and the member keeps writing to the dir.
        leader = _group(f"setsid sh -c 'trap \"\" TERM; echo $$ > {pidfile}; "
                        f"while :; do mkdir -p {base}/again; sleep 0.05; done' & wait")
        try:
            grandchild = _read_pid(pidfile)
            with watchdog(grace=0.5, home=str(base / "home"), remove=str(base)) as (wd, w):
                os.write(w, f"+{leader.pid}\n".encode())
                os.close(w)
                assert _gone(leader, 10)
                assert _gone(wd, 10) and wd.returncode == 0
                assert sweep.proc_info(grandchild) is None or sweep.proc_info(grandchild).state == "Z"  # type: ignore[union-attr]
                assert not base.exists()
        finally:
            _cleanup(leader)
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)

    def test_done_keeps_the_directory(self, tmp_path: Path) -> None:
        """`done` (the demo removes its own directory) leaves the directory alone."""
        base = tmp_path / "mur-demo-y"
        base.mkdir()
        with watchdog(grace=0.1, home=str(base / "home"), remove=str(base)) as (wd, w):
            os.write(w, b"done\n")
            assert _gone(wd, 10) and wd.returncode == 0
        assert base.is_dir()

    def test_eof_without_remove_keeps_the_directory(self, tmp_path: Path) -> None:
        """A --home/--keep demo (no `remove`) keeps its directory after the demo dies."""
        base = tmp_path / "kept"
        base.mkdir()
        with watchdog(grace=0.1, home=str(base / "home")) as (wd, w):
            os.close(w)
            assert _gone(wd, 10) and wd.returncode == 0
        assert base.is_dir()
