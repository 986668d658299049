"""`kill -KILL` of pytest mid-run leaves no process and no unit (tests/_test_unit.py; issue 32).

A child pytest runs a slice of the suite that starts real formations; at a random moment once
its tests have processes running, it is SIGKILLed. Its janitor must then kill everything in its
unit and remove the unit. The processes are found by containment (the unit's ``cgroup.procs``
before the kill), never by environment.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from murmur.containment.host import CGROUP, detect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SLICE = "tests/e2e/test_second_signal_sweep.py"


def _start(pid: int) -> str | None:
    """``pid``'s start time; None when it is gone or a zombie (dead, not yet reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _procs(unit: Path) -> set[int]:
    found: set[int] = set()
    for d in [unit, *(p for p in unit.rglob("*") if p.is_dir())]:
        try:
            found |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.skipif(detect({}).name != CGROUP, reason="the test session's unit needs the cgroup class")
def test_a_killed_pytest_leaves_nothing(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    marker = tmp_path / "unit"
    env = {**os.environ, "MURMUR_TEST_UNIT_FILE": str(marker)}
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", SLICE],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )
    seen: dict[int, str | None] = {}
    try:
        deadline = time.monotonic() + 90
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        unit = Path(marker.read_text())
        # a random moment at which a test has processes of its own running (a launcher and
        # at least a member, beside pytest itself)
        pause = rng.uniform(0.0, 1.5)
        while time.monotonic() < deadline:
            time.sleep(0.02)
            if len(_procs(unit) - {child.pid}) >= 2:
                if pause <= 0:
                    break
                pause -= 0.02
        seen = {pid: _start(pid) for pid in _procs(unit)}
        assert len(seen) >= 3, f"too little was running to prove anything (seed {seed})"
        child.send_signal(signal.SIGKILL)
        child.wait()
        gone_by = time.monotonic() + 40
        while unit.exists() and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not unit.exists(), f"the unit is still there (seed {seed})"
        alive = [pid for pid, start in seen.items() if start is not None and _start(pid) == start]
        assert alive == [], f"survivors {alive} (seed {seed})"
        print(f"\n[pytest killed] seed {seed}: {len(seen)} processes were in the unit; none left")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
