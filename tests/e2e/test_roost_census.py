"""mur-roost's census after SIGKILLed parents and children, and after launches that fall short.

Issue 11, item 5 (spec/roost.md, "When a session's process ends"; spec/delegation.md,
"Launching a child"). Trio-native: a real `mur-roost` and real `mur run` parents and children,
started with ``trio.lowlevel.open_process`` in their own process groups and owned by the
``rig`` fixture, which kills every group it started and every process of the trees it
recorded (checked by start time, so only processes this test started) in a shielded
``finally``. Every wait is bounded by ``trio.fail_after`` and waits on an event: a readiness
line, a line on mur-roost's stderr, a trace record, a pidfd becoming readable, a roost answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import attrs
import httpx
import pytest
import trio

from murmur import procstat
from murmur.registry import install
from murmur.roost.client import RoostClient, RoostRefused

from ._delegation import MUR, ROOST, capsule_steps, of, plan_capsule, trace

pytestmark = pytest.mark.e2e

T = TypeVar("T")
A2A = {"A2A-Version": "1.0", "content-type": "application/json"}
NOTICE = "mur-roost: session {sid} ended without deregistering (process {pid} exited); marked failed and its slots released"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A MURMUR_HOME holding this module's capsules, installed once."""
    home = tmp_path_factory.mktemp("census-home")
    src = tmp_path_factory.mktemp("census-src")
    nap = 'steps:\n  - id: nap\n    shell: [sleep, "{{ task }}"]\noutput: "slept {{ task }}"\n'
    echo = 'steps:\n  - id: say\n    shell: [echo, "worked: {{ task }}"]\noutput: "{{ steps.say.stdout }}"\n'
    broken = plan_capsule(src, "broken", plan=echo, shell=["echo"])
    manifest = broken / "murmur.yaml"  # a floor this host cannot give: E-CAP-003 at launch
    manifest.write_text(manifest.read_text().replace("capabilities:\n", "capabilities:\n  containment: scoped\n", 1))
    four = "".join(
        f"  - id: b{i}\n    capsule: broken\n    version: 0.1.0\n    task: \"{{{{ task }}}}\"\n    on_error: continue\n"
        for i in range(1, 5)
    )
    flaky_plan = ("steps:\n" + four + "  - id: w\n    capsule: worker\n    version: 0.1.0\n"
                  "    task: \"{{ task }}\"\n    depends_on: [b1, b2, b3, b4]\n"
                  "output: \"{{ steps.b1.status }} {{ steps.b2.status }} {{ steps.b3.status }} "
                  "{{ steps.b4.status }} | {{ steps.w.output }}\"\n")
    dirs = [
        plan_capsule(src, "sleeper", plan=nap, shell=["sleep"]),
        plan_capsule(src, "worker", plan=echo, shell=["echo"]),
        broken,
        plan_capsule(src, "napper", shell=["sleep"], spawn=["sleeper"],
                     plan=capsule_steps(("a", "sleeper", "{{ task }}"), output="{{ steps.a.output }}")),
        plan_capsule(src, "flaky", shell=["echo"], spawn=["broken", "worker"], plan=flaky_plan),
    ]
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        for d in dirs:
            install(d, global_=True)
    yield home


# -- processes this test owns ------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()


def _tree(root: int) -> dict[int, str]:
    """``root`` and its live descendants, each with its command line (spaces for NULs)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found = {root} if root in parents else set()
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    out: dict[int, str] = {}
    for pid in found:
        try:
            out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return out


class Lines:
    """The lines of one pipe, read by a task of their own; waiters wake on each new line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._new = trio.Event()
        self.closed = False

    async def pump(self, stream: trio.abc.ReceiveStream) -> None:
        buf = b""
        try:
            while chunk := await stream.receive_some(65536):
                buf += chunk
                *done, buf = buf.split(b"\n")
                self.lines += [d.decode(errors="replace") for d in done]
                self._new.set()
                self._new = trio.Event()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.closed = True
            self._new.set()

    async def wait_for(self, match: Callable[[str], bool], what: str, timeout: float = 30.0) -> str:
        """The first line (already read or still to come) that ``match``es."""
        with trio.fail_after(timeout):
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if match(line):
                        return line
                seen = len(self.lines)
                if self.closed:
                    raise AssertionError(f"the pipe closed before {what}: {self.lines}")
                await self._new.wait()


