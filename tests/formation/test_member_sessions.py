"""Members as in-process sessions with real doors: calls, lifelines, door refusals over HTTP.

Each member is prepared by the real ``mur run`` preparation (the contributor runs) from pipes
a launcher double holds; doors are real Quart-Trio servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from murmur import lifeline
from murmur.formation.wire import channel
from murmur.formation.wire.edge_tokens import FormationKey
from murmur.session.trace import read_trace

from ._launcher_double import (
    LauncherDouble,
    Pipes,
    lead_capsule,
    prepare_member,
    run_member,
    worker_capsule,
)

A2A = {"A2A-Version": "1.0"}


@pytest.fixture(autouse=True)
def fresh_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lifeline claims are per process; each test starts with none."""
    monkeypatch.setattr(lifeline, "_claimed", set())


@pytest.fixture
def launcher() -> Iterator[LauncherDouble]:
    """A launcher double whose pipes are closed after the test."""
    ld = LauncherDouble()
    yield ld
    ld.close()


HANG_GUARD = 150.0
"""Seconds a step may take before the test fails instead of hanging (pytest-timeout is 180)."""


def _sleeping() -> bool:
    """Whether a `sleep 60` (the sleeper plan's step) runs in this process's tree."""
    parents: dict[int, int] = {}
    sleepers: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] == "Z":
            continue
        parents[int(entry.name)] = int(fields[1])
        if cmdline.split(b"\0")[:2] == [b"sleep", b"60"] or cmdline.endswith(b"/sleep\x0060\x00"):
            sleepers.append(int(entry.name))
    me = os.getpid()
    for pid in sleepers:
        seen = 0
        while pid in parents and seen < 64:
            pid, seen = parents[pid], seen + 1
            if pid == me:
                return True
    return False


def hand(launcher: LauncherDouble, p: Pipes) -> None:
    launcher.handed.update({p.channel_r, p.lifeline_r})


def trace(setup: Any) -> list[dict[str, Any]]:
    return read_trace(setup.records.trace)


def types(setup: Any) -> list[str]:
    return [str(e["event_type"]) for e in trace(setup)]


def send(text: str) -> dict[str, Any]:
    return {
        "message": {"messageId": "msg_t", "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": True},
    }


async def rpc(c: httpx.AsyncClient, method: str, params: Any, token: str | None, **headers: str) -> httpx.Response:
    h = {**A2A, **headers}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    return await c.post("/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=h)


class TestCalls:
    async def test_lead_calls_worker(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """A plan `member` step: the worker's answer is the lead's result; records on both sides."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(wp), tmp_path / "w")
        lp = launcher.member("lead", ["worker"], entry=True)
        hand(launcher, lp)
        lead = prepare_member(lead_capsule(tmp_path / "src"), launcher.env(lp), tmp_path / "l", task="hello")
        async with run_member(worker) as w:
            async with run_member(lead) as ld:
                await ld.events.wait_for("task_start")  # the call waits for the worker's address
                os.write(lp.channel_w, channel.encode_addresses([channel.Address("worker", w.url)]))
                s = await ld.wait()
            assert (s.status, s.exit_code) == ("ok", 0)
            assert lead.records.result.read_text() == "worker heard: hello\n"
            lp.close_lifeline()
        lead_trace = trace(lead)
        start = lead_trace[0]
        assert (start["formation_member"], start["formation_callees"]) == ("lead", ["worker"])
        assert ld.ready["formation_id"] == launcher.formation_id
        call = next(e for e in lead_trace if e["event_type"] == "member_call")
        assert (call["status"], call["delivered"], call["output"]) == ("completed", True, "worker heard: hello")
        sent = next(e for e in lead_trace if e["event_type"] == "a2a_send")
        assert sent["peer_url"] == "http://worker.formation.invalid"
        received = next(e for e in trace(worker) if e["event_type"] == "a2a_task_received")
        assert received["caller_member"] == "lead" and received["task_id"] == call["member_task_id"]
        port = w.url.rsplit(":", 1)[1]
        for path in (lead.records.trace, worker.records.trace, lead.records.result):
            text = path.read_text()
            assert port not in text and "mft1." not in text

    async def test_busy_worker_is_reoffered(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """A worker holding a task (queue depth 0 left) refuses busy; the call is re-offered."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src", sleeper=True, depth=0), launcher.env(wp), tmp_path / "w")
        lp = launcher.member("lead", ["worker"], entry=True)
        hand(launcher, lp)
        lead = prepare_member(lead_capsule(tmp_path / "src"), launcher.env(lp), tmp_path / "l", task="hello")
        async with run_member(worker) as w, httpx.AsyncClient(base_url=w.url) as c:
            token = launcher.token("scout", "worker")
            r = await rpc(c, "SendMessage", send("occupy"), token, **{"x-murmur-task-origin": "peer"})
            occupying = r.json()["result"]["task"]["id"]
            os.write(lp.channel_w, channel.encode_addresses([channel.Address("worker", w.url)]))
            async with run_member(lead) as ld:
                await ld.events.wait_for("member_call_busy")
                # free the worker: its occupying task is cancelled by the one who started it
                r = await rpc(c, "CancelTask", {"id": occupying}, token)
                assert r.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
                await ld.events.wait_for("member_call_start")
                # the worker now sleeps on the lead's task: end the lead's task by its lifeline
                lp.close_lifeline()
                s = await ld.wait()
        assert (s.status, s.exit_code) == ("formation_ended", 0)
        t = types(lead)
        assert t[1] == "task_start" and t.index("formation_ended") < t.index("task_canceled")
        busy = [e for e in trace(lead) if e["event_type"] == "member_call_busy"]
        assert busy[0]["offer"] == 1 and busy[0]["message"] == "task rejected: capsule is busy"
        call = next(e for e in trace(lead) if e["event_type"] == "member_call")
        assert (call["status"], call["delivered"]) == ("abandoned", False)
        assert lead.records.result.read_text() == "canceled: the formation ended\n"


