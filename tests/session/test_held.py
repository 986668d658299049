"""The door holds finished tasks within a byte bound; large answers come back from records (issue 16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from murmur.session.door import Door
from murmur.session.records import result_text
from murmur.session.states import TaskEvent
from murmur.session.tasks import held
from murmur.session.tasks.book import Task, TaskBook
from murmur.workload import TaskContext, TaskOutcome

from .helpers import make_setup, manifest, result, rpc, running, send_params, sse_events

MB = 1_000_000


def _answer(i: int, size: int = MB) -> str:
    head = f"answer {i} é "  # not ASCII: bytes and characters differ
    return head + "x" * (size - len(head.encode()))


class BigEcho:
    """Answers each task with ``size`` bytes that name the task's text."""

    def __init__(self, size: int = MB) -> None:
        self.size = size

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        await trio.lowlevel.checkpoint()
        return TaskOutcome("ok", _answer(int(ctx.text), self.size))


def _text_bytes_held(tasks: list[Task]) -> int:
    """Bytes of answer text the tasks' structures reference (artifacts, events, status)."""
    seen: dict[int, int] = {}
    for t in tasks:
        texts = [t.status_message] + [ev.message for ev in t.events]
        texts += [p.get("text") for a in t.artifacts for p in a.get("parts", [])]
        texts += [p.get("text") for ev in t.events if ev.artifact for p in ev.artifact.get("parts", [])]
        for s in texts:
            if isinstance(s, str):
                seen[id(s)] = len(s.encode())
    return sum(seen.values())


def _finish(book: TaskBook, answer: str | None = None, fail: str | None = None) -> Task:
    t = book.new(text="t", message={"parts": [{"text": "t"}]}, origin="user", trust="user", lane="fg", source="a2a")
    book.apply(t, TaskEvent.START)
    if fail is not None:
        book.apply(t, TaskEvent.FAIL, message=fail)
    else:
        book.apply(t, TaskEvent.COMPLETE, answer=answer)
    return t


class TestBook:
    def test_recorded_large_answers_leave_memory(self, tmp_path: Path) -> None:
        """120 tasks x 1 MB answer: once each is on disk the book holds a few KB, not 120 MB."""
        book = TaskBook()
        tasks = []
        for i in range(120):
            t = _finish(book, _answer(i))
            path = tmp_path / f"result_{t.id}.txt"
            body = result_text("completed", _answer(i))
            path.write_text(body, encoding="utf-8")
            book.answer_recorded(t, path, len(body.encode()))
            tasks.append(t)
        assert _text_bytes_held(tasks) == 0
        assert book.held_total < 120 * 1024
        assert all(t.spilled is not None for t in tasks)
        back = tasks[7].restored(held.load_answer(tasks[7].spilled))  # type: ignore[arg-type]
        assert back.artifacts[0]["parts"][0]["text"] == _answer(7)
        assert back.status_message == _answer(7)
        assert [ev.message for ev in back.events if ev.kind == "status"][-1] == _answer(7)

    def test_small_answer_stays(self, tmp_path: Path) -> None:
        """An answer under SPILL_ABOVE is served from memory (no file read)."""
        book = TaskBook()
        t = _finish(book, "short")
        book.answer_recorded(t, tmp_path / "nope", 6)
        assert t.spilled is None and t.artifacts[0]["parts"][0]["text"] == "short"

    def test_a_file_shorter_than_the_answer_is_not_taken(self, tmp_path: Path) -> None:
        """A write of something else (a truncated file) never drops the answer."""
        book = TaskBook()
        t = _finish(book, _answer(1))
        book.answer_recorded(t, tmp_path / "r.txt", 10)
        assert t.spilled is None

    def test_held_bytes_bound_forgets_the_oldest(self) -> None:
        """Failure messages stay in memory, so the byte bound forgets the oldest tasks."""
        book = TaskBook(max_held=5 * MB)
        tasks = [_finish(book, fail="e" * MB) for _ in range(20)]
        assert book.held_total <= 5 * MB + 100_000
        kept = list(book)
        assert tasks[-1] in kept and tasks[0] not in kept
        assert len(kept) == 4  # 4 x (1 MB + its text and message) fit under 5 MB
        assert book.held_total == sum(t.held_bytes for t in kept)

    def test_the_newest_finished_task_always_stays(self) -> None:
        """A task larger than the whole bound is still answerable right after it ended."""
        book = TaskBook(max_held=MB)
        t = _finish(book, fail="e" * (2 * MB))
        assert list(book) == [t]

    def test_load_refuses_a_changed_file(self, tmp_path: Path) -> None:
        """The records file no longer holds the answer: AnswerUnavailable, never a wrong text."""
        path = tmp_path / "r.txt"
        path.write_text("short\n")
        with pytest.raises(held.AnswerUnavailable):
            held.load_answer(held.Spilled(path, 100))
        path.write_text("x" * 100 + "\nmore")
        with pytest.raises(held.AnswerUnavailable):
            held.load_answer(held.Spilled(path, 100))
        with pytest.raises(held.AnswerUnavailable):
            held.load_answer(held.Spilled(tmp_path / "gone", 100))


