"""Helpers for delegation e2e tests: capsules, a real mur-roost, real `mur run` processes.

Every process a test starts is tracked by :class:`Procs` and killed (its whole process group)
at teardown; anything still running whose command line names the test's directory is killed
too, so a failing test leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from ._session import read_line

BIN = Path(sys.executable).parent
MUR = [str(BIN / "mur")] if (BIN / "mur").exists() else [sys.executable, "-m", "murmur.cli.mur"]
ROOST = [str(BIN / "mur-roost")] if (BIN / "mur-roost").exists() else [sys.executable, "-m", "murmur.cli.roost"]
LISTENING = re.compile(r"^mur-roost: listening on 127\.0\.0\.1:(\d+)$")
TOKEN = re.compile(rb"ms[ac]1\.")
A2A = {"A2A-Version": "1.0", "content-type": "application/json"}

T = TypeVar("T")


def plan_capsule(
    root: Path,
    name: str,
    *,
    plan: str,
    shell: Sequence[str] = (),
    spawn: Sequence[str] = (),
    network: Sequence[str] = (),
    acceptance: str = "queue",
    after: str = "sleep",
    depth: int = 4,
    deadline: int | None = None,
) -> Path:
    """Write a plan capsule's source directory; returns it."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name}", "version: 0.1.0", "plan: plan.yaml", "capabilities:"]
    if shell:
        lines += ["  shell:", f"    allow: [{', '.join(shell)}]"]
    if spawn:
        lines += ["  spawn:", f"    allow: [{', '.join(spawn)}]"]
    if network:
        lines += ["  network:", f"    allow: [{', '.join(network)}]"]
    if not (shell or spawn or network):
        lines[-1] = "capabilities: {}"
    lines += ["lifecycle:", f"  task_acceptance: {acceptance}", f"  queue_depth: {depth}", f"  after_task: {after}"]
    if deadline is not None:
        lines.append(f"  delegation_deadline_secs: {deadline}")
    (d / "murmur.yaml").write_text("\n".join(lines) + "\n")
    (d / "plan.yaml").write_text(plan)
    for old in d.glob("*.mur.zip"):
        old.unlink()
    return d


def capsule_steps(*steps: tuple[str, str, str], on_error: str = "fail", output: str = "done") -> str:
    """A plan of independent capsule steps: (id, capsule, task template)."""
    text = "steps:\n"
    for sid, cap, task in steps:
        text += f"  - id: {sid}\n    capsule: {cap}\n    version: 0.1.0\n    task: \"{task}\"\n"
        if on_error != "fail":
            text += f"    on_error: {on_error}\n"
    return text + f'output: "{output}"\n'


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """One started process (own process group) with its output collected to files."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str], cwd: Path, logs: Path, stdin: int | None = None) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        stem = f"{Path(argv[0]).name}-{time.monotonic_ns()}"
        self.err_path = logs / f"{stem}.err"
        self._err = self.err_path.open("wb")
        self.proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self._err,
            stdin=stdin if stdin is not None else subprocess.DEVNULL, start_new_session=True,
        )
        self.ready: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        """Its pid (and process group id)."""
        return self.proc.pid

    def first_line(self, timeout: float = 60.0) -> str:
        """The first stdout line."""
        assert self.proc.stdout is not None
        return read_line(self.proc.stdout.fileno(), timeout)

    def read_ready(self, timeout: float = 60.0) -> dict[str, Any]:
        """The `mur run --json` readiness line."""
        line = self.first_line(timeout)
        self.ready = json.loads(line)
        return self.ready

    @property
    def stderr(self) -> str:
        """Everything it wrote to stderr so far."""
        self._err.flush()
        return self.err_path.read_text(errors="replace")

    def alive(self) -> bool:
        """Still running (not yet reaped)."""
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Kill the group and reap."""
        self.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()


