"""Input-required at the door: a task asks, the answer names its taskId, the task resumes.

The workload here is a test workload calling the seam a tool's ``request-input`` import will
call (``TaskContext.request_input``): no upstream built-in tool or plan step can ask
(spec/conversations.md "Input-required").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from murmur.manifest.model import Lifecycle
from murmur.session.winddown import signal_wind_down
from murmur.workload import InputUnavailable, TaskContext, TaskOutcome

from .helpers import error_code, make_setup, manifest, result, rpc, running, send_params, sse_events


class AskWorkload:
    """``ask …`` tasks ask "Which environment?" and answer ``deploying to <answer>``;
    ``hold`` tasks wait until released; anything else echoes."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.asking = trio.Event()  # set as a task asks (it is input-required once this task blocks)
        self.unavailable: list[str] = []

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        if ctx.text.startswith("ask"):
            self.asking.set()
            try:
                answer = await ctx.request_input("Which environment?\nstaging or prod")
            except InputUnavailable as exc:
                self.unavailable.append(str(exc))
                return TaskOutcome("failed", str(exc))
            return TaskOutcome("ok", f"deploying to {answer}")
        if ctx.text == "hold":
            await self.release.wait()
        return TaskOutcome("ok", f"echo: {ctx.text}")


def answer_params(task: dict[str, Any], text: str, **config: Any) -> dict[str, Any]:
    p = send_params(text, **config)
    p["message"]["taskId"] = task["id"]
    p["message"]["contextId"] = task["contextId"]
    return p


async def wait_state(h: Any, task_id: str, state: str) -> None:
    task = h.session.get_task(task_id)
    with trio.fail_after(10):
        while task.state.value != state:
            await task.changed().wait()


def trace(h: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in h.session.setup.records.trace.read_text().splitlines()]


