"""Tests of the task book: one terminal transition, event logs, watchers."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from murmur.ids import is_id
from murmur.session.states import TaskEvent, TaskState
from murmur.session.tasks.book import Task, TaskBook


def new(book: TaskBook, **kw: object) -> Task:
    args: dict[str, object] = {"text": "hi", "message": {}, "origin": "event", "trust": "untrusted", "lane": "bg", "source": "a2a"}
    args.update(kw)
    return book.new(**args)  # type: ignore[arg-type]


class TestTaskBook:
    def test_ids_minted(self) -> None:
        """Tasks get tsk_ ids and a ctx_ id unless one is given."""
        book = TaskBook()
        t = new(book)
        assert is_id(t.id, "tsk") and is_id(t.context_id, "ctx")
        assert new(book, context_id="ctx_mine").context_id == "ctx_mine"
        assert book.get(t.id) is t and len(book) == 2

    def test_chunks_stream_appended_and_are_not_kept_as_artifacts(self) -> None:
        """A component's chunks: the first of each artifact starts it, later ones append; none is
        complete (lastChunk false) nor kept in GetTask's artifacts; an ended task takes none."""
        from murmur.session import wire

        book = TaskBook(now=lambda: "T")
        t = new(book)
        assert book.apply(t, TaskEvent.START)
        for text, thinking in (("a", False), ("b", True), ("c", False)):
            assert book.chunk(t, text, thinking=thinking, source="tool-x")
        frames = [wire.stream_event_json(t, e)["artifactUpdate"] for e in t.events if e.kind == "artifact"]
        assert [(f["artifact"]["artifactId"], f.get("append", False), f["lastChunk"]) for f in frames] == [
            ("text", False, False), ("thinking", False, False), ("text", True, False)]
        assert t.artifacts == []
        assert book.apply(t, TaskEvent.COMPLETE, answer="done")
        assert not book.chunk(t, "late", thinking=False, source="tool-x")

    def test_complete_logs_artifact_then_status(self) -> None:
        """A completion appends the response artifact before the completed status."""
        book = TaskBook(now=lambda: "T")
        t = new(book)
        assert book.apply(t, TaskEvent.START)
        assert book.apply(t, TaskEvent.COMPLETE, answer="hello")
        assert [(e.kind, e.state) for e in t.events] == [
            ("status", TaskState.WORKING), ("artifact", TaskState.WORKING), ("status", TaskState.COMPLETED)]
        assert t.artifacts == [{"artifactId": "response", "name": "response", "parts": [{"text": "hello"}]}]
        assert t.status_message == "hello"

    def test_terminal_callback_exactly_once(self) -> None:
        """A late completion after a cancel changes nothing and fires no callback."""
        book = TaskBook()
        ended: list[tuple[str, TaskState]] = []
        book.on_terminal(lambda task: ended.append((task.id, task.state)))
        t = new(book)
        book.apply(t, TaskEvent.START)
        assert book.apply(t, TaskEvent.CANCEL, message="CancelTask")
        assert not book.apply(t, TaskEvent.COMPLETE, answer="late")
        assert not book.apply(t, TaskEvent.CANCEL, message="again")
        assert ended == [(t.id, TaskState.CANCELED)]
        assert t.cancel_reason == "CancelTask" and t.artifacts == []

    def test_cancel_never_overwrites_completed(self) -> None:
        """A cancel after completion is refused."""
        book = TaskBook()
        t = new(book)
        book.apply(t, TaskEvent.START)
        book.apply(t, TaskEvent.COMPLETE, answer="a")
        assert not book.apply(t, TaskEvent.CANCEL)
        assert t.state is TaskState.COMPLETED

    def test_forgets_oldest_finished(self) -> None:
        """Past the keep limit the oldest finished tasks are forgotten, live ones never."""
        book = TaskBook(keep=3)
        live = new(book)
        done = []
        for _ in range(4):
            t = new(book)
            book.apply(t, TaskEvent.REJECT, message="busy")
            done.append(t)
        ids = [t.id for t in book]
        assert live.id in ids and done[-1].id in ids and done[0].id not in ids

    async def test_watcher_wakes_on_change(self) -> None:
        """A watcher holding changed() is woken by the next change."""
        book = TaskBook()
        t = new(book)
        seen: list[TaskState] = []

        async def watch() -> None:
            ev = t.changed()
            await ev.wait()
            seen.append(t.state)

        async with trio.open_nursery() as n:
            n.start_soon(watch)
            await trio.testing.wait_all_tasks_blocked()
            book.apply(t, TaskEvent.START)
        assert seen == [TaskState.WORKING]


class TestEndsOnceProperty:
    @given(st.lists(st.sampled_from(list(TaskEvent)), max_size=12))
    def test_any_event_sequence(self, events: list[TaskEvent]) -> None:
        """Whatever happens, a task reaches at most one terminal state, logged and reported once."""
        book = TaskBook()
        ended: list[TaskState] = []
        book.on_terminal(lambda task: ended.append(task.state))
        t = new(book)
        first_terminal: TaskState | None = None
        for ev in events:
            changed = book.apply(t, ev, answer="a" if ev is TaskEvent.COMPLETE else None)
            if first_terminal is not None:
                assert not changed and t.state is first_terminal
            if t.state.terminal and first_terminal is None:
                first_terminal = t.state
        assert ended == ([first_terminal] if first_terminal is not None else [])
        assert sum(1 for e in t.events if e.kind == "status" and e.state.terminal) == len(ended)