class Procs:
    """Every process of one test; :meth:`close` leaves nothing running under ``root``."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.started: list[Proc] = []

    def start(self, argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> Proc:
        """Start a process in its own group."""
        p = Proc(argv, env=env or self.env, cwd=cwd or self.root, logs=self.root / "logs")
        self.started.append(p)
        return p

    def roost(self, *flags: str, port: int = 0, env: dict[str, str] | None = None) -> tuple[Proc, str]:
        """Start mur-roost on ``port`` with its registry in the test's MURMUR_HOME; (proc, url)."""
        home = (env or self.env)["MURMUR_HOME"]
        p = self.start([*ROOST, "--port", str(port), "--registry-path", f"{home}/artifacts", "--die-with-parent", *flags],
                       env=env)
        m = LISTENING.match(p.first_line(30).strip())
        assert m is not None, p.stderr
        return p, f"http://127.0.0.1:{m.group(1)}"

    def mur_run(self, name: str, workdir: Path, roost_url: str, *extra: str, env: dict[str, str] | None = None,
                manifest: Path | None = None) -> Proc:
        """Start an installed capsule (or ``manifest``) with `mur run --json`; returns once ready."""
        run_env = dict(env or self.env)
        run_env["MURMUR_ROOST_URL"] = roost_url
        which = ["--manifest", str(manifest)] if manifest else ["--capsule", f"local/{name}", "--capsule-version", "0.1.0"]
        args = ["run", *which, "--json", "--workdir", str(workdir), "--die-with-parent", *extra]
        p = self.start([*MUR, *args], env=run_env)
        try:
            p.read_ready()
        except (TimeoutError, EOFError, ValueError):
            raise AssertionError(f"{name} did not report ready:\n{p.stderr}") from None
        return p

    def close(self) -> None:
        """Kill everything this test started, then anything still naming its directory."""
        for p in self.started:
            p.close()
        for pid in pids_naming(str(self.root)):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def pids_naming(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    out = []
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if needle in cmd and stat[stat.rfind(")") + 2:].split()[0] != "Z":
            out.append(int(entry.name))
    return out


def descendants(pids: Iterable[int]) -> set[int]:
    """``pids`` and every live process descending from them."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found = {p for p in pids if p in parents}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def alive(pids: Iterable[int]) -> set[int]:
    """Those of ``pids`` still running (zombies count as ended)."""
    out = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2:].split()[0] != "Z":
            out.add(pid)
    return out


def send_task(url: str, text: str, *, timeout: float = 120.0) -> dict[str, Any]:
    """SendMessage and wait for the task to end; the Task object."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": f"msg_{time.monotonic_ns()}", "role": "ROLE_USER", "parts": [{"text": text}]}}}
    r = httpx.post(url.rstrip("/") + "/", json=body, headers=A2A, timeout=timeout)
    task: dict[str, Any] = r.json()["result"]["task"]
    return task


def submit_task(url: str, text: str) -> dict[str, Any]:
    """SendMessage returning at once."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": f"msg_{time.monotonic_ns()}", "role": "ROLE_USER", "parts": [{"text": text}]},
                       "configuration": {"returnImmediately": True}}}
    task: dict[str, Any] = httpx.post(url.rstrip("/") + "/", json=body, headers=A2A, timeout=30).json()["result"]["task"]
    return task


def status_text(task: dict[str, Any]) -> str:
    """A task's status message text."""
    msg = task["status"].get("message") or {}
    return "".join(p.get("text", "") for p in msg.get("parts", []))


def trace(records_dir: str | Path) -> list[dict[str, Any]]:
    """A session's trace records."""
    path = Path(records_dir) / "trace.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def of(records: Iterable[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    """Records of one event type."""
    return [r for r in records if r["event_type"] == event]


def wait_until(check: Callable[[], T], *, timeout: float, what: str, every: float = 0.05) -> T:
    """Poll ``check`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def roost_status(roost_url: str, session_id: str) -> dict[str, Any]:
    """GET /status/{id}."""
    body: dict[str, Any] = httpx.get(f"{roost_url}/status/{session_id}", timeout=10).json()
    return body


def completion_settled(child_dir: Path) -> dict[str, Any] | None:
    """A child's completion.json once its delivery is recorded (delivered or a delivery_error)."""
    try:
        data = json.loads((child_dir / "completion.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and (data.get("delivered") or data.get("delivery_error")) else None


def token_hits(paths: Iterable[Path], pids: Iterable[int]) -> list[str]:
    """Where ``msc1.``/``msa1.`` occurs: every file under ``paths``, each pid's environ and cmdline."""
    hits: list[str] = []
    for root in paths:
        for f in [root] if root.is_file() else root.rglob("*"):
            if f.is_file() and not f.is_symlink():
                try:
                    if TOKEN.search(f.read_bytes()):
                        hits.append(str(f))
                except OSError:
                    pass
    for pid in pids:
        for part in ("environ", "cmdline"):
            try:
                if TOKEN.search(Path(f"/proc/{pid}/{part}").read_bytes()):
                    hits.append(f"/proc/{pid}/{part}")
            except OSError:
                pass
    return hits
