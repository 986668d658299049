"""The member side of formations with real processes: real `mur run` members and launchers.

* the scaffold (`mur new --roster demo`, `mur build`, `mur install -g`, `mur run --roster`)
  completes with the worker's answer in the lead's ``out/result.txt``, and no token or door
  port is in any record;
* a real member started by a test that plays the launcher (it holds the formation's key):
  forged, altered, cross-formation and re-encoded ``mft1`` tokens are ``401 invalid_token``
  with identical bytes, a valid token for another member's door is ``403 not_permitted``, a
  valid one is served; closing its lifeline ends it (``formation_ended``, exit 0);
* ``kill -KILL`` of a real launcher: every member reads its lifeline's EOF, writes
  ``formation_ended`` and ``session_end``, and is gone within 30 s;
* the launch refusals and warnings of a member (``E-RUN-044``, ``E-RUN-046``, ``W-RUN-007``).

Every process a test starts is killed at teardown, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from murmur.formation.wire import channel
from murmur.formation.wire.edge_tokens import FormationKey
from murmur.ids import new_id

from ._census import Formation, unit_pids
from ._formation import wait_for

pytestmark = [pytest.mark.e2e]

MUR = [sys.executable, "-m", "murmur.cli.mur"]
A2A = {"A2A-Version": "1.0"}
PEER = {"x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One MURMUR_HOME for the module (the scaffold is built and installed once)."""
    return tmp_path_factory.mktemp("member-home")


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    env["MURMUR_HOME"] = str(home)
    env.update(extra)
    return env