class TestBlocking:
    async def test_ask_answer_complete(self, tmp_path: Path) -> None:
        """Blocking SendMessage stops at INPUT_REQUIRED with the prompt artifact; the answer completes it."""
        async with running(make_setup(tmp_path, manifest(), AskWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            task = (await result(c, "SendMessage", send_params("ask please")))["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert "message" not in task["status"]
            assert task["artifacts"] == [{"artifactId": "prompt", "name": "prompt",
                                          "parts": [{"text": "Which environment?\nstaging or prod", "mediaType": "text/plain"}]}]
            got = await result(c, "GetTask", {"id": task["id"]})
            assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and got["artifacts"][0]["artifactId"] == "prompt"
            done = (await result(c, "SendMessage", answer_params(task, "staging")))["task"]
            assert done["id"] == task["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
            assert [a["artifactId"] for a in done["artifacts"]] == ["response"]
            assert done["artifacts"][0]["parts"] == [{"text": "deploying to staging"}]

    async def test_return_immediately_answer_is_working(self, tmp_path: Path) -> None:
        """With returnImmediately the answer's reply is the task, working again."""
        async with running(make_setup(tmp_path, manifest(), AskWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            task = (await result(c, "SendMessage", send_params("ask")))["task"]
            again = (await result(c, "SendMessage", answer_params(task, "prod", returnImmediately=True)))["task"]
            assert again["status"]["state"] in ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED")
            await wait_state(h, task["id"], "completed")

    async def test_an_answer_bypasses_a_full_door(self, tmp_path: Path) -> None:
        """queue depth 0 and the task waiting: a new task is rejected, the answer is taken."""
        async with running(make_setup(tmp_path, manifest(depth=0), AskWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            task = (await result(c, "SendMessage", send_params("ask")))["task"]
            other = (await result(c, "SendMessage", send_params("new one")))["task"]
            assert other["status"]["state"] == "TASK_STATE_REJECTED"
            done = (await result(c, "SendMessage", answer_params(task, "prod")))["task"]
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"


class TestRefusals:
    async def test_routing_refusals(self, tmp_path: Path) -> None:
        """Unknown task -32001; another contextId -32602; working or ended -32004; no taskId never reaches it."""
        w = AskWorkload()
        async with running(make_setup(tmp_path, manifest(), w)) as h, httpx.AsyncClient(base_url=h.url) as c:
            held = (await result(c, "SendMessage", send_params("hold", returnImmediately=True)))["task"]
            await wait_state(h, held["id"], "working")
            assert await error_code(c, "SendMessage", answer_params(held, "x")) == -32004
            w.release.set()
            await wait_state(h, held["id"], "completed")
            assert await error_code(c, "SendMessage", answer_params(held, "x")) == -32004
            task = (await result(c, "SendMessage", send_params("ask")))["task"]
            wrong = answer_params(task, "x")
            wrong["message"]["contextId"] = "ctx_other"
            assert await error_code(c, "SendMessage", wrong) == -32602
            unknown = answer_params(task, "x")
            unknown["message"]["taskId"] = "tsk_nope"
            assert await error_code(c, "SendMessage", unknown) == -32001
            plain = send_params("no task id", returnImmediately=True)
            plain["message"]["contextId"] = task["contextId"]
            assert (await result(c, "SendMessage", plain))["task"]["id"] != task["id"]  # queued behind it
            assert h.session.get_task(task["id"]).state.value == "input-required"
            assert (await result(c, "SendMessage", answer_params(task, "prod")))["task"]["status"]["state"] == \
                "TASK_STATE_COMPLETED"

    async def test_a_local_task_cannot_ask(self, tmp_path: Path) -> None:
        """A --task run: request_input fails at once (nobody can answer)."""
        w = AskWorkload()
        m = attrs.evolve(manifest(acceptance="single", after="exit"))
        async with running(make_setup(tmp_path, m, w, task_text="ask")) as h:
            summary = await h.wait()
        assert summary.status == "failed"
        assert w.unavailable == ["request-input is not available outside an A2A task context"]


class TestStreams:
    async def test_stream_and_subscriber_see_every_frame(self, tmp_path: Path) -> None:
        """The stream stays open through input-required; SubscribeToTask joined while waiting sees the rest."""
        w = AskWorkload()
        async with running(make_setup(tmp_path, manifest(), w)) as h, \
                httpx.AsyncClient(base_url=h.url, timeout=20) as c:
            frames: list[dict[str, Any]] = []
            sub: list[dict[str, Any]] = []

            async def stream() -> None:
                r = await rpc(c, "SendStreamingMessage", send_params("ask"))
                frames.extend(sse_events(r.text))

            async with trio.open_nursery() as n:
                n.start_soon(stream)
                with trio.fail_after(10):
                    await w.asking.wait()
                tasks = h.session.all_tasks()
                assert tasks[0].state.value == "input-required"
                tid = tasks[0].id

                joined = trio.Event()

                async def subscribe() -> None:
                    body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": tid}}
                    async with c.stream("POST", "/", json=body, headers={"A2A-Version": "1.0"}) as r:
                        async for line in r.aiter_lines():
                            if line.startswith("data:"):
                                sub.append(json.loads(line[5:]))
                                joined.set()

                n.start_soon(subscribe)
                with trio.fail_after(10):
                    await joined.wait()  # the subscriber has its snapshot while the task waits
                task_json = {"id": tid, "contextId": tasks[0].context_id}
                await result(c, "SendMessage", answer_params(task_json, "prod", returnImmediately=True))

        def kinds(events: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
            out = []
            for e in events:
                res = e["result"]
                if "task" in res:
                    out.append(("task", res["task"]["status"]["state"], None))
                elif "statusUpdate" in res:
                    st = res["statusUpdate"]["status"]
                    msg = st.get("message", {}).get("parts", [{}])[0].get("text")
                    out.append(("status", st["state"], msg))
                else:
                    out.append(("artifact", res["artifactUpdate"]["artifact"]["artifactId"], None))
            return out

        got = kinds(frames)
        assert got[0][0] == "task" and ("status", "TASK_STATE_WORKING", None) in got[:3]
        assert got[-4:] == [
            ("status", "TASK_STATE_INPUT_REQUIRED", "Which environment?\nstaging or prod"),
            ("status", "TASK_STATE_WORKING", "resumed"),
            ("artifact", "response", None),
            ("status", "TASK_STATE_COMPLETED", "deploying to prod"),
        ]
        assert kinds(sub) == [
            ("task", "TASK_STATE_INPUT_REQUIRED", None),
            ("status", "TASK_STATE_WORKING", "resumed"),
            ("artifact", "response", None),
            ("status", "TASK_STATE_COMPLETED", "deploying to prod"),
        ]


class TestEnds:
    async def test_cancel_while_waiting_is_phase_input(self, tmp_path: Path) -> None:
        """CancelTask while waiting: canceled, task_canceled phase input, the prompt artifact gone."""
        async with running(make_setup(tmp_path, manifest(), AskWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            task = (await result(c, "SendMessage", send_params("ask")))["task"]
            got = await result(c, "CancelTask", {"id": task["id"]})
            assert got["status"]["state"] == "TASK_STATE_CANCELED" and "artifacts" not in got
            await h.session.flush_records()
            (canceled,) = [r for r in trace(h) if r["event_type"] == "task_canceled"]
            assert canceled["phase"] == "input"

    async def test_input_timeout_fails_the_task(self, tmp_path: Path) -> None:
        """input_timeout_secs: 1 and no answer: failed input-timeout, task_failed cause input_timeout."""
        m = attrs.evolve(manifest(), lifecycle=attrs.evolve(manifest().lifecycle, input_timeout_secs=1))
        assert isinstance(m.lifecycle, Lifecycle)
        async with running(make_setup(tmp_path, m, AskWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            task = (await result(c, "SendMessage", send_params("ask")))["task"]
            await wait_state(h, task["id"], "failed")
            got = await result(c, "GetTask", {"id": task["id"]})
            assert got["status"]["state"] == "TASK_STATE_FAILED"
            assert got["status"]["message"]["parts"] == [{"text": "input-timeout"}]
            assert await error_code(c, "SendMessage", answer_params(task, "late")) == -32004
            await h.session.flush_records()
            records = trace(h)
            (failed,) = [r for r in records if r["event_type"] == "task_failed"]
            assert (failed["cause"], failed["reason"]) == ("input_timeout", "input-timeout")
            (end,) = [r for r in records if r["event_type"] == "task_end"]
            assert end["exit_status"] == "failed"

    async def test_wind_down_while_waiting_ends_the_task_and_the_blocked_call(self, tmp_path: Path) -> None:
        """SIGTERM while a task waits: a blocked answer-less stream gets the terminal state; phase input."""
        w = AskWorkload()
        async with running(make_setup(tmp_path, manifest(), w)) as h, httpx.AsyncClient(base_url=h.url, timeout=20) as c:
            got: list[dict[str, Any]] = []

            async def stream() -> None:
                r = await rpc(c, "SendStreamingMessage", send_params("ask"))
                got.extend(sse_events(r.text))

            async with trio.open_nursery() as n:
                n.start_soon(stream)
                with trio.fail_after(10):
                    await w.asking.wait()
                h.session.wind_down(signal_wind_down("SIGTERM"))
            summary = await h.wait()
        assert got[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
        (canceled,) = [r for r in trace(h) if r["event_type"] == "task_canceled"]
        assert canceled["phase"] == "input"
        assert summary.status == "canceled"  # wound down by a signal while busy
