"""A second SIGTERM anywhere in a formation's wind-down exits 143 (spec/session.md; issue 32).

The launcher's status used to be lost when the second signal landed after its signal
receiver had closed: once ``trio.run`` had returned, the interpreter's finalization restored
the default action and the signal killed the launcher (status -15). This sweeps the second
signal's delay across the whole wind-down of a real two-member formation.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MUR = str(Path(sys.executable).with_name("mur"))
DELAYS = (0.0, 0.03, 0.08, 0.12, 0.16, 0.2, 0.25, 0.35, 0.5, 0.7)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "MURMUR_HOME": str(root / "home")}
    env.pop("MURMUR_FORMATION_ID", None)
    for argv in (["new", "--roster", "team"], ["install", "-g", "team/lead"], ["install", "-g", "team/worker"]):
        subprocess.run([MUR, *argv], cwd=root, env=env, check=True, capture_output=True, timeout=60)
    return root, env


@pytest.mark.parametrize("delay", DELAYS)
def test_the_second_sigterm_exits_143(team: tuple[Path, dict[str, str]], delay: float) -> None:
    root, env = team
    proc = subprocess.Popen([MUR, "run", "--roster", "team", "--json"], cwd=root, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]  # the formation line, then the entry's
        assert all(line.startswith(b"{") for line in lines), lines
        proc.send_signal(signal.SIGTERM)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