@attrs.define
class Started:
    """One process a test started (its own process group)."""

    proc: trio.Process
    out: Lines
    err: Lines
    ready: dict[str, Any] = attrs.field(factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid


JANITOR = "containment/janitor.py"


@attrs.define
class Rig:
    """Starts mur-roost and `mur run`s; owns every process it started and the trees it recorded."""

    nursery: trio.Nursery
    env: dict[str, str]
    root: Path
    started: list[Started] = attrs.field(factory=list)
    recorded: dict[int, int | None] = attrs.field(factory=dict)  # pid -> start ticks
    roost_url: str = ""
    roost_err: Lines | None = None

    async def start(self, argv: list[str], env: dict[str, str]) -> Started:
        proc = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=str(self.root), start_new_session=True,
        )
        s = Started(proc, Lines(), Lines())
        self.started.append(s)
        self.recorded[proc.pid] = procstat.start_time(proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        self.nursery.start_soon(s.out.pump, proc.stdout)
        self.nursery.start_soon(s.err.pump, proc.stderr)
        return s

    async def roost(self, *flags: str) -> Started:
        """mur-roost on a free port, its registry the test's store; once its two lines are out."""
        home = self.env["MURMUR_HOME"]
        s = await self.start([*ROOST, "--port", "0", "--registry-path", f"{home}/artifacts", *flags], self.env)
        line = await s.out.wait_for(lambda t: t.startswith("mur-roost: listening on"), "the listening line")
        await s.out.wait_for(lambda t: t.startswith("mur-roost: machine ceiling"), "the ceiling line")
        self.roost_url = "http://" + line.rsplit(" ", 1)[1]
        self.roost_err = s.err
        return s

    async def mur_run(self, name: str, workdir: Path, **extra: str) -> Started:
        """`mur run --json` of an installed capsule against the rig's daemon; once ready."""
        env = {**self.env, "MURMUR_ROOST_URL": self.roost_url, **extra}
        s = await self.start([*MUR, "run", "--capsule", f"local/{name}", "--capsule-version", "0.1.0",
                              "--json", "--workdir", str(workdir)], env)
        try:
            line = await s.out.wait_for(lambda t: t.startswith("{"), f"{name}'s readiness line", timeout=90)
        except AssertionError:
            raise AssertionError(f"{name} did not report ready: {s.err.lines}") from None
        s.ready = json.loads(line)
        return s

    def record_tree(self, pid: int) -> dict[int, str]:
        """Record ``pid``'s process tree now (killed at teardown if still alive); returns it."""
        tree = _tree(pid)
        for p, cmd in tree.items():
            if JANITOR in cmd:
                continue  # it outlives its owner to remove the owner's units: killing it leaves them
            self.recorded.setdefault(p, procstat.start_time(p))
        return tree

    async def notice(self, sid: str, timeout: float = 30.0) -> str:
        """mur-roost's stderr line retiring ``sid``."""
        assert self.roost_err is not None
        return await self.roost_err.wait_for(lambda t: f"session {sid} ended" in t, f"the notice for {sid}", timeout)

    async def status(self, sid: str) -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10) as client:
            body: dict[str, Any] = (await client.get(f"{self.roost_url}/status/{sid}")).json()
        return body

    async def teardown(self) -> None:
        for s in self.started:
            try:
                os.killpg(s.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid, ticks in self.recorded.items():
            if ticks is not None and procstat.start_time(pid) == ticks:  # still the process we recorded
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for s in self.started:
            with trio.move_on_after(10):
                await s.proc.wait()


@pytest.fixture
async def rig(tmp_path: Path, home: Path) -> AsyncIterator[Rig]:
    """A rig whose processes are all killed, shielded, however the test ends."""
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_DELEGATION_TIMEOUT_SECS"):
        env.pop(name, None)
    async with trio.open_nursery() as nursery:
        r = Rig(nursery, env, tmp_path)
        try:
            yield r
        finally:
            with trio.CancelScope(shield=True):
                await r.teardown()
            nursery.cancel_scope.cancel()


# -- events ------------------------------------------------------------------------------------


async def until(check: Callable[[], Awaitable[T | None]], what: str, timeout: float = 30.0) -> T:
    """Ask ``check`` (a roost answer, a trace read) until it answers; bounded."""
    with trio.fail_after(timeout):
        while True:
            value = await check()
            if value:
                return value
            await trio.sleep(0.05)  # a roost figure or a trace line has no event to wait on


async def submit(url: str, text: str) -> dict[str, Any]:
    """SendMessage returning at once; the task."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": f"msg_{trio.current_time()}", "role": "ROLE_USER",
                                   "parts": [{"text": text}]}, "configuration": {"returnImmediately": True}}}
    async with httpx.AsyncClient(timeout=30) as client:
        task: dict[str, Any] = (await client.post(url.rstrip("/") + "/", json=body, headers=A2A)).json()["result"]["task"]
    return task


async def task_ended(url: str, task_id: str) -> dict[str, Any] | None:
    """GetTask: the task once it has ended, else None."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    async with httpx.AsyncClient(timeout=30) as client:
        task: dict[str, Any] = (await client.post(url.rstrip("/") + "/", json=body, headers=A2A)).json()["result"]
    ended = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
    return task if task["status"]["state"] in ended else None


def text_of(task: dict[str, Any]) -> str:
    msg = task["status"].get("message") or {}
    return "".join(p.get("text", "") for p in msg.get("parts", []))


async def run_task(s: Started, text: str, timeout: float = 90.0) -> dict[str, Any]:
    """Send a task and wait for its end (GetTask answers)."""
    task = await submit(s.ready["url"], text)
    return await until(lambda: task_ended(s.ready["url"], task["id"]), "the task to end", timeout)


async def delegation_started(s: Started) -> dict[str, Any]:
    """The parent's `delegation_start` trace record, once written."""
    async def read() -> dict[str, Any] | None:
        starts = of(trace(s.ready["records_dir"]), "delegation_start")
        return starts[0] if starts else None
    return await until(read, "a delegation_start record", timeout=60)


async def pidfd_exit(pid: int, timeout: float = 30.0) -> None:
    """Wait for a process that is not our child to end (its pidfd becomes readable)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with trio.fail_after(timeout):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


def child_mur(rig: Rig, tree: dict[int, str], csid: str) -> int:
    """The pid of the delegated session ``csid``: its running record's pid and start time,
    which must be a process of the parent's recorded tree (never a command-line match, which
    another test's processes, or a fork not yet exec'd, can also satisfy)."""
    record = json.loads((Path(rig.env["MURMUR_HOME"]) / "running" / f"{csid}.json").read_text())
    pid = int(record["pid"])
    assert pid in tree, f"the child {csid} (pid {pid}) is not in the parent's tree {sorted(tree)}"
    assert procstat.start_time(pid) == record["start_time"], "the child's pid was reused"
    return pid


# -- the tests ---------------------------------------------------------------------------------


class TestSigkill:
    @pytest.mark.parametrize("also_child", [False, True], ids=["parent", "parent-and-child"])
    async def test_killed_parent_gives_the_ceiling_back(self, rig: Rig, tmp_path: Path, also_child: bool) -> None:
        """Ceiling 2, kill -KILL a parent mid-delegation: a fresh top-level spawn is granted."""
        roost = await rig.roost("--spawn-allow", "napper", "--max-live-capsules", "2")
        parent = await rig.mur_run("napper", tmp_path / "p")
        psid = parent.ready["session_id"]
        await submit(parent.ready["url"], "60")
        start = await delegation_started(parent)
        csid = start["child_session_id"]
        tree = rig.record_tree(parent.pid)
        child = child_mur(rig, tree, csid)
        assert (await rig.status(psid))["live_capsules"] == 2
        # what the issue reproduced, while both are alive: the ceiling is reached
        async with RoostClient(rig.roost_url) as client:
            probe = await client.register("ses_" + "e" * 32, "napper", "0.1.0")
            with pytest.raises(RoostRefused) as refused:
                await client.spawn(probe, "sleeper", "0.1.0")
            assert "machine capsule ceiling reached" in refused.value.message
            assert "already holding 3" in refused.value.message
            await client.deregister(probe, "complete")
        began = trio.current_time()
        os.killpg(parent.pid, signal.SIGKILL)
        if also_child:
            os.killpg(child, signal.SIGKILL)
        with trio.fail_after(10):
            await parent.proc.wait()
        assert await rig.notice(psid) == NOTICE.format(sid=psid, pid=parent.pid)
        await pidfd_exit(child)
        if also_child:  # nobody deregistered it: the daemon saw its process end
            assert await rig.notice(csid) == NOTICE.format(sid=csid, pid=child)
        figures = await until(lambda: self._retired(rig, csid), "the child retired")
        released = trio.current_time() - began
        print(f"\n  census back to 0 {released * 1000:.0f} ms after kill -KILL ({'parent and child' if also_child else 'parent'})")
        assert figures["status"] == ("failed" if also_child else figures["status"])
        assert await rig.status(psid) == {"status": "failed", "depth_remaining": 3, "live_children": 0,
                                          "live_capsules": 0}
        fresh = await rig.mur_run("napper", tmp_path / "fresh")
        task = await run_task(fresh, "0.1")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", text_of(task)
        assert text_of(task) == "slept 0.1"
        assert roost.proc.returncode is None

    @staticmethod
    async def _retired(rig: Rig, sid: str) -> dict[str, Any] | None:
        figures = await rig.status(sid)
        return figures if figures["status"] != "running" else None

    async def test_killed_child_gives_its_parents_slot_back(self, rig: Rig, tmp_path: Path) -> None:
        """--max-concurrent 1: kill -KILL the delegated child; the parent's next delegation is granted."""
        await rig.roost("--spawn-allow", "napper", "--max-concurrent", "1")
        parent = await rig.mur_run("napper", tmp_path / "p")
        psid = parent.ready["session_id"]
        first = await submit(parent.ready["url"], "60")
        start = await delegation_started(parent)
        csid = start["child_session_id"]
        child = child_mur(rig, rig.record_tree(parent.pid), csid)
        assert (await rig.status(psid))["live_children"] == 1
        os.killpg(child, signal.SIGKILL)
        assert await rig.notice(csid) == NOTICE.format(sid=csid, pid=child)
        assert (await rig.status(csid))["status"] == "failed"
        assert await rig.status(psid) == {"status": "running", "depth_remaining": 3, "live_children": 0,
                                          "live_capsules": 1}
        ended = await until(lambda: task_ended(parent.ready["url"], first["id"]), "the first task to end")
        assert ended["status"]["state"] == "TASK_STATE_FAILED"
        again = await run_task(parent, "0.1")
        assert again["status"]["state"] == "TASK_STATE_COMPLETED", text_of(again)
        figures = await until(lambda: self._settled(rig, psid), "live_children back to 0")
        assert figures == {"status": "running", "depth_remaining": 3, "live_children": 0, "live_capsules": 1}

    @staticmethod
    async def _settled(rig: Rig, sid: str) -> dict[str, Any] | None:
        figures = await rig.status(sid)
        return figures if figures["live_children"] == 0 and figures["live_capsules"] == 1 else None


