"""Lifecycle matrix, wind-down, deadline, guard and trace tests of one in-process session."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from murmur.session.running_record import list_running, record_path
from murmur.session.trace import TraceWriteError, read_trace
from murmur.session.winddown import lifeline_wind_down, signal_wind_down
from murmur.workload import TaskContext, TaskOutcome

from .helpers import (
    CrashWorkload,
    EchoWorkload,
    FailWorkload,
    GateWorkload,
    SleepWorkload,
    make_setup,
    manifest,
    result,
    running,
    send_params,
)


def events(h: Any) -> list[dict[str, Any]]:
    return read_trace(h.session.setup.records.trace)


def types(h: Any) -> list[str]:
    return [str(e["event_type"]) for e in events(h)]


class TestLaunchTask:
    async def test_task_run_answers(self, tmp_path: Path) -> None:
        """--task: the task runs, result.txt holds the answer, the session ends ok."""
        setup = make_setup(tmp_path, manifest(acceptance="queue", after="sleep"), EchoWorkload(), task_text="hello")
        async with running(setup) as h:
            s = await h.wait()
        rec = setup.records
        assert (s.status, s.exit_code, s.diagnostic) == ("ok", 0, None)
        assert rec.result.read_text() == "echo: hello\n"
        assert rec.task_md.read_text() == "hello"
        assert types(h) == ["session_start", "task_start", "task_end", "session_end"]
        ev = events(h)
        assert ev[0]["parent_id"] is None and ev[1]["parent_id"] == ev[0]["event_id"]
        assert ev[2]["parent_id"] == ev[1]["event_id"] and ev[3]["parent_id"] == ev[0]["event_id"]
        assert ev[1]["origin"] == "user" and ev[1]["lane"] == "user" and ev[1]["source"] == "task_md"
        assert ev[2]["exit_status"] == "ok" and ev[3]["exit_status"] == "ok"
        assert ev[0]["capsule_name"] == "echo"
        assert not record_path(setup.session_id).exists()

    async def test_duration_ignores_a_wall_clock_step(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """duration_ms is measured on the monotonic clock: the wall clock stepping back an hour
        during the session (an NTP step) changes neither the summary nor session_end."""
        import time

        wall = time.time

        class StepsTheWallClock:
            async def run_task(self, ctx: TaskContext) -> TaskOutcome:
                monkeypatch.setattr(time, "time", lambda: wall() - 3600.0)
                await trio.lowlevel.checkpoint()
                return TaskOutcome("ok", "stepped")

        setup = make_setup(tmp_path, manifest(acceptance="queue", after="sleep"), StepsTheWallClock(), task_text="x")
        async with running(setup) as h:
            s = await h.wait()
        assert s.status == "ok" and 0 <= s.duration_ms < 600_000
        assert events(h)[-1]["duration_ms"] == s.duration_ms

    async def test_failure(self, tmp_path: Path) -> None:
        """A failed deciding task: `error: …`, status failed, exit 1 with E-RUN-040."""
        setup = make_setup(tmp_path, manifest(), FailWorkload(), task_text="x")
        async with running(setup) as h:
            s = await h.wait()
        assert (s.status, s.exit_code) == ("failed", 1)
        assert s.diagnostic is not None and s.diagnostic.code == "E-RUN-040"
        assert setup.records.result.read_text() == "error: it broke\n"
        assert s.reason == "it broke"

    async def test_workload_crash_fails_task(self, tmp_path: Path) -> None:
        """A workload exception fails the task, never the session process."""
        setup = make_setup(tmp_path, manifest(), CrashWorkload(), task_text="x")
        async with running(setup) as h:
            s = await h.wait()
        assert s.status == "failed"
        assert setup.records.result.read_text().startswith("error: internal error: RuntimeError: kaboom")
        assert "kaboom" in (setup.records.logs / "door.log").read_text()
        assert os.stat(setup.records.logs / "door.log").st_mode & 0o777 == 0o600

    async def test_cancel_launch_task_over_door(self, tmp_path: Path) -> None:
        """CancelTask of the --task task ends the session canceled (exit 1)."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(), gate, task_text="slow")
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            await gate.started.wait()
            tid = (await result(c, "ListTasks", {}))["tasks"][0]["id"]
            await result(c, "CancelTask", {"id": tid})
            s = await h.wait()
        assert (s.status, s.exit_code) == ("canceled", 1)
        assert setup.records.result.read_text() == "canceled: CancelTask\n"
        assert types(h) == ["session_start", "task_start", "task_canceled", "task_end", "session_end"]


