"""Handing a child its task and reading its answer: the readings (tables) and the loops
against a scripted door (httpx.MockTransport) under MockClock."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from murmur.delegation import delivery


def task(state: str, *, text: str | None = None, answer: str | None = None, tid: str = "tsk_c") -> dict[str, Any]:
    out: dict[str, Any] = {"id": tid, "contextId": "ctx", "status": {"state": f"TASK_STATE_{state}"}}
    if text is not None:
        out["status"]["message"] = {"role": "ROLE_AGENT", "parts": [{"text": text}]}
    if answer is not None:
        out["artifacts"] = [{"artifactId": "response", "parts": [{"text": answer}]}]
    return out


class TestTaken:
    @pytest.mark.parametrize("state", ["SUBMITTED", "WORKING", "COMPLETED", "INPUT_REQUIRED"])
    def test_a_task_that_started(self, state: str) -> None:
        assert delivery.taken({"result": {"task": task(state)}}) == "tsk_c"

    @pytest.mark.parametrize(
        ("answer", "why"),
        [
            ([1], "without a JSON-RPC body"),
            ({"error": {"code": -32600, "message": "bad"}}, "the child refused its task: bad"),
            ({"error": {"code": -32600}}, "the child refused its task: (no message)"),
            ({"result": {"message": {}}}, "without a task"),
            ({"result": {"task": {"status": {}}}}, "without a task"),
            ({"result": {"task": task("REJECTED", text="task rejected: capsule is busy")}},
             "did not take its task (task rejected: capsule is busy)"),
            ({"result": {"task": task("FAILED")}}, "did not take its task (TASK_STATE_FAILED)"),
            ({"result": {"task": task("CANCELED", text="  ")}}, "did not take its task (TASK_STATE_CANCELED)"),
        ],
    )
    def test_refusals_say_why(self, answer: object, why: str) -> None:
        with pytest.raises(delivery.Refused) as got:
            delivery.taken(answer)
        assert why in str(got.value)


class TestTaskEnd:
    @pytest.mark.parametrize(
        ("answer", "ended"),
        [
            ({"result": task("WORKING")}, None),
            ({"result": task("INPUT_REQUIRED")}, None),
            ("nope", None),
            ({"result": 3}, None),
            ({"result": task("COMPLETED", answer="42", text="done")}, ("completed", "42")),
            ({"result": task("COMPLETED", text=" done ")}, ("completed", "done")),
            ({"result": task("FAILED", text="boom")}, ("failed", "boom")),
            ({"result": task("CANCELED")}, ("canceled", "")),
            ({"result": task("REJECTED", text="no")}, ("rejected", "no")),
            ({"error": {"code": -32001, "message": "Task not found"}}, ("failed", "the child's task could not be read: Task not found")),
        ],
    )
    def test_table(self, answer: object, ended: tuple[str, str] | None) -> None:
        assert delivery.task_end(answer) == ended


class TestAnswerFromRecords:
    @pytest.mark.parametrize(
        ("text", "got"),
        [("42\n", ("completed", "42")), ("error: boom\n", ("failed", "boom")), ("canceled: stop", ("canceled", "stop"))],
    )
    def test_result_file(self, tmp_path: Path, text: str, got: tuple[str, str]) -> None:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "result_tsk_1.txt").write_text(text, encoding="utf-8")
        assert delivery.answer_from_records(str(tmp_path), "tsk_1", 0) == got

    def test_no_result(self, tmp_path: Path) -> None:
        status, why = delivery.answer_from_records(str(tmp_path), "tsk_1", -9)
        assert (status, why) == ("failed", "the child ended (signal SIGKILL) before its answer could be read")
        assert delivery.answer_from_records(None, "tsk_1", 3)[0] == "failed"


def door(*steps: Callable[[dict[str, Any]], httpx.Response]) -> tuple[httpx.MockTransport, list[tuple[float, dict[str, Any]]]]:
    """A door answering each request with the next step (the last one repeats)."""
    seen: list[tuple[float, dict[str, Any]]] = []
    script = list(steps)

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((trio.current_time(), body))
        step = script.pop(0) if len(script) > 1 else script[0]
        return step(body)

    return httpx.MockTransport(handle), seen


def down(body: dict[str, Any]) -> httpx.Response:
    raise httpx.ConnectError("refused")


def answer(result: object) -> Callable[[dict[str, Any]], httpx.Response]:
    return lambda body: httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})


class TestDeliver:
    async def test_retried_while_the_door_comes_up(self, autojump_clock: trio.testing.MockClock) -> None:
        """Refused connections are retried every 100 ms; the first answer decides."""
        transport, seen = door(down, down, answer({"task": task("SUBMITTED", tid="tsk_9")}))
        got = await delivery.deliver("http://127.0.0.1:1", "do it", bound=30.0, exited=trio.Event(), transport=transport)
        assert got == "tsk_9"
        assert [round(t, 3) for t, _ in seen] == [0.0, 0.1, 0.2]
        body = seen[0][1]
        assert body["method"] == "SendMessage" and body["params"]["message"]["parts"] == [{"text": "do it"}]
        assert body["params"]["configuration"] == {"returnImmediately": True}

    async def test_bound(self, autojump_clock: trio.testing.MockClock) -> None:
        """A door that never comes up: None at the bound, the child still running."""
        transport, _ = door(down)
        exited = trio.Event()
        assert await delivery.deliver("http://x", "t", bound=30.0, exited=exited, transport=transport) is None
        assert trio.current_time() == pytest.approx(30.0, abs=0.11) and not exited.is_set()

    async def test_child_exit_ends_the_retries(self, autojump_clock: trio.testing.MockClock) -> None:
        transport, seen = door(down)
        exited = trio.Event()
        async with trio.open_nursery() as n:
            n.start_soon(lambda: _set_after(exited, 1.05))
            assert await delivery.deliver("http://x", "t", bound=30.0, exited=exited, transport=transport) is None
        assert trio.current_time() == pytest.approx(1.05) and len(seen) == 11

    async def test_refused(self, autojump_clock: trio.testing.MockClock) -> None:
        transport, _ = door(answer({"task": task("REJECTED", text="task rejected: the session is closing")}))
        with pytest.raises(delivery.Refused):
            await delivery.deliver("http://x", "t", bound=30.0, exited=trio.Event(), transport=transport)


async def _set_after(event: trio.Event, seconds: float) -> None:
    await trio.sleep(seconds)
    event.set()


class TestReadAnswer:
    async def test_polls_back_off_to_half_a_second(self, autojump_clock: trio.testing.MockClock) -> None:
        """GetTask at 0, then after 50, 100, 200, 400, 500, 500 ms … until the task ended."""
        working = answer(task("WORKING"))
        transport, seen = door(*[working] * 7, answer(task("COMPLETED", answer="ok")))
        got = await delivery.read_answer("http://x", "tsk_c", exited=trio.Event(), transport=transport)
        assert got == ("completed", "ok")
        times = [t for t, _ in seen]
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(times)]
        assert gaps == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
        assert seen[0][1]["method"] == "GetTask" and seen[0][1]["params"] == {"id": "tsk_c"}

    async def test_exit_reads_none(self, autojump_clock: trio.testing.MockClock) -> None:
        """Once the child exited the loop stops (the caller reads the result file)."""
        transport, _ = door(down)
        exited = trio.Event()
        async with trio.open_nursery() as n:
            n.start_soon(lambda: _set_after(exited, 2.0))
            assert await delivery.read_answer("http://x", "t", exited=exited, transport=transport) is None
        assert trio.current_time() == pytest.approx(2.0)