class TestDoor:
    async def test_answers_served_from_records_and_list_bounded(self, tmp_path: Path) -> None:
        """30 tasks x 1 MB through the door: the book holds none of the answers, GetTask and
        streams still give them whole, and a ListTasks page stays within its byte bound."""
        setup = make_setup(tmp_path, manifest(depth=64), BigEcho(), no_idle_timeout=True)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url, timeout=30) as c:
            h.session._door.max_list_bytes = 3 * MB
            ids = []
            with trio.fail_after(120):
                for i in range(30):
                    task = (await result(c, "SendMessage", send_params(str(i))))["task"]
                    assert task["artifacts"][0]["parts"][0]["text"] == _answer(i)
                    ids.append(task["id"])
                # The spill callbacks come back from the writer's thread (run_sync_soon), so
                # flush and let the loop run them until every task has spilled (bounded).
                await h.session.flush_records()
                while any((t := h.session.get_task(i)) is not None and t.spilled is None for i in ids):
                    await trio.sleep(0.005)
                    await h.session.flush_records()
            tasks = [t for t in (h.session.get_task(i) for i in ids) if t is not None]
            assert len(tasks) == 30
            assert _text_bytes_held(tasks) == 0
            assert h.session.book.held_total < 30 * 2048

            with trio.fail_after(30):
                got = await result(c, "GetTask", {"id": ids[3]})
                assert got["artifacts"][0]["parts"][0]["text"] == _answer(3)
                assert got["history"][-1]["parts"][0]["text"] == _answer(3)

                seen: list[str] = []
                token = ""
                pages = 0
                while True:
                    params: dict[str, object] = {"pageSize": 100, "includeArtifacts": True}
                    if token:
                        params["pageToken"] = token
                    r = await rpc(c, "ListTasks", params)
                    assert len(r.content) <= 3 * MB + 4096
                    page = r.json()["result"]
                    assert page["totalSize"] == 30
                    seen += [t["id"] for t in page["tasks"]]
                    for t in page["tasks"]:
                        assert t["artifacts"][0]["parts"][0]["text"].startswith("answer ")
                    pages += 1
                    token = page["nextPageToken"]
                    if not token:
                        break
                assert sorted(seen) == sorted(ids) and len(seen) == 30
                assert pages >= 10  # 2 tasks of 1 MB (x2: artifact and history) per 3 MB page

            setup.records.task_result(ids[5]).unlink()
            r = await rpc(c, "GetTask", {"id": ids[5]})
            assert r.json()["error"]["code"] == -32603
            assert len(r.content) < 2000

    async def test_a_stream_gets_the_whole_answer_after_the_spill(self, tmp_path: Path) -> None:
        """A streaming send carries the whole answer, and the task is spilled once it is recorded."""
        setup = make_setup(tmp_path, manifest(), BigEcho(200_000), no_idle_timeout=True)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url, timeout=120) as c:
            # The spill is handed back from the records writer's thread (run_sync_soon) once
            # the file is written, which can be after the stream's last event: the test waits
            # for that hand-back itself, not for a wall-clock bound.
            book = h.session.book
            recorded = trio.Event()
            real = book.answer_recorded

            def answer_recorded(task: Any, path: Path, nbytes: int) -> None:
                real(task, path, nbytes)
                recorded.set()

            book.answer_recorded = answer_recorded  # type: ignore[method-assign]
            with trio.fail_after(150):  # a hang guard only
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": send_params("4")}
                r = await c.post("/", json=body, headers={"A2A-Version": "1.0"})
                events = sse_events(r.text)
                arts = [e["result"]["artifactUpdate"] for e in events if "artifactUpdate" in e.get("result", {})]
                assert arts[0]["artifact"]["parts"][0]["text"] == _answer(4, 200_000)
                (task,) = list(book)
                await recorded.wait()
            assert task.spilled is not None


async def test_a_stream_keeps_the_answer_when_the_task_spills_between_two_events(tmp_path: Path) -> None:
    """The records writer's hand-back (``spill``) can land while a stream is suspended between
    two events (seen under load): the events after it still carry the whole answer. The
    control is the same stream of an identical task that is never spilled."""
    answer = _answer(7, 5000)

    async def frames(spill_after: int | None) -> list[bytes]:
        t = _finish(TaskBook(), answer=answer)
        path = tmp_path / f"result-{spill_after}"
        path.write_text(answer + "\n", encoding="utf-8")
        out: list[bytes] = []
        async for frame in Door(None, None)._follow(t, 1, b"first", 0):  # type: ignore[arg-type]
            out.append(frame)
            if len(out) == spill_after:
                t.spill(path)
                assert t.spilled is not None and answer not in str(t.events)
        return out

    def carried(out: list[bytes]) -> list[bool]:
        return [answer in f.decode() for f in out]

    control = carried(await frames(None))
    assert sum(control) == 2, control  # the artifact and the completed status
    for at in range(1, len(control)):
        assert carried(await frames(at)) == control, f"spilled after frame {at}"
