"""The launcher against stand-in children (tests/delegation/fake_child.py) and a real roost.

Real processes, real pipes, an in-process mur-roost over TCP; the bounds are shortened where a
test must see one fire.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from agent.scripted import Reply, ScriptedServer
from murmur import containment, tracectx
from murmur.containment.host import pid_cgroup
from murmur.delegation import completion as comp
from murmur.delegation import parent as parent_module
from murmur.delegation.book import DelegationBook
from murmur.delegation.child_process import capsule_ref, mur_command
from murmur.delegation.parent import ChildArtifact, Launcher, child_dir_name
from murmur.manifest.model import Capabilities, EnvCaps, Manifest, SpawnCaps
from murmur.roost.client import RoostClient

from .conftest import StartRoost, sha_of

FAKE = Path(__file__).with_name("fake_child.py")
ACK = {"jsonrpc": "2.0", "id": "x", "result": {"message": {"parts": [{"text": "completion accepted"}]}}}
PARENT = Manifest("orch", "0.1.0", capabilities=Capabilities(spawn=SpawnCaps(("worker",)), env=EnvCaps(("SHARED", "PARENT_ONLY"))))
WORKER = Manifest("worker", "0.1.0", capabilities=Capabilities(env=EnvCaps(("SHARED",))))
ENVIRON = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/op",
    "SHARED": "shared",
    "PARENT_ONLY": "p",
    "WORKER_ONLY": "w",
    "UNRELATED": "u",
}


@attrs.define
class Rig:
    """A launcher wired to a roost, a recording door and a trace list."""

    launcher: Launcher
    door: ScriptedServer
    records: list[tuple[str, dict[str, Any]]]
    report: Path
    started: dict[str, list[int]]

    def info(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.report.read_text())
        return data

    def pid(self) -> int:
        """The pid of the one child this launcher started, recorded as it was started: a child
        stopped before its interpreter wrote its report (a short bound on a loaded host) has
        one too. Where the report exists it names the same process."""
        (pid,) = self.started[str(self.report)]
        if self.report.exists():
            assert self.info()["pid"] == pid
        return pid

    def of(self, event: str) -> list[dict[str, Any]]:
        return [f for e, f in self.records if e == event]

    async def delegate(self, wait: bool = False, task: str = "hello") -> dict[str, Any]:
        return dict(await self.launcher.delegate("worker", "0.1.0", task, wait, context_id="ctx_p", trust="trusted"))


@pytest.fixture
async def rig(
    tmp_path: Path, roost: StartRoost, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """``await rig(mode, **launcher_kwargs)`` builds a running launcher for one fake mode."""
    url = await roost([PARENT, WORKER], spawn_allow=["orch"])
    door = ScriptedServer()
    await nursery.start(door.serve)
    door.add(*[Reply(ACK) for _ in range(8)])
    async with RoostClient(url) as client:
        credential = await client.register("ses_" + "0" * 32, "orch", "0.1.0")
    made: list[Launcher] = []
    started: dict[str, list[int]] = {}  # report path -> pids of the children started for it
    real_start = parent_module.start

    async def recording_start(child: Any, argv: list[str], *args: Any, **kwargs: Any) -> Any:
        proc = await real_start(child, argv, *args, **kwargs)
        started.setdefault(argv[3], []).append(proc.pid)  # argv: python, fake_child.py, mode, report, ...
        return proc

    monkeypatch.setattr(parent_module, "start", recording_start)

    async def make(mode: str, **kw: Any) -> Rig:
        records: list[tuple[str, dict[str, Any]]] = []
        report = tmp_path / f"report-{len(made)}.json"
        kw.setdefault("bound", 600)
        kw.setdefault("stop_grace", 2.0)
        kw.setdefault("resolve", lambda name, version: ChildArtifact(sha_of(WORKER), WORKER))
        launcher = Launcher(
            manifest=PARENT,
            workdir=tmp_path / "work",
            session_id="ses_" + "0" * 32,
            environ={**ENVIRON, "MURMUR_HOME": os.environ["MURMUR_HOME"]},
            roost_url=url,
            credential=lambda: credential,
            door_url=lambda: door.url,
            book=DelegationBook(lambda event, **f: records.append((event, f))),
            emit=lambda event, **f: records.append((event, f)),
            mur=[sys.executable, str(FAKE), mode, str(report)],
            **kw,
        )
        made.append(launcher)
        await nursery.start(launcher.run)
        return Rig(launcher, door, records, report, started)

    yield make
    for launcher in made:
        with trio.fail_after(15):
            await launcher.stop_all("the test ended")


def proc_bytes(pid: int, part: str) -> bytes:
    """``/proc/<pid>/<part>``."""
    return Path(f"/proc/{pid}/{part}").read_bytes()


def pid_gone(pid: int) -> bool:
    """No process (and no zombie) with this pid."""
    return not Path(f"/proc/{pid}").exists()


async def completion_record(child_dir: Path, *, delivered_set: bool = True) -> dict[str, Any]:
    """completion.json once one of delivered / delivery_error is set (the bound is a hang
    guard: a loaded machine may take seconds to end a child and write it)."""
    with trio.fail_after(90):
        while True:
            data = comp.read_completion(child_dir)
            if data is not None and (not delivered_set or data["delivered"] or data["delivery_error"]):
                return data
            await trio.sleep(0.02)


class TestHelpers:
    def test_names(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Directory names are fresh, scoped names lose their scope, bare names gain local/."""
        a, b = child_dir_name("local/worker"), child_dir_name("worker")
        assert a.startswith("worker-") and len(a) == len("worker-") + 16 and a != b
        assert (capsule_ref("worker"), capsule_ref("team/worker")) == ("local/worker", "team/worker")
        assert mur_command({"MURMUR_MUR_BINARY": "/opt/mur"}) == ["/opt/mur"]
        assert mur_command({})[0].endswith("mur") or mur_command({})[1:] == ["-m", "murmur.cli.mur"]


