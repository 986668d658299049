"""Helpers for session e2e tests: capsule directories and real `mur run` processes."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MUR = [sys.executable, "-m", "murmur.cli.mur"]
DRIVER = [sys.executable, str(Path(__file__).with_name("session_driver.py"))]


def write_capsule(
    root: Path,
    name: str,
    *,
    plan: str,
    allow: Sequence[str],
    acceptance: str = "queue",
    after: str = "sleep",
    depth: int = 8,
    auth: dict[str, Sequence[str]] | None = None,
) -> Path:
    """A plan capsule source directory; returns it."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    lines = [
        f"name: {name}",
        "version: 0.1.0",
        "plan: plan.yaml",
        "capabilities:",
        "  shell:",
        f"    allow: [{', '.join(allow)}]",
        "lifecycle:",
        f"  task_acceptance: {acceptance}",
        f"  queue_depth: {depth}",
        f"  after_task: {after}",
    ]
    if auth is not None:
        lines += ["network:", "  authentication:", "    scheme: bearer", "    credentials:"]
        for cred, scopes in auth.items():
            lines += [f"      {cred}:", f"        scopes: [{', '.join(scopes)}]"]
    (d / "murmur.yaml").write_text("\n".join(lines) + "\n")
    (d / "plan.yaml").write_text(plan)
    return d


SLEEP_PLAN = 'steps:\n  - id: nap\n    shell: [sleep, "{{ task }}"]\noutput: "slept {{ task }}"\n'
ECHO_PLAN = 'steps:\n  - id: say\n    shell: [echo, "echo: {{ task }}"]\noutput: "{{ steps.say.stdout }}"\n'


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """The test process environment with MURMUR_HOME pointing at ``home``."""
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    env.update(extra)
    return env


class MurProcess:
    """A `mur run` (or driver) process in its own process group, killed on close."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str],
        cmd: Sequence[str] = MUR,
        stdout: int = subprocess.PIPE,
        stderr: int = subprocess.PIPE,
    ) -> None:
        self.proc = subprocess.Popen(
            [*cmd, "run", *args, "--die-with-parent"], cwd=cwd, env=env, stdout=stdout, stderr=stderr,
            start_new_session=True,
        )
        self.ready: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        """The process id (also its process group id)."""
        return self.proc.pid

    def read_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Read the one readiness line from stdout (``--json``)."""
        assert self.proc.stdout is not None
        line = read_line(self.proc.stdout.fileno(), timeout)
        self.ready = json.loads(line)
        return self.ready

    @property
    def url(self) -> str:
        """The door's URL (after :meth:`read_ready`)."""
        return str(self.ready["url"])

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to the process."""
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for exit; the exit status."""
        return self.proc.wait(timeout)

    def rest(self) -> tuple[str, str]:
        """The rest of stdout and stderr (after exit)."""
        out = self.proc.stdout.read().decode() if self.proc.stdout else ""
        err = self.proc.stderr.read().decode() if self.proc.stderr else ""
        return out, err

    def close(self) -> None:
        """Kill the whole group if anything is left, and reap."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def read_line(fd: int, timeout: float) -> str:
    """One line from a pipe, bounded by ``timeout`` seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no line within {timeout}s (got {buf!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1)
        if not chunk:
            raise EOFError(f"pipe closed before a full line (got {buf!r})")
        buf += chunk
    return buf.decode()


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def trace_of(ready: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace records of a session, from its readiness line's records_dir."""
    path = Path(ready["records_dir"]) / "trace.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