def mur(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MUR, *args], cwd=cwd, env=env_for(home), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def demo(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`mur new --roster demo`; each member built and installed globally (`mur install -g`)."""
    root = tmp_path_factory.mktemp("member-proj")
    assert mur("new", "--roster", "demo", cwd=root, home=home).returncode == 0
    d = root / "demo"
    for member, capsule in (("lead", "demo-lead"), ("worker", "demo-worker")):
        assert mur("build", member, cwd=d, home=home).returncode == 0
        done = mur("install", "-g", f"{member}/{capsule}-0.1.0.mur.zip", cwd=d, home=home)
        assert done.returncode == 0, done.stderr
    return d


class Procs:
    """Processes a test started; all are killed (with their groups) at teardown."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        self.extra: list[int] = []

    def popen(self, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL, **kw)
        self.started.append(proc)
        return proc

    def kill_all(self) -> None:
        pids = [p.pid for p in self.started] + self.extra
        for pid in pids:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for p in self.started:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def procs() -> Iterator[Procs]:
    p = Procs()
    yield p
    p.kill_all()


def records_of(home: Path, session_id: str) -> Path:
    (found,) = (home / "records").rglob(session_id)
    return found


def events(home: Path, session_id: str) -> list[dict[str, Any]]:
    text = (records_of(home, session_id) / "trace.jsonl").read_text()
    return [json.loads(x) for x in text.splitlines()]


def read_json_lines(path: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> list[dict[str, Any]]:
    wait_for(lambda: len(path.read_text().splitlines()) >= n or proc.poll() is not None, timeout)
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    assert len(lines) >= n, (proc.poll(), lines)
    return lines


UNREACHABLE_PROXY = "http://127.0.0.1:9"  # nothing listens: a call sent through it fails
PROXIES = {name: UNREACHABLE_PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}


class TestScaffold:
    @pytest.mark.parametrize("proxied", [False, True], ids=["plain", "proxy-variables-set"])
    def test_task_answer_reaches_the_lead(self, demo: Path, home: Path, procs: Procs, tmp_path: Path, proxied: bool) -> None:
        """`mur run --roster demo --task`: exit 0; the lead's result is the worker's answer.

        With every proxy variable naming an unreachable proxy (and no NO_PROXY), the loopback
        calls — the readiness probes, the lead's call-member — still go direct.
        """
        out = tmp_path / "out"
        env = env_for(home)
        if proxied:
            env = {k: v for k, v in env.items() if k.lower() != "no_proxy"} | PROXIES
        with out.open("wb") as o, (tmp_path / "err").open("wb") as e:
            proc = procs.popen([*MUR, "run", "--roster", str(demo), "--json", "--task", "hello formation"],
                               cwd=demo.parent, env=env, stdout=o, stderr=e)
            assert proc.wait(90) == 0, (tmp_path / "err").read_text()
        formation, entry = read_json_lines(out, 2, proc)
        result = Path(entry["records_dir"]) / "out" / "result.txt"
        assert result.read_text() == "worker heard: hello formation\n"
        (peer,) = formation["peers"]
        lead_events = events(home, entry["session_id"])
        call = next(e for e in lead_events if e["event_type"] == "member_call")
        assert (call["member"], call["status"], call["delivered"]) == ("worker", "completed", True)
        worker_events = [e["event_type"] for e in events(home, peer["session_id"])]
        assert worker_events[-2:] == ["formation_ended", "session_end"]
        port = peer["url"].rsplit(":", 1)[1]
        for path in [*(home / "records").rglob("*"), *(home / "formations").rglob("*")]:
            if path.is_file():  # traces, results, task.md, door and bootstrap logs
                data = path.read_bytes()
                assert b"mft1." not in data, path
                assert f"127.0.0.1:{port}".encode() not in data, path
        assert unit_pids(formation["formation_id"]) == set()  # its unit is empty or gone

    def test_kill_launcher_members_see_lifeline_eof(self, demo: Path, home: Path, procs: Procs,
                                                      tmp_path: Path) -> None:
        """kill -KILL of the launcher: every member writes formation_ended, ends, is gone in 30 s."""
        out = tmp_path / "out"
        with out.open("wb") as o, (tmp_path / "err").open("wb") as e:
            proc = procs.popen([*MUR, "run", "--roster", str(demo), "--json"], cwd=demo.parent,
                               env=env_for(home), stdout=o, stderr=e)
        formation, entry = read_json_lines(out, 2, proc)
        launch = Formation(proc.pid, formation["formation_id"])
        launch.record()
        members = {int(entry["pid"]), int(formation["peers"][0]["pid"])}
        procs.extra += sorted(members)
        assert members <= set(launch.left())  # found by the recorded tree and by containment
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        took = wait_for(lambda: launch.left() == [], 30.0)
        print(f"\n[member side] kill -KILL launcher -> last member gone after {time.monotonic() - t0:.2f}s")
        assert took < 30.0
        for sid in (entry["session_id"], formation["peers"][0]["session_id"]):
            kinds = [e["event_type"] for e in events(home, sid)]
            assert kinds[-2:] == ["formation_ended", "session_end"], kinds
            assert events(home, sid)[-1]["exit_status"] == "ok"


WORKER = """\
name: solo-worker
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: queue
  queue_depth: 4
  after_task: sleep
capabilities:
  shell:
    allow: [echo]
exports:
  peer_tasks:
    accept: true
network:
  authentication:
    scheme: bearer
"""
PLAN = 'steps:\n  - id: a\n    shell: [echo, "worker heard: {{ task }}"]\noutput: "{{ steps.a.stdout }}"\n'


@pytest.fixture
def worker_src(tmp_path: Path) -> Path:
    d = tmp_path / "worker"
    d.mkdir()
    (d / "murmur.yaml").write_text(WORKER)
    (d / "plan.yaml").write_text(PLAN)
    return d


class Member:
    """A real `mur run` member whose launcher is this test (it holds the key and the pipes)."""

    def __init__(self, procs: Procs, src: Path, home: Path, tmp: Path, *, name: str = "worker") -> None:
        self.key = FormationKey.generate()
        self.formation_id = new_id("frm")
        self.name = name
        chan_r, self.chan_w = os.pipe()
        life_r, self.life_w = os.pipe()
        creds = channel.Credentials(self.formation_id, name, self.key.verify_key(), ())
        os.write(self.chan_w, channel.encode_credentials(creds))
        env = env_for(home, MURMUR_FORMATION_ID=self.formation_id, MURMUR_FORMATION_CHANNEL=str(chan_r),
                      MURMUR_FORMATION_LIFELINE=str(life_r))
        self.out = tmp / "member.out"
        self.err = tmp / "member.err"
        with self.out.open("wb") as o, self.err.open("wb") as e:
            self.proc = procs.popen([*MUR, "run", "--manifest", str(src / "murmur.yaml"), "--json"],
                                    cwd=tmp, env=env, stdout=o, stderr=e, pass_fds=(chan_r, life_r))
        os.close(chan_r)
        os.close(life_r)
        (self.ready,) = read_json_lines(self.out, 1, self.proc)

    def token(self, caller: str, callee: str) -> str:
        return self.key.mint(formation=self.formation_id, caller=caller, callee=callee)

    def close(self) -> None:
        for fd in (self.chan_w, self.life_w):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def member(procs: Procs, worker_src: Path, home: Path, tmp_path: Path) -> Iterator[Member]:
    m = Member(procs, worker_src, home, tmp_path)
    yield m
    m.close()


def post(url: str, method: str, params: dict[str, Any], token: str | None, **headers: str) -> httpx.Response:
    h = {**A2A, **headers}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    with httpx.Client(base_url=url, timeout=10, trust_env=False) as c:
        return c.post("/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=h)


def message(text: str) -> dict[str, Any]:
    return {"message": {"messageId": new_id("msg"), "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": True}}


class TestRealDoor:
    def test_tokens_at_a_real_door(self, member: Member, home: Path) -> None:
        """Invalid mft1 tokens are 401 with identical bytes; another door's 403; a valid one served."""
        url = member.ready["url"]
        assert member.ready["formation_id"] == member.formation_id
        good = member.token("lead", "worker")
        tag, payload, sig = good.split(".")
        flipped = ("B" if sig[0] == "A" else "A") + sig[1:]
        bad = {
            "forged": FormationKey.generate().mint(formation=member.formation_id, caller="lead", callee="worker"),
            "altered": f"{tag}.{payload}.{flipped}",
            "cross-formation": FormationKey.generate().mint(formation=new_id("frm"), caller="lead", callee="worker"),
            "re-encoded": f"{tag}.{payload}==.{sig}",
        }
        answers = {name: post(url, "SendMessage", message("x"), tok, **PEER) for name, tok in bad.items()}
        first = answers["forged"]
        assert (first.status_code, first.json()["error"]) == (401, "invalid_token")
        for name, r in answers.items():
            assert (r.status_code, r.content, r.headers["www-authenticate"]) == (
                401, first.content, first.headers["www-authenticate"]), name
        other = post(url, "SendMessage", message("x"), member.token("lead", "critic"), **PEER)
        assert (other.status_code, other.json()["error"]) == (403, "not_permitted")
        served = post(url, "SendMessage", message("ping"), good, **PEER).json()["result"]["task"]
        wait_for(lambda: post(url, "GetTask", {"id": served["id"]}, good).json()["result"]["status"]["state"]
                 == "TASK_STATE_COMPLETED", 20.0, step=0.1)
        done = post(url, "GetTask", {"id": served["id"]}, good).json()["result"]
        assert done["artifacts"][0]["parts"][0]["text"] == "worker heard: ping"
        scout = post(url, "GetTask", {"id": served["id"]}, member.token("scout", "worker")).json()
        assert scout["error"]["code"] == -32001
        received = [e for e in events(home, member.ready["session_id"]) if e["event_type"] == "a2a_task_received"]
        assert [e["caller_member"] for e in received] == ["lead"]

    def test_lifeline_eof_ends_the_member(self, member: Member, home: Path) -> None:
        """Closing the lifeline: formation_ended first, session_end ok, exit 0, promptly."""
        os.close(member.life_w)
        t0 = time.monotonic()
        assert member.proc.wait(25) == 0, member.err.read_text()
        print(f"\n[member side] lifeline closed -> idle member exited after {time.monotonic() - t0:.2f}s")
        kinds = [e["event_type"] for e in events(home, member.ready["session_id"])]
        assert kinds == ["session_start", "formation_ended", "session_end"]


class TestLaunchChecks:
    def run_member(self, src: Path, home: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*MUR, "run", "--manifest", str(src / "murmur.yaml"), "--json"], cwd=tmp,
                              env=env_for(home, **env), capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def test_refusals(self, worker_src: Path, home: Path, tmp_path: Path) -> None:
        """E-RUN-046 (peers variable, channel not open, channel without id), E-RUN-044: exit 1."""
        fid = new_id("frm")
        cases = [
            ({"MURMUR_FORMATION_PEERS": "a=http://a.formation.invalid"}, "E-RUN-046"),
            ({"MURMUR_FORMATION_ID": fid, "MURMUR_FORMATION_CHANNEL": "987"}, "E-RUN-046"),
            ({"MURMUR_FORMATION_CHANNEL": "987"}, "E-RUN-046"),
            ({"MURMUR_FORMATION_ID": fid, "MURMUR_FORMATION_LIFELINE": "1"}, "E-RUN-046"),
            ({"MURMUR_FORMATION_ID": "frm_123"}, "E-RUN-044"),
        ]
        for env, code in cases:
            done = self.run_member(worker_src, home, tmp_path, **env)
            assert done.returncode == 1 and f"error[{code}]" in done.stderr, (env, done.stderr)
            assert done.stdout == ""

    def test_hand_started_member(self, worker_src: Path, home: Path, procs: Procs, tmp_path: Path) -> None:
        """MURMUR_FORMATION_ID without a lifeline: W-RUN-007 once; formation_id reported; ends on SIGTERM."""
        fid = new_id("frm")
        out, err = tmp_path / "o", tmp_path / "e"
        with out.open("wb") as o, err.open("wb") as e:
            proc = procs.popen([*MUR, "run", "--manifest", str(worker_src / "murmur.yaml"), "--json"], cwd=tmp_path,
                               env=env_for(home, MURMUR_FORMATION_ID=fid), stdout=o, stderr=e)
        (ready,) = read_json_lines(out, 1, proc)
        assert ready["formation_id"] == fid
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(25) == 0
        assert err.read_text().count("warning[W-RUN-007]") == 1
        kinds = [e["event_type"] for e in events(home, ready["session_id"])]
        assert "formation_ended" not in kinds and events(home, ready["session_id"])[0]["formation_id"] == fid
