"""Tests of reading process liveness from the host, and start times as records hold them."""

from __future__ import annotations

import os
import subprocess

import pytest

from murmur import procstat
from murmur.formation.launch import procinfo


class TestProcinfo:
    def test_self(self) -> None:
        """This process runs, with a stable start time."""
        me = os.getpid()
        start = procstat.start_time(me)
        assert start is not None
        assert procinfo.is_running(me, start)
        assert procinfo.is_running(me)
        assert not procinfo.is_running(me, start + 1)
        assert not procinfo.is_running(me, procinfo.NO_PROCESS)

    def test_reaped_child(self) -> None:
        """A reaped child is not running; a zombie is not running either."""
        child = subprocess.Popen(["true"])
        child.wait()
        assert not procinfo.is_running(child.pid)
        zombie = subprocess.Popen(["true"])
        try:
            os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)
            assert not procinfo.is_running(zombie.pid)
            assert not procinfo.is_running(zombie.pid, procstat.start_time(zombie.pid))
        finally:
            zombie.wait()

    def test_non_positive(self) -> None:
        """pid 0 and negatives are never running."""
        assert not procinfo.is_running(0) and not procinfo.is_running(-1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None), ("", None), ("123456", 123456), ("0", 0), (42, 42), (0, 0),
        ("soon", procinfo.NO_PROCESS), ("-5", procinfo.NO_PROCESS), ("1.5", procinfo.NO_PROCESS),
        (True, None), (1.5, procinfo.NO_PROCESS),
    ],
)
def test_recorded_start(value: object, expected: int | None) -> None:
    """Decimal text (formation.json) or an int; empty is none; anything else names no process."""
    assert procinfo.recorded_start(value) == expected
