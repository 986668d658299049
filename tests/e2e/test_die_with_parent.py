"""`--die-with-parent`: a `mur run` or `mur-roost` whose starter is SIGKILLed winds down (issue 32).

A Python parent starts the process and is SIGKILLed. With the flag the process ends on its own
(a session winds down as on SIGTERM; mur-roost stops); without it (the negative control) it
runs on. Processes are named by the pid and start time the parent reported, never by
environment.
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
BIN = Path(sys.executable).parent
PARENT = (
    "import subprocess, sys, time\n"
    "out = open(sys.argv[1], 'wb')\n"
    "p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,"
    " start_new_session=True)\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _start(pid: int) -> str | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _launch(tmp: Path, argv: list[str], ready: str) -> tuple[subprocess.Popen[bytes], int, str]:
    out = tmp / "out"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(out), *argv], stdout=subprocess.PIPE,
                              cwd=tmp, env=os.environ.copy())
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    start = _start(pid)
    assert start is not None
    deadline = time.monotonic() + 60
    while ready not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready in out.read_text(), "the process never came up"
    return parent, pid, start


def _ends_within(pid: int, start: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _start(pid) != start:
            return True
        time.sleep(0.05)
    return False


def _session(tmp: Path) -> list[str]:
    env = os.environ.copy()
    subprocess.run([str(BIN / "mur"), "new", "slow"], cwd=tmp, env=env, check=True, capture_output=True, timeout=60)
    (tmp / "slow" / "plan.yaml").write_text('steps:\n  - id: s\n    shell: [sleep, "60"]\noutput: "done"\n')
    manifest = tmp / "slow" / "murmur.yaml"
    manifest.write_text(manifest.read_text().replace("allow: [echo]", "allow: [sleep]"))
    return [str(BIN / "mur"), "run", "--manifest", "slow", "--task", "x", "--json"]


@pytest.mark.parametrize("flag", [True, False], ids=["with-flag", "negative-control"])
def test_a_session_whose_parent_was_killed(tmp_path: Path, flag: bool) -> None:
    argv = _session(tmp_path) + (["--die-with-parent"] if flag else [])
    parent, pid, start = _launch(tmp_path, argv, '"session_id"')
    try:
        parent.kill()
        parent.wait()
        if flag:
            assert _ends_within(pid, start, 30), "the session outlived its parent"
        else:
            assert not _ends_within(pid, start, 1.5), "without the flag the session runs on"
    finally:
        if _start(pid) == start:
            os.killpg(pid, signal.SIGKILL)
        if parent.stdout is not None:
            parent.stdout.close()


@pytest.mark.parametrize("flag", [True, False], ids=["with-flag", "negative-control"])
def test_a_roost_whose_parent_was_killed(tmp_path: Path, flag: bool) -> None:
    argv = [str(BIN / "mur-roost"), "--port", "0"] + (["--die-with-parent"] if flag else [])
    parent, pid, start = _launch(tmp_path, argv, "listening on")
    try:
        parent.kill()
        parent.wait()
        if flag:
            assert _ends_within(pid, start, 15), "mur-roost outlived its parent"
        else:
            assert not _ends_within(pid, start, 1.5), "without the flag mur-roost runs on"
    finally:
        if _start(pid) == start:
            os.killpg(pid, signal.SIGKILL)
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_parent_already_gone_is_caught(tmp_path: Path) -> None:
    """`--die-with-parent=PID` naming a process that is no longer the parent (here: pytest's own
    parent, as if this process had been adopted): the session winds down at once, and its
    60 s task does not complete."""
    argv = [*_session(tmp_path), f"--die-with-parent={os.getppid()}"]
    started = time.monotonic()
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert out.returncode in (1, 143), out.stderr
    assert "SIGTERM" in out.stderr or "E-RUN-040" in out.stderr