class TestStarted:
    async def test_started_contract(self, rig: Any, tmp_path: Path) -> None:
        """started: the directory, argv, cwd, the cleared environment, the approval on stdin."""
        r: Rig = await rig("serve-hang")
        result = await r.delegate()
        assert result["status"] == "started", result
        assert set(result) == {
            "capsule", "version", "delegation_id", "session_id", "status", "child_workdir"}
        rel = result["child_workdir"]
        assert rel.startswith(".murmur/children/worker-") and len(Path(rel).name) == len("worker-") + 16
        child_dir = tmp_path / "work" / rel
        assert stat.S_IMODE(child_dir.stat().st_mode) == 0o700
        info = r.info()
        assert info["argv"] == ["run", "--capsule", "local/worker", "--capsule-version", "0.1.0", "--json",
                                "--workdir", str(child_dir), "--no-env-file"]
        assert info["cwd"] == str(child_dir) and info["approval_ok"] and info["lifeline_ok"]
        env = info["env"]
        spawner = json.loads(env.pop("MURMUR_SPAWNER"))
        assert spawner == {"url": r.door.url, "session_id": "ses_" + "0" * 32, "context_id": "ctx_p",
                           "trust": "trusted", "delegation_id": result["delegation_id"]}
        env.pop("MURMUR_SPAWNER_LIFELINE")
        assert tracectx.parse(env.pop("TRACEPARENT")) is not None  # the child joins a trace (spec/trace.md)
        unit = env.pop("MURMUR_CONTAINMENT_UNIT", None)
        if containment.here().class_name == "cgroup":  # the child runs in the unit it is told
            assert unit is not None and pid_cgroup(info["pid"]) == unit
        else:
            assert unit is None
        assert env == {"SHARED": "shared", "MURMUR_HOME": os.environ["MURMUR_HOME"], "PATH": "/usr/bin:/bin",
                       "HOME": "/home/op", "MURMUR_ROOST_URL": r.launcher.roost_url}
        for part in ("environ", "cmdline"):
            raw = proc_bytes(info["pid"], part)
            assert b"msa1." not in raw and b"msc1." not in raw
        (start,) = r.of("delegation_start")
        assert start == {"delegation_id": result["delegation_id"], "capsule": "worker", "version": "0.1.0",
                         "child_session_id": "ses_" + "f" * 32, "child_workdir": rel}
        assert r.launcher.live == 1
        await r.launcher.stop_all("the test ended")
        assert pid_gone(info["pid"]) and r.launcher.live == 0
        data = await completion_record(child_dir)
        assert (data["status"], data["reported_by"], data["delivered"]) == ("terminated", "launcher", False)
        assert data["delivery_error"].startswith("not posted")
        assert r.door.requests == []  # posted to nobody
        (closed,) = r.of("delegation")
        assert (closed["outcome"], closed["delegation_id"]) == ("terminated", result["delegation_id"])


