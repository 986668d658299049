"""A slice of the suite that is not killed leaves no process and no empty ``murmur-*`` unit (issue 32).

A child pytest runs the tests that were seen leaving something at the end of a run, and its
test unit (tests/_test_unit.py) must report nothing left:

* ``test_demo_sweep`` — ``sh -c "sleep 60"`` forked its ``sleep`` after the one scan of a
  bound-0 sweep, and only ``sh`` was killed: a ``sleep 60`` outlived the test;
* the census rig's SIGKILL of a session's recorded tree, and the real formations' SIGKILL of
  what is left of a launch — both held the launcher's janitor, so nobody removed the units
  (``murmur-ses_…/starter-1``, ``murmur-frm_…/lead-2``);
* the last test of a run, whose SIGKILLed session's janitor was still removing its units when
  pytest reported: pytest now waits for the janitors (``_test_unit.wait_for_janitors``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from murmur.containment.host import CGROUP, detect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SLICE = [
    "tests/test_demo_sweep.py::TestKillTree",
    "tests/e2e/test_roost_census.py::TestSigkill::test_killed_child_gives_its_parents_slot_back",
    "tests/e2e/test_formation_real.py::TestRealMembers::test_members_show_exactly_their_environment",
    "tests/e2e/test_tree.py::test_narrowed_spawn_set_refuses_before_roost",
]


@pytest.mark.skipif(detect({}).name != CGROUP, reason="the test session's unit needs the cgroup class")
def test_a_slice_that_ends_leaves_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "unit"
    env = {**os.environ, "MURMUR_TEST_UNIT_FILE": str(marker)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SLICE],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "murmur test unit: the tests left" not in done.stderr, done.stderr[-3000:]
    assert marker.exists() and not Path(marker.read_text()).exists()  # the unit itself is gone
