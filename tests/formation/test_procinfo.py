"""Tests of reading process liveness and start times from the host."""

from __future__ import annotations

import os
import subprocess

from murmur.formation import procinfo


class TestProcinfo:
    def test_self(self) -> None:
        """This process runs, with a stable start time and its parent."""
        me = os.getpid()
        start = procinfo.start_time(me)
        assert start is not None and start.isdigit()
        assert procinfo.is_running(me, start)
        assert not procinfo.is_running(me, str(int(start) + 1))
        assert procinfo.parent_pid(me) == os.getppid()

    def test_reaped_child(self) -> None:
        """A reaped child is not running; a zombie is not running either."""
        child = subprocess.Popen(["true"])
        child.wait()
        assert not procinfo.is_running(child.pid)
        assert procinfo.start_time(child.pid) is None
        zombie = subprocess.Popen(["true"])
        try:
            os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)
            assert not procinfo.is_running(zombie.pid)
        finally:
            zombie.wait()

    def test_non_positive(self) -> None:
        """pid 0 and negatives are never running."""
        assert not procinfo.is_running(0) and not procinfo.is_running(-1)