class TestLaunchFailures:
    @pytest.mark.parametrize(
        ("mode", "kw", "reason"),
        [
            ("exit-early", {}, "the child exited with status 3 before reporting ready: boom: no capsule"),
            ("garbage", {}, "the child's first line is not a readiness line"),
            ("nodoor", {}, "the child reported no door"),
            ("silent", {"launch_bound": 0.5}, "the child did not report ready within 0.5 s"),
            ("door-refuses", {"delivery_bound": 0.5}, "the child did not accept its task within 0.5 s"),
            ("serve-reject", {}, "the child did not take its task (task rejected: capsule is busy)"),
        ],
    )
    async def test_short_of_started_fails_and_reaps(
        self, rig: Any, tmp_path: Path, mode: str, kw: dict[str, Any], reason: str
    ) -> None:
        """Anything short of holding its task: failed in the same call, the child stopped and reaped."""
        r: Rig = await rig(mode, **kw)
        result = await r.delegate()
        assert (result["status"], result["output"]) == ("failed", reason)
        assert "child_workdir" not in result
        assert pid_gone(r.pid()) and r.launcher.live == 0
        (call,) = r.of("delegation")
        assert (call["outcome"], call["reason"], call["delegation_id"]) == ("failed", reason, result["delegation_id"])
        (child_dir,) = (tmp_path / "work" / ".murmur" / "children").iterdir()
        data = comp.read_completion(child_dir)
        assert data is not None and (data["reported_by"], data["status"]) == ("launcher", "terminated")
        assert r.door.requests == []
        assert await parent_figures(r) == (0, 1)  # its mur-roost slot given back (issue 11)


async def parent_figures(r: Rig) -> tuple[int, int]:
    """The delegating session's (live_children, live_capsules) at its mur-roost."""
    async with RoostClient(r.launcher.roost_url) as client:
        figures = await client.status(r.launcher.session_id)
    assert figures is not None
    return figures.live_children, figures.live_capsules


class TestSlotsGivenBack:
    """A launch that falls short leaves nothing at mur-roost either (issue 11, item 5)."""

    async def test_four_failures_then_a_grant_at_once(self, rig: Any) -> None:
        """--max-concurrent 4: four children failing at launch, then a fifth is granted and starts."""
        failing: Rig = await rig("exit-early")
        for _ in range(4):
            result = await failing.delegate()
            assert result["status"] == "failed", result
            assert await parent_figures(failing) == (0, 1)
        healthy: Rig = await rig("serve-hang")
        result = await healthy.delegate()
        assert result["status"] == "started", result
        assert await parent_figures(healthy) == (1, 2)  # a reservation: the stand-in never registers

    async def test_not_installed_gives_the_slot_back(self, rig: Any) -> None:
        """Nothing started at all (the artifact is not in this host's store): the slot goes back."""
        r: Rig = await rig("serve-hang", resolve=lambda name, version: None)
        result = await r.delegate()
        assert result["status"] == "failed"
        assert "is not installed in this host's global store" in result["output"]
        assert await parent_figures(r) == (0, 1)

    async def test_cancelled_launch_gives_the_slot_back(self, rig: Any) -> None:
        """The delegating task ends while the child starts: stopped, reaped, its slot back."""
        r: Rig = await rig("silent")
        with trio.move_on_after(1.0) as scope:
            await r.delegate()
        assert scope.cancelled_caught
        assert r.launcher.live == 0 and pid_gone(r.pid())  # the clean-up ran before start() returned
        assert await parent_figures(r) == (0, 1)


