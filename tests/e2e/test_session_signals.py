"""Real `mur run` processes and real signals: SIGTERM once, twice, and the 20 s guard."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ._session import (
    DRIVER,
    SLEEP_PLAN,
    MurProcess,
    alive,
    children_of,
    env_for,
    trace_of,
    write_capsule,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def slow_capsule(tmp_path: Path) -> Path:
    """A queue+sleep plan capsule whose task is a number of seconds to sleep."""
    return write_capsule(tmp_path, "slow", plan=SLEEP_PLAN, allow=["sleep"])


@pytest.fixture
def procs() -> Iterator[list[MurProcess]]:
    """Processes started by a test; every one is killed and reaped at the end."""
    started: list[MurProcess] = []
    yield started
    for p in started:
        p.close()


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler installed for SIGTERM (/proc SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def rpc(url: str, method: str, params: dict[str, object], **kw: object) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    r = httpx.post(url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=30, **kw)  # type: ignore[arg-type]
    return dict(r.json())


def send(url: str, text: str) -> str:
    msg = {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER", "parts": [{"text": text}]}
    res = rpc(url, "SendMessage", {"message": msg, "configuration": {"returnImmediately": True}})
    return str(res["result"]["task"]["id"])  # type: ignore[index]


def wait_working(url: str, tid: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = rpc(url, "GetTask", {"id": tid})["result"]["status"]["state"]  # type: ignore[index]
        if state == "TASK_STATE_WORKING":
            return
        time.sleep(0.02)
    raise AssertionError("task never started")


class TestSigterm:
    def test_idle_sigterm_exits_ok(self, slow_capsule: Path, tmp_path: Path, procs: list[MurProcess]) -> None:
        """SIGTERM to an idle session: exit 0, session_end ok, running record gone, port closed."""
        p = MurProcess(["--json"], cwd=slow_capsule, env=env_for(tmp_path / "home"))
        procs.append(p)
        ready = p.read_ready()
        assert (tmp_path / "home" / "running" / f"{ready['session_id']}.json").exists()
        p.signal(signal.SIGTERM)
        assert p.wait() == 0
        out, err = p.rest()
        assert out == "" and err == ""
        assert trace_of(ready)[-1]["event_type"] == "session_end"
        assert trace_of(ready)[-1]["exit_status"] == "ok"
        assert not (tmp_path / "home" / "running" / f"{ready['session_id']}.json").exists()
        with pytest.raises(httpx.ConnectError):
            httpx.get(p.url + "/.well-known/agent-card.json", timeout=5)

    def test_busy_sigterm_cancels(self, slow_capsule: Path, tmp_path: Path, procs: list[MurProcess]) -> None:
        """SIGTERM while a task runs: the subscriber sees CANCELED then EOF; exit 1 E-RUN-040."""
        p = MurProcess(["--json"], cwd=slow_capsule, env=env_for(tmp_path / "home"))
        procs.append(p)
        ready = p.read_ready()
        tid = send(p.url, "300")
        wait_working(p.url, tid)
        sleepers = children_of(p.pid)
        assert sleepers  # the plan's `sleep 300`
        queued = send(p.url, "300")
        body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": tid}}
        frames: list[str] = []
        with httpx.stream("POST", p.url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=30) as resp:
            lines = resp.iter_lines()
            frames.append(next(lines))  # the snapshot: the stream is open
            t0 = time.monotonic()
            p.signal(signal.SIGTERM)
            frames.extend(lines)
        assert time.monotonic() - t0 < 10
        events = [json.loads(f[5:]) for f in frames if f.startswith("data:")]
        assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert p.wait() == 1
        _, err = p.rest()
        assert "error[E-RUN-040]" in err
        records = Path(ready["records_dir"])
        assert (records / "out" / "result.txt").read_text() == "canceled: the session received SIGTERM\n"
        trace = trace_of(ready)
        rejected = [e for e in trace if e["event_type"] == "task_rejected"]
        assert [e["task_id"] for e in rejected] == [queued]
        assert trace[-1]["event_type"] == "session_end" and trace[-1]["exit_status"] == "canceled"
        assert not any(alive(pid) for pid in sleepers)  # the step's process group was killed

    def test_second_sigterm_exits_at_once(self, tmp_path: Path, procs: list[MurProcess]) -> None:
        """A stuck teardown: the second SIGTERM exits 143 at once."""
        capsule = write_capsule(tmp_path, "stuck", plan=SLEEP_PLAN, allow=["sleep"])
        p = MurProcess(["--json", "--task", "x"], cwd=capsule, env=env_for(tmp_path / "home"), cmd=DRIVER)
        procs.append(p)
        ready = p.read_ready()
        time.sleep(0.3)
        p.signal(signal.SIGTERM)
        time.sleep(0.3)
        assert p.proc.poll() is None  # stuck in teardown
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        assert p.wait() == 143
        assert time.monotonic() - t0 < 2.0
        assert not (tmp_path / "home" / "running" / f"{ready['session_id']}.json").exists()

    @pytest.mark.slow
    def test_guard_exits_143_after_20s(self, tmp_path: Path, procs: list[MurProcess]) -> None:
        """A stuck teardown and one SIGTERM: the guard exits 143 twenty seconds later (real time)."""
        capsule = write_capsule(tmp_path, "stuck", plan=SLEEP_PLAN, allow=["sleep"])
        p = MurProcess(["--json", "--task", "x"], cwd=capsule, env=env_for(tmp_path / "home"), cmd=DRIVER)
        procs.append(p)
        p.read_ready()
        time.sleep(0.3)
        t0 = time.monotonic()
        p.signal(signal.SIGTERM)
        assert p.wait(timeout=40) == 143
        elapsed = time.monotonic() - t0
        assert 19.5 <= elapsed < 25.0, elapsed

    def test_early_sigterm_during_startup(self, slow_capsule: Path, tmp_path: Path, procs: list[MurProcess]) -> None:
        """A SIGTERM during start-up (before the event loop) is never a -15 death."""
        p = MurProcess(["--json"], cwd=slow_capsule, env=env_for(tmp_path / "home"))
        procs.append(p)
        deadline = time.monotonic() + 10
        while not catches_sigterm(p.pid):  # the first handler is in: signal at once
            assert time.monotonic() < deadline
            time.sleep(0.001)
        p.signal(signal.SIGTERM)
        assert p.wait() == 0
        out, _ = p.rest()
        assert out.count("\n") <= 1  # at most the readiness line