class TestLaunchFailures:
    async def test_four_failures_then_a_grant_at_once(self, rig: Rig, tmp_path: Path) -> None:
        """--max-concurrent 4: four children fail at launch (E-CAP-003); the fifth is granted at once."""
        roost = await rig.roost("--spawn-allow", "flaky", "--max-concurrent", "4")
        # a host made to lack Landlock (handed down to the children), so `broken`'s scoped floor
        # cannot be given: E-CAP-003 at each child's launch
        parent = await rig.mur_run("flaky", tmp_path / "p", MURMUR_SANDBOX_HOST="no-landlock")
        psid = parent.ready["session_id"]
        began = trio.current_time()
        task = await run_task(parent, "go")
        took = trio.current_time() - began
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", text_of(task)
        assert text_of(task) == "failed failed failed failed | worked: go"
        records = trace(parent.ready["records_dir"])
        calls = [r for r in of(records, "delegation") if r["capsule"] == "broken"]
        assert len(calls) == 4
        for call in calls:
            assert call["outcome"] == "failed" and call["delegation_id"] is not None
            assert "before reporting ready" in call["reason"] and "E-CAP-003" in call["reason"]
        (worked,) = [r for r in of(records, "delegation") if r["capsule"] == "worker" and r["outcome"] == "completed"]
        assert worked["reason"] is None
        print(f"\n  four failed launches and a granted fifth delegation in {took:.2f} s (the approvals' 60 s never waited)")
        assert took < 60
        figures = await until(lambda: TestSigkill._settled(rig, psid), "live_children back to 0")
        assert figures["live_children"] == 0
        # every slot went back by a deregistration: the four given back by the parent, the
        # fifth by the worker itself; none waited for a process to end
        assert not [line for line in roost.err.lines if "ended without deregistering" in line]