class TestWatch:
    async def test_crash_after_start_is_reported(self, rig: Any, tmp_path: Path) -> None:
        """A child that exits without a completion is reported crashed, with status and stderr."""
        r: Rig = await rig("serve-crash")
        result = await r.delegate()
        child_dir = tmp_path / "work" / result["child_workdir"]
        data = await completion_record(child_dir)
        assert (data["status"], data["reported_by"], data["delivered"]) == ("crashed", "launcher", True)
        assert "(status 3)" in data["detail"] and "fatal: lost" in data["detail"]
        (post,) = r.door.requests
        assert post.headers["x-murmur-delegation-id"] == result["delegation_id"]
        assert post.headers["x-murmur-completion-session"] == "ses_" + "0" * 32
        assert json.loads(post.body["params"]["message"]["parts"][0]["text"])["status"] == "crashed"

    async def test_child_watch_expiry_names_the_bound(self, rig: Any, tmp_path: Path) -> None:
        """A child still running at the bound is ended; the terminated completion names the bound."""
        r: Rig = await rig("serve-hang", bound=1)
        result = await r.delegate()
        child_dir = tmp_path / "work" / result["child_workdir"]
        data = await completion_record(child_dir)
        assert (data["status"], data["reported_by"], data["delivered"]) == ("terminated", "launcher", True)
        assert "lifecycle.delegation_deadline_secs (1 s)" in data["detail"]
        assert pid_gone(r.info()["pid"])

    async def test_stubborn_child_is_killed(self, rig: Any) -> None:
        """A child that ignores SIGTERM is killed after the grace and reaped."""
        r: Rig = await rig("serve-stubborn", stop_grace=0.3)
        await r.delegate()
        with trio.fail_after(5):
            await r.launcher.stop_all("the test ended")
        assert pid_gone(r.info()["pid"])


class TestWait:
    async def test_answer_then_release(self, rig: Any, tmp_path: Path) -> None:
        """wait=True: the answer read with GetTask, the call recorded completed, the child left to finish."""
        r: Rig = await rig("serve-answer")
        result = await r.delegate(wait=True, task="sum it")
        assert (result["status"], result["output"]) == ("completed", "fake answer: sum it")
        call = [f for f in r.of("delegation") if f["outcome"] == "completed"]
        assert len(call) == 1 and call[0]["reason"] is None
        child_dir = next((tmp_path / "work" / ".murmur" / "children").iterdir())
        data = await completion_record(child_dir)  # the stand-in writes none: left to finish, then crashed
        assert data["status"] == "crashed" and pid_gone(r.info()["pid"])

    async def test_answer_from_the_result_file(self, rig: Any) -> None:
        """A child that ends right after its task: the answer is read from its result file."""
        r: Rig = await rig("serve-exit")
        result = await r.delegate(wait=True, task="t1")
        assert (result["status"], result["output"]) == ("completed", "from the file: t1")

    async def test_step_bound_ends_the_child(self, rig: Any, tmp_path: Path) -> None:
        """The waiting caller's bound passes: timed_out recorded, the child ended, posted to nobody."""
        r: Rig = await rig("serve-hang")

        emit = r.launcher._emit
        bounds: list[trio.CancelScope] = []  # the caller's scope, its deadline set at the start

        def watching(event: str, **fields: Any) -> None:
            emit(event, **fields)
            if event == "delegation_start":  # the caller's bound: 0.5 s from the start of the wait,
                bounds[0].deadline = trio.current_time() + 0.5  # however long the launch took

        r.launcher._emit = watching
        terminated = trio.Event()
        closing = r.launcher.book._emit

        def booked(event: str, **fields: Any) -> None:
            closing(event, **fields)
            if event == "delegation" and fields.get("outcome") == "terminated":
                terminated.set()

        r.launcher.book._emit = booked
        with pytest.raises(trio.TooSlowError), trio.fail_after(60) as bound:
            bounds.append(bound)
            await r.delegate(wait=True)
        child_dir = next((tmp_path / "work" / ".murmur" / "children").iterdir())
        data = await completion_record(child_dir)
        assert (data["status"], data["delivered"]) == ("terminated", False)
        # The completion is claimed before the child is terminated, and the delegation's
        # ``terminated`` record comes once it is (a grace on a loaded host): wait for the record.
        with trio.fail_after(r.launcher.stop_grace + 60):  # a hang guard
            await terminated.wait()
        outcomes = [f["outcome"] for f in r.of("delegation")]
        assert "timed_out" in outcomes and "terminated" in outcomes
        with trio.fail_after(r.launcher.stop_grace + 60):  # stop_all bounds itself; a hang guard
            await r.launcher.stop_all("the test ended")  # waits for the child already stopping
        assert r.launcher.live == 0 and pid_gone(r.info()["pid"])


