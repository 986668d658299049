"""Fixtures for the containment tests: scratch cgroup units and processes the test owns.

Every cgroup directory and every process a test here creates is recorded by a fixture and
removed/killed in its teardown, whether the test passed or not. Processes are recorded with
their ``/proc`` start time, so a teardown never signals a pid that was reused by someone else.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from murmur.containment import cgroup
from murmur.containment.host import CGROUP, detect

HOST = detect({})
"""The class this host gives the test process (``MURMUR_CONTAINMENT`` not consulted)."""

cgroup_only = pytest.mark.skipif(
    HOST.name != CGROUP, reason=f"this host gives the process-group class ({HOST.why})"
)


SETSID_ESCAPEE = "setsid /bin/sh -c 'echo $$; exec /bin/sleep 300 >/dev/null 2>&1' </dev/null &"
"""Shell text: a ``setsid`` escapee that prints its pid only once it is in a session of its own."""


def start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (clock ticks since boot), None when gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rpartition(")")[2].split()
    except OSError:
        return None
    if not fields or fields[0] == "Z" or len(fields) < 20:
        return None
    return fields[19]


def alive(pid: int, start: str | None) -> bool:
    """Whether the process that had ``start`` at ``pid`` still runs (a zombie is not running)."""
    now = start_time(pid)
    return now is not None and now == start


def present(path: Path | str) -> bool:
    """Whether ``path`` exists (a sync helper: a stat of a cgroup or /proc file never blocks)."""
    return Path(path).exists()


class Owned:
    """Processes a test started (directly or as descendants it was told about)."""

    def __init__(self) -> None:
        self.procs: list[tuple[int, str | None]] = []

    def add(self, pid: int) -> int:
        """Record ``pid`` (now, with its start time); returns it."""
        self.procs.append((pid, start_time(pid)))
        return pid

    def kill_all(self) -> None:
        """SIGKILL every recorded process that is still the one recorded."""
        for pid, start in self.procs:
            if start is not None and alive(pid, start):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


@pytest.fixture
def owned() -> Iterator[Owned]:
    """Processes the test records are SIGKILLed at teardown (only those, only if unchanged)."""
    o = Owned()
    try:
        yield o
    finally:
        o.kill_all()


def drop_unit(path: Path) -> None:
    """Kill everything in ``path``, wait (at most 5 s) for it to empty, remove it."""
    if not path.exists():
        return
    cgroup.kill(path)
    deadline = time.monotonic() + 5.0
    while not cgroup.remove(path) and time.monotonic() < deadline:
        time.sleep(0.005)  # teardown: rmdir succeeds once the killed processes have exited


@pytest.fixture
def units() -> Iterator[list[Path]]:
    """Cgroup directories the test makes or learns of; each is killed and removed at teardown."""
    made: list[Path] = []
    try:
        yield made
    finally:
        for path in reversed(made):
            drop_unit(path)


@pytest.fixture
def scratch(units: list[Path]) -> Path:
    """A fresh empty cgroup unit beneath the test process's own cgroup (cgroup class only)."""
    if HOST.name != CGROUP or HOST.base is None:
        pytest.skip(f"this host gives the process-group class ({HOST.why})")
    path = HOST.base / f"murmur-test-{os.getpid()}-{secrets.token_hex(4)}"
    units.append(path)
    cgroup.make_unit(path)
    return path


def label() -> str:
    """A session label no parallel test or engineer uses."""
    return f"test-{os.getpid()}-{secrets.token_hex(4)}"