class TestLifeline:
    async def test_idle_member_ends_ok(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """EOF on an idle member's lifeline: formation_ended first, session_end ok, exit 0."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(wp), tmp_path / "w")
        async with run_member(worker) as w:
            wp.close_lifeline()
            s = await w.wait()
        assert (s.status, s.exit_code) == ("ok", 0)
        ev = trace(worker)
        assert [e["event_type"] for e in ev] == ["session_start", "formation_ended", "session_end"]
        assert ev[1]["formation_id"] == launcher.formation_id

    async def test_busy_member_ends_formation_ended(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """EOF while a task runs: the task is canceled, session_end formation_ended, exit 0.

        Synchronised on what it is about (issue 32 item 4: it failed under load): the EOF is
        given once the task's `sleep 60` is running (the process, found in this process's
        tree), and the end is the session's own; the bounds are hang guards only."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src", sleeper=True), launcher.env(wp), tmp_path / "w",
                                task="nap")
        async with run_member(worker) as w:
            await w.events.wait_for("task_start", timeout=HANG_GUARD)
            with trio.fail_after(HANG_GUARD):
                while not _sleeping():  # noqa: ASYNC110 - /proc has no event
                    await trio.sleep(0.02)
            wp.close_lifeline()
            s = await w.wait(timeout=HANG_GUARD)
            assert not _sleeping()  # the canceled step's process is gone with it
        assert (s.status, s.exit_code) == ("formation_ended", 0)
        t = types(worker)
        assert t.index("formation_ended") < t.index("task_canceled") < t.index("session_end")
        assert worker.records.result.read_text() == "canceled: the formation ended\n"

    async def test_after_sigterm_changes_nothing(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """A lifeline closing after a SIGTERM wind-down writes no formation_ended."""
        from murmur.session.winddown import signal_wind_down

        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(wp), tmp_path / "w")
        async with run_member(worker) as w:
            w.session.wind_down(signal_wind_down("SIGTERM"))
            wp.close_lifeline()
            await w.wait()
        assert "formation_ended" not in types(worker)

    async def test_past_the_deadline(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """A lifeline that closes after the member's deadline: deadline_reached, not formation_ended."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(wp), tmp_path / "w")
        worker.deadline = time.time() + 3600
        async with run_member(worker) as w:
            # as if the deadline had just fallen, before the member's own deadline scope fired
            w.session.deadline_at = trio.current_time() - 1
            wp.close_lifeline()
            s = await w.wait()
        assert s.status == "deadline_reached" and "formation_ended" not in types(worker)

    async def test_just_before_its_own_deadline_moment(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """The launcher's deadline closed the lifeline, but the member converted the same moment
        to a reading a little later than the EOF: still deadline_reached, not formation_ended."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(wp), tmp_path / "w")
        worker.deadline = time.time() + 3600
        async with run_member(worker) as w:
            # the member's moment lands half a second after the EOF (within DEADLINE_EOF_SLACK)
            w.session.deadline_at = trio.current_time() + 0.5
            wp.close_lifeline()
            s = await w.wait()
        assert s.status == "deadline_reached" and "formation_ended" not in types(worker)


class TestDoor:
    async def test_refusals(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """The seed's order at a real door: 401s byte-identical, 403 not_permitted / scope, -32001."""
        wp = launcher.member("worker")
        hand(launcher, wp)
        worker = prepare_member(worker_capsule(tmp_path / "src", depth=4), launcher.env(wp), tmp_path / "w")
        good = launcher.token("lead", "worker")
        tag, payload, sig = good.split(".")
        other_frm = "frm_0199c4e2f1b7712a9d3e4f5061728395"
        bad = {
            "forged": FormationKey.generate().mint(formation=launcher.formation_id, caller="lead", callee="worker"),
            "altered": f"{tag}.{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{sig}",
            "cross-formation": FormationKey.generate().mint(formation=other_frm, caller="lead", callee="worker"),
            "re-encoded": f"{tag}.{payload}=.{sig}",
            "operator-shaped": "mdt1.eyJjIjoib3BlcmF0b3IifQ.AAAA",
        }
        async with run_member(worker) as w, httpx.AsyncClient(base_url=w.url) as c:
            r = await rpc(c, "GetTask", {"id": "x"}, None)
            assert (r.status_code, r.json()["error"]) == (401, "unauthenticated")
            answers = {name: await rpc(c, "SendMessage", send("x"), tok) for name, tok in bad.items()}
            first = answers["forged"]
            assert first.status_code == 401 and first.json()["error"] == "invalid_token"
            for name, resp in answers.items():
                assert (resp.status_code, resp.content, resp.headers.get("www-authenticate")) == (
                    401, first.content, first.headers.get("www-authenticate")), name
            elsewhere = await rpc(c, "GetTask", {"id": "x"}, launcher.token("lead", "critic"))
            assert (elsewhere.status_code, elsewhere.json()["error"]) == (403, "not_permitted")
            assert "'lead'" in elsewhere.json()["message"]
            scope = await rpc(c, "SendStreamingMessage", send("x"), good, **{"x-murmur-task-origin": "peer"})
            assert (scope.status_code, scope.json()["error"]) == (403, "insufficient_scope")
            assert "member:lead" in scope.json()["message"]
            mine = (await rpc(c, "SendMessage", send("x"), good, **{"x-murmur-task-origin": "peer"})).json()
            theirs = (await rpc(c, "SendMessage", send("y"), launcher.token("scout", "worker"),
                                **{"x-murmur-task-origin": "peer"})).json()
            tid, other = mine["result"]["task"]["id"], theirs["result"]["task"]["id"]
            assert (await rpc(c, "GetTask", {"id": other}, good)).json()["error"]["code"] == -32001
            assert (await rpc(c, "CancelTask", {"id": other}, good)).json()["error"]["code"] == -32001
            assert (await rpc(c, "GetTask", {"id": tid}, good)).json()["result"]["id"] == tid
            listed = (await rpc(c, "ListTasks", {}, good)).json()["result"]["tasks"]
            assert [t["id"] for t in listed] == [tid]
        received = [e for e in trace(worker) if e["event_type"] == "a2a_task_received"]
        assert [e["caller_member"] for e in received] == ["lead", "scout"]

    async def test_peer_not_accepted(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """A member that does not serve peers refuses a valid formation call 403 peer_not_accepted."""
        lp = launcher.member("lead", ["worker"])
        hand(launcher, lp)
        lead = prepare_member(lead_capsule(tmp_path / "src"), launcher.env(lp), tmp_path / "l")
        lead.policy = worker_policy(lead)
        async with run_member(lead) as ld, httpx.AsyncClient(base_url=ld.url) as c:
            r = await rpc(c, "SendMessage", send("x"), launcher.token("worker", "lead"), **{"x-murmur-task-origin": "peer"})
            assert (r.status_code, json.loads(r.content)["error"]) == (403, "peer_not_accepted")


def worker_policy(setup: Any) -> Any:
    """A queue + sleep policy, so an in-process member without a task stays up."""
    from murmur.manifest.model import AfterTask, TaskAcceptance
    from murmur.session.lifecycle import Policy

    return Policy.build(setup.manifest.lifecycle, acceptance=TaskAcceptance.QUEUE, after_task=AfterTask.SLEEP,
                        launch_task=False)