class TestRoostAnswers:
    async def test_unreachable_roost_fails_the_call(self, rig: Any) -> None:
        """No daemon answering /spawn: failed, naming why, nothing started."""
        r: Rig = await rig("serve-hang")
        with trio.socket.socket() as s:
            await s.bind(("127.0.0.1", 0))
            r.launcher.roost_url = f"http://127.0.0.1:{s.getsockname()[1]}"
        result = await r.delegate()
        assert result["status"] == "failed" and "did not answer" in result["output"]
        assert not r.report.exists()


def _idle_launcher(tmp_path: Path, records: list[tuple[str, dict[str, Any]]]) -> Launcher:
    """A launcher that nothing runs (no roost, no child): for the bounds under MockClock."""
    return Launcher(
        manifest=PARENT,
        workdir=tmp_path / "work",
        session_id="ses_" + "0" * 32,
        environ=ENVIRON,
        roost_url="http://127.0.0.1:9",
        credential=lambda: "never used",
        door_url=lambda: None,
        book=DelegationBook(lambda event, **f: records.append((event, f))),
        emit=lambda event, **f: records.append((event, f)),
        bound=600,
        mur=["/bin/false"],
    )


class TestBoundsUnderMockClock:
    async def test_launcher_that_never_runs_fails_the_call(
        self, tmp_path: Path, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A launcher not running within 5 s: the call is failed (a result, never TooSlowError,
        which a plan step would read as its own timeout)."""
        records: list[tuple[str, dict[str, Any]]] = []
        launcher = _idle_launcher(tmp_path, records)
        result = await launcher.delegate("worker", "0.1.0", "t", True, context_id="ctx_p", trust="trusted")
        assert trio.current_time() == pytest.approx(5)
        assert result == {
            "capsule": "worker",
            "version": "0.1.0",
            "status": "failed",
            "output": "this session's delegation launcher did not start within 5 s",
        }
        ((event, fields),) = records
        assert (event, fields["outcome"], fields["reason"]) == ("delegation", "failed", result["output"])

    @pytest.mark.parametrize("grouped", [False, True])
    @pytest.mark.parametrize(("how", "outcome", "stop"), [
        ("deadline", "timed_out", "the capsule step timed out"),
        ("deadline set during the wait", "timed_out", "the capsule step timed out"),
        ("explicit", "failed", "the delegating task ended"),
    ])
    async def test_waiting_call_told_by_the_cancel_reason(
        self, tmp_path: Path, autojump_clock: trio.testing.MockClock, how: str, outcome: str, stop: str, grouped: bool
    ) -> None:
        """A waiting call cut short: ``timed_out`` when a deadline of the caller's scope fell
        (even one set after the wait began), ``failed`` when the caller was cancelled otherwise;
        a nursery grouping the cancellation changes nothing."""
        from murmur.delegation.book import Entry
        from murmur.delegation.child_process import Child, Ready

        records: list[tuple[str, dict[str, Any]]] = []
        launcher = _idle_launcher(tmp_path, records)
        entry = launcher.book.open(Entry("dlg_1", "worker", "0.1.0", "ctx_p", "trusted", ".murmur/children/w"))
        child = Child(entry, tmp_path / "w", "worker", "0.1.0", "t")

        async def never_answers(child: Child, ready: Ready) -> tuple[str, str]:
            if grouped:
                async with trio.open_nursery() as n:
                    n.start_soon(trio.sleep_forever)
                    await trio.sleep_forever()
            await trio.sleep_forever()
            raise AssertionError("sleep_forever returned")

        async def caller_acts(scope: trio.CancelScope) -> None:
            if how == "explicit":
                await trio.sleep(3)
                scope.cancel()
            elif how == "deadline set during the wait":
                await trio.sleep(1)
                scope.deadline = trio.current_time() + 2

        launcher._answer = never_answers  # type: ignore[method-assign]
        ready = Ready("ses_child", "http://127.0.0.1:9", None, "tsk_1")
        with trio.CancelScope(deadline=3 if how == "deadline" else math.inf) as caller:
            async with trio.open_nursery() as n:
                n.start_soon(caller_acts, caller)
                await launcher._wait_for_answer(child, ready, {"capsule": "worker", "version": "0.1.0"})
        assert caller.cancelled_caught and trio.current_time() == pytest.approx(3)
        assert child.stop_reason == stop
        assert [f["outcome"] for e, f in records if e == "delegation"] == [outcome]