class TestLifecycle:
    async def test_single_exit_after_one(self, tmp_path: Path) -> None:
        """single: the session ends after its first A2A task, with that task's status."""
        setup = make_setup(tmp_path, manifest(acceptance="single", after="exit"), EchoWorkload())
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            await result(c, "SendMessage", send_params("one"))
            s = await h.wait()
        assert s.status == "ok" and setup.records.result.read_text() == "echo: one\n"

    async def test_queue_exit_deciding_failure(self, tmp_path: Path) -> None:
        """queue+exit: the first A2A task decides; a failure exits 1."""
        setup = make_setup(tmp_path, manifest(acceptance="queue", after="exit"), FailWorkload())
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            await result(c, "SendMessage", send_params("one"))
            s = await h.wait()
        assert (s.status, s.exit_code) == ("failed", 1)

    async def test_queue_sleep_serial_lanes_and_overflow(self, tmp_path: Path) -> None:
        """queue+sleep: one at a time, peer lane before bg, overflow busy, session keeps going."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(acceptance="queue", after="sleep", depth=2, peer=True), gate)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            await result(c, "SendMessage", send_params("first", returnImmediately=True))
            await gate.started.wait()
            await result(c, "SendMessage", send_params("bg", returnImmediately=True))
            peer = {"x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}
            await result(c, "SendMessage", send_params("peer", returnImmediately=True), headers=peer)
            over = await result(c, "SendMessage", send_params("over"))
            assert over["task"]["status"]["state"] == "TASK_STATE_REJECTED"
            for _ in range(3):
                gate.release.set()
                await trio.testing.wait_all_tasks_blocked()
                gate.reset()
            gate.release.set()
            await trio.testing.wait_all_tasks_blocked()
            assert gate.order == ["first", "peer", "bg"]
            assert not h.done.is_set()
        starts = [e for e in events(h) if e["event_type"] == "task_start"]
        assert [(e["origin"], e["trust"], e["lane"]) for e in starts] == [
            ("event", "untrusted", "bg"), ("peer", "trusted", "peer"), ("event", "untrusted", "bg")]
        rejected = [e for e in events(h) if e["event_type"] == "task_rejected"]
        assert rejected[0]["cause"] == "busy" and rejected[0]["reason"] == "task rejected: capsule is busy"

    async def test_peer_refused_without_export(self, tmp_path: Path) -> None:
        """A peer request to a capsule that does not accept peer tasks is 403 peer_not_accepted."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r1 = await c.post("/", json={}, headers={"x-murmur-task-origin": "peer"})
            r2 = await c.post("/", json={"x": 1}, headers={"x-murmur-task-origin": "peer"})
            assert r1.status_code == 403 and r1.json()["error"] == "peer_not_accepted"
            assert r1.content == r2.content and "www-authenticate" not in r1.headers

    async def test_idle_rule(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """single+exit with no message: after 30 s the workload runs once with an empty task."""
        setup = make_setup(tmp_path, manifest(acceptance="single", after="exit"), EchoWorkload())
        async with running(setup) as h:
            t0 = trio.current_time()
            s = await h.wait(timeout=100)
            assert trio.current_time() - t0 == pytest.approx(30.0, abs=0.01)
        assert s.status == "ok" and setup.records.result.read_text() == "echo: \n"
        assert [e["source"] for e in events(h) if e["event_type"] == "task_start"] == ["task_md"]

    async def test_queue_sleep_waits_forever(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """queue+sleep has no idle timeout."""
        setup = make_setup(tmp_path, manifest(acceptance="queue", after="sleep"), EchoWorkload())
        async with running(setup) as h:
            await trio.sleep(3600)
            assert not h.done.is_set()

    async def test_none_with_task(self, tmp_path: Path) -> None:
        """none + --task: runs the task and exits; the door serves no SendMessage."""
        setup = make_setup(tmp_path, manifest(acceptance="none"), EchoWorkload(), task_text="t")
        async with running(setup) as h:
            s = await h.wait()
        assert s.status == "ok"

    async def test_the_delegation_bound_reaches_the_task_context(self, tmp_path: Path) -> None:
        """The bound the composition resolved on the setup is the one a workload sees (issue 31)."""
        seen: list[int] = []

        class Bound(EchoWorkload):
            async def run_task(self, ctx: TaskContext) -> TaskOutcome:
                seen.append(ctx.delegation_bound_secs)
                return await super().run_task(ctx)

        setup = make_setup(tmp_path, manifest(acceptance="none"), Bound(), task_text="t", delegation_bound_secs=7)
        async with running(setup) as h:
            s = await h.wait()
        assert s.status == "ok" and seen == [7]


class TestWindDown:
    async def test_sigterm_while_busy(self, tmp_path: Path) -> None:
        """Wind-down cancels the live task, refuses queued ones, ends canceled (exit 1)."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(), gate)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            live = (await result(c, "SendMessage", send_params("live", returnImmediately=True)))["task"]["id"]
            await gate.started.wait()
            queued = (await result(c, "SendMessage", send_params("queued", returnImmediately=True)))["task"]["id"]
            h.session.wind_down(signal_wind_down("SIGTERM"))
            h.session.wind_down(lifeline_wind_down(trace_event="formation_ended", detail="x"))  # ignored
            s = await h.wait()
        live_task, queued_task = h.session.get_task(live), h.session.get_task(queued)
        assert live_task is not None and queued_task is not None
        assert live_task.state.value == "canceled"
        assert queued_task.state.value == "rejected"
        assert queued_task.status_message == "task rejected: the session is closing"
        assert (s.status, s.exit_code) == ("canceled", 1)
        assert setup.records.result.read_text() == "canceled: the session received SIGTERM\n"
        assert "formation_ended" not in types(h)
        assert types(h)[-1] == "session_end"
        rej = [e for e in events(h) if e["event_type"] == "task_rejected"]
        assert rej[0]["cause"] == "session_stopped"

    async def test_sigterm_idle_is_ok(self, tmp_path: Path) -> None:
        """A session wound down while idle ends ok (exit 0)."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h:
            h.session.wind_down(signal_wind_down("SIGTERM"))
            s = await h.wait()
        assert (s.status, s.exit_code) == ("ok", 0)

    async def test_formation_lifeline_busy(self, tmp_path: Path) -> None:
        """A formation lifeline: formation_ended first, task canceled, exit 0."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(), gate, task_text="work")
        async with running(setup) as h:
            await gate.started.wait()
            h.session.wind_down(
                lifeline_wind_down(
                    trace_event="formation_ended", detail="the formation ended", busy_status="formation_ended",
                    trace_fields={"formation_id": "frm_x"},
                )
            )
            s = await h.wait()
        assert (s.status, s.exit_code) == ("formation_ended", 0)
        t = types(h)
        assert t.index("formation_ended") < t.index("task_canceled")
        assert setup.records.result.read_text() == "canceled: the formation ended\n"

    async def test_deadline(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """--deadline: deadline_reached first, E-RUN-053, exit 1, whatever was running."""
        import time

        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(), gate, task_text="work", deadline=time.time() + 90)
        async with running(setup) as h:
            s = await h.wait(timeout=200)
        assert (s.status, s.exit_code) == ("deadline_reached", 1)
        assert s.diagnostic is not None and s.diagnostic.code == "E-RUN-053"
        t = types(h)
        assert t.index("deadline_reached") < t.index("task_canceled")
        assert events(h)[-1]["exit_status"] == "deadline_reached"

    async def test_deadline_is_on_the_trio_clock(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """The --deadline moment is converted to Trio time once: the wind-down starts at that
        virtual moment (90 s after the start), not after 90 real seconds."""
        import time

        at: list[float] = []
        t0 = trio.current_time()
        setup = make_setup(tmp_path, manifest(), GateWorkload(), task_text="work", deadline=time.time() + 90)
        setup.wind_down_hooks.append(lambda reason: at.append(trio.current_time()))
        async with running(setup) as h:
            s = await h.wait(timeout=200)
        assert s.status == "deadline_reached"
        assert at == [pytest.approx(t0 + 90, abs=1.0)]
        assert h.session.deadline_at == pytest.approx(t0 + 90, abs=1.0)

    async def test_deadline_idle_session(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """An idle session (no task) ends deadline_reached at its deadline, E-RUN-053."""
        import time

        setup = make_setup(tmp_path, manifest(), EchoWorkload(), no_idle_timeout=True, deadline=time.time() + 600)
        async with running(setup) as h:
            s = await h.wait(timeout=700)
        assert (s.status, s.exit_code) == ("deadline_reached", 1)
        assert types(h) == ["session_start", "deadline_reached", "session_end"]

    async def test_session_ending_before_its_deadline(
        self, tmp_path: Path, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A session whose task ends before the deadline ends ok: the deadline scope never
        fires, even though the records flush waits off the event loop (virtual time may jump)."""
        import time

        setup = make_setup(tmp_path, manifest(), EchoWorkload(), task_text="hi", deadline=time.time() + 90)
        async with running(setup) as h:
            s = await h.wait(timeout=200)
        assert (s.status, s.exit_code) == ("ok", 0)
        assert "deadline_reached" not in types(h)
        assert setup.records.result.read_text() == "echo: hi\n"

    async def test_watcher_triggers(self, tmp_path: Path) -> None:
        """A setup watcher can wind the session down (the lifeline mechanism)."""
        go = trio.Event()

        async def watcher(ctl: Any) -> None:
            await go.wait()
            ctl.trigger(lifeline_wind_down(trace_event="spawner_ended", detail="the spawner ended"))

        setup = make_setup(tmp_path, manifest(), EchoWorkload(), watchers=[watcher])
        async with running(setup) as h:
            go.set()
            s = await h.wait()
        assert s.status == "ok" and "spawner_ended" in types(h)

    async def test_end_hook_sees_summary(self, tmp_path: Path) -> None:
        """End hooks run after the last task, before session_end, with the final status."""
        seen: list[tuple[str, bool]] = []

        async def hook(summary: Any) -> None:
            seen.append((summary.status, summary.result_path is not None))

        setup = make_setup(tmp_path, manifest(), FailWorkload(), task_text="x", end_hooks=[hook])
        async with running(setup) as h:
            await h.wait()
        assert seen == [("failed", True)]

    async def test_start_hook_refusal(self, tmp_path: Path) -> None:
        """A start hook's DiagnosticError refuses the launch before readiness."""
        from murmur.diagnostics import error
        from murmur.errors import DiagnosticError

        async def hook(session: Any) -> None:
            raise DiagnosticError(error("E-RUN-019", "mur-roost could not be reached"))

        setup = make_setup(tmp_path, manifest(), EchoWorkload(), start_hooks=[hook])
        async with running(setup) as h:
            s = await h.wait()
        assert s.exit_code == 1 and s.diagnostic is not None and s.diagnostic.code == "E-RUN-019"
        assert h.ready == {}

    async def test_guard_fires_on_stuck_teardown(self, tmp_path: Path) -> None:
        """The guard calls the exit with 143 when teardown hangs past its bound."""
        fired = threading.Event()
        codes: list[int] = []
        unstick = trio.Event()

        class Stuck:
            started = trio.Event()

            async def run_task(self, ctx: TaskContext) -> TaskOutcome:
                self.started.set()
                with trio.CancelScope(shield=True):
                    await unstick.wait()
                return TaskOutcome("ok", "late")

        def exit_fn(code: int) -> None:
            codes.append(code)
            fired.set()

        stuck = Stuck()
        setup = make_setup(tmp_path, manifest(), stuck, task_text="x", guard=0.2, exit_fn=exit_fn)
        async with running(setup) as h:
            await stuck.started.wait()
            h.session.wind_down(signal_wind_down("SIGTERM"))
            await trio.to_thread.run_sync(fired.wait, 10)
            unstick.set()
            s = await h.wait()
        assert codes == [143]
        assert s.status == "canceled"


class TestRunningRecord:
    async def test_record_while_serving(self, tmp_path: Path) -> None:
        """The running record exists (0600) while the door serves and names this process."""
        setup = make_setup(tmp_path, manifest(), EchoWorkload())
        async with running(setup) as h:
            p = record_path(setup.session_id)
            assert os.stat(p).st_mode & 0o777 == 0o600
            data = json.loads(p.read_text())
            assert data["url"] == h.url and data["pid"] == os.getpid()
            assert [r.session_id for r in list_running().live] == [setup.session_id]
        assert not p.exists()

    async def test_tokens_only_when_authenticated(self, tmp_path: Path) -> None:
        """An authenticated door puts its tokens in the readiness object and the record."""
        setup = make_setup(tmp_path, manifest(auth={"reader": ("GetTask",)}), EchoWorkload())
        async with running(setup) as h:
            data = json.loads(record_path(setup.session_id).read_text())
            assert set(h.ready["tokens"]) == {"operator", "reader"}
            assert data["door_token"] == h.ready["tokens"]["operator"]
            assert data["credentials"] == {"reader": h.ready["tokens"]["reader"]}
        trace = setup.records.trace.read_text()
        assert h.ready["tokens"]["operator"] not in trace


class TestTraceFailure:
    async def test_trace_failure_ends_session(self, tmp_path: Path) -> None:
        """A failed trace write ends the session failed with E-RUN-007."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(), gate, task_text="x")
        async with running(setup) as h:
            await gate.started.wait()
            h.session.trace.close()
            with pytest.raises(TraceWriteError):
                h.session.trace.emit("probe", parent_id=None)
            s = await h.wait()
        assert s.status == "failed" and s.diagnostic is not None and s.diagnostic.code == "E-RUN-007"


def plan_sleep_workload(m: Any, root: Path) -> Any:
    """The real plan workload: one shell step sleeping 5 ms (a process per task)."""
    from murmur.plan import PlanWorkload, parse_plan

    plan = parse_plan('steps:\n  - id: nap\n    shell: [sleep, "0.005"]\noutput: "echo: {{ task }}"\n', m)
    return PlanWorkload(plan, root)


class HeldWorkload:
    """Runs until cancelled (the task can only end by a cancel)."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        await trio.Event().wait()
        raise AssertionError("unreachable: the event is never set")


class TestCancelRaces:
    @pytest.mark.parametrize("workload", ["sleep", "plan"])
    @pytest.mark.parametrize("delay_ms", [0, 1, 5, 50])
    async def test_one_terminal_value(self, tmp_path: Path, delay_ms: int, workload: str) -> None:
        """Cancel at various moments after send: the task ends exactly once, consistently."""
        import attrs

        from murmur.manifest.model import Capabilities, ShellCaps

        m = attrs.evolve(manifest(depth=50), capabilities=Capabilities(shell=ShellCaps(allow=("sleep",))))
        if workload == "plan":
            wl: Any = plan_sleep_workload(m, tmp_path)
        elif delay_ms == 0:
            # Held on an event (never released), not a real 5 ms sleep: on a loaded machine
            # the sleep could end before the cancel arrives, and the case asserts a cancel.
            wl = HeldWorkload()
        else:
            wl = SleepWorkload(0.005)
        setup = make_setup(tmp_path, m, wl)
        finals: set[str] = set()
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            for _ in range(8):
                tid = (await result(c, "SendMessage", send_params("r", returnImmediately=True)))["task"]["id"]
                await trio.sleep(delay_ms / 1000)
                r = (await c.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": tid}},
                                  headers={"A2A-Version": "1.0"})).json()
                task = h.session.get_task(tid)
                assert task is not None
                while not task.terminal:
                    await task.changed().wait()
                state = (await result(c, "GetTask", {"id": tid}))["status"]["state"]
                if "error" in r:
                    assert r["error"]["code"] == -32002 and state == "TASK_STATE_COMPLETED"
                else:
                    assert r["result"]["status"]["state"] == "TASK_STATE_CANCELED" == state
                terminal_events = [e for e in task.events if e.state.terminal and e.kind == "status"]
                assert len(terminal_events) == 1
                finals.add(state)
                await h.session.flush_records()
                body = setup.records.task_result(tid).read_text()
                assert body.startswith("canceled:") == (state == "TASK_STATE_CANCELED")
        if delay_ms == 0:
            assert "TASK_STATE_CANCELED" in finals
            if workload == "sleep":
                assert finals == {"TASK_STATE_CANCELED"}  # held: only a cancel can end it


async def test_a_cancelled_session_closes_its_door_log(tmp_path: Path) -> None:
    """A session whose owner cancels it (a launcher cutting a member's start that was too
    slow, in-process) still detaches and closes ``logs/door.log``: no handler left on the
    door's logger, no unclosed file (the ResourceWarning a leaked handler gave)."""
    import logging

    from murmur.session import Session

    setup = make_setup(tmp_path, manifest(), EchoWorkload(), no_idle_timeout=True)
    door_log = setup.records.logs / "door.log"
    logger = logging.getLogger("murmur.session.door")
    up = trio.Event()
    with trio.fail_after(60):
        async with trio.open_nursery() as n:
            n.start_soon(Session(setup).run, lambda _ready: up.set())
            await up.wait()
            assert any(getattr(h, "baseFilename", None) == str(door_log) for h in logger.handlers)
            n.cancel_scope.cancel()
    assert door_log.exists()
    assert not any(getattr(h, "baseFilename", None) == str(door_log) for h in logger.handlers)
