"""Tests of the demo's watchdog, as the real process it is in production."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.slow


def _group(script: str) -> subprocess.Popen[bytes]:
    """A shell script leading a process group of its own."""
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


@contextlib.contextmanager
def watchdog(grace: float) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The watchdog with the write end of its pipe (the demo's side)."""
    read_fd, write_fd = os.pipe()
    code = f"import sys; from murmur.demo.watchdog import watchdog_main; sys.exit(watchdog_main({read_fd}, {grace}))"
    proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(read_fd,), start_new_session=True)
    os.close(read_fd)
    try:
        yield proc, write_fd
    finally:
        with contextlib.suppress(OSError):
            os.close(write_fd)
        proc.kill()
        proc.wait()


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
