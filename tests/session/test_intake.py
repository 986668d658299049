"""Admission's state: what a session holds, what it takes, and how closing refuses the queue."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from murmur.manifest.model import AfterTask, Lifecycle, TaskAcceptance
from murmur.session.lifecycle import BUSY_MESSAGE, CLOSING_MESSAGE, Admission, Policy
from murmur.session.states import TaskEvent, TaskState
from murmur.session.tasks.book import Task, TaskBook
from murmur.session.tasks.desk import Intake
from murmur.session.trace import SessionTrace, TraceWriter, read_trace


@pytest.fixture
def trace(tmp_path: Path) -> Iterator[SessionTrace]:
    with TraceWriter(tmp_path / "trace.jsonl", "ses_test") as writer:
        yield SessionTrace(writer)


def intake(trace: SessionTrace, acceptance: TaskAcceptance = TaskAcceptance.QUEUE, depth: int = 1) -> tuple[Intake, TaskBook, Path]:
    policy = Policy.build(Lifecycle(task_acceptance=acceptance, after_task=AfterTask.SLEEP, queue_depth=depth))
    book = TaskBook()
    return Intake(policy, book, trace), book, trace.writer.path


def arrive(desk: Intake, book: TaskBook, text: str) -> Task:
    """As the door backend does: decide first, make the task, then settle."""
    admission = desk.decide()
    task = book.new(text=text, message={}, origin="user", trust="trusted", lane="user", source="a2a")
    desk.settle(task, admission)
    return task


def rejections(path: Path) -> list[tuple[object, object]]:
    return [(r["reason"], r["cause"]) for r in read_trace(path) if r["event_type"] == "task_rejected"]


def test_queue_holds_running_plus_depth(trace: SessionTrace) -> None:
    """With one running and one queued (depth 1), the next is rejected busy; the queue pops in order."""
    desk, book, path = intake(trace)
    first, second = arrive(desk, book, "a"), arrive(desk, book, "b")
    assert desk.next() is first
    desk.start(first)
    third = arrive(desk, book, "c")
    assert (second.state, third.state) == (TaskState.SUBMITTED, TaskState.REJECTED)
    assert desk.taken == 2 and desk.waiting == 1
    assert rejections(path) == [(BUSY_MESSAGE, "busy")]


def test_close_refuses_the_queue_with_the_first_cause(trace: SessionTrace) -> None:
    """Closing rejects every queued task with the cause it closed for; a later cause is ignored."""
    desk, book, path = intake(trace, depth=3)
    queued = [arrive(desk, book, t) for t in "ab"]
    desk.close(cause="session_stopped")
    desk.close(cause="session_ended")
    late = arrive(desk, book, "late")
    assert [t.state for t in [*queued, late]] == [TaskState.REJECTED] * 3
    assert desk.decide() is Admission.CLOSING and desk.waiting == 0
    assert rejections(path) == [(CLOSING_MESSAGE, "session_stopped")] * 3


def test_single_takes_one_task_ever(trace: SessionTrace) -> None:
    """Under single, a second task is busy even after the first left the queue."""
    desk, book, _ = intake(trace, TaskAcceptance.SINGLE)
    launch = desk.take_local("the --task text")
    assert launch.launch and launch.source == "task_md"
    assert desk.next() is launch
    assert arrive(desk, book, "b").state is TaskState.REJECTED


def test_next_skips_a_task_that_no_longer_waits(trace: SessionTrace) -> None:
    """A queued task cancelled behind the queue's back is not started."""
    desk, book, _ = intake(trace, depth=3)
    gone = arrive(desk, book, "a")
    assert book.apply(gone, TaskEvent.CANCEL, message="x")
    assert desk.next() is None


async def test_wake_sets_the_event_the_runner_waits_on(trace: SessionTrace) -> None:
    """Each wake sets the event handed out before it, and hands out a fresh one."""
    desk, _, _ = intake(trace)
    before = desk.changed
    desk.wake()
    assert before.is_set() and not desk.changed.is_set()


def test_the_desk_alone_records_which_task_runs(trace: SessionTrace) -> None:
    """``running`` changes only through start/finish; one task at a time (issue 31)."""
    desk, book, _ = intake(trace)
    first, second = arrive(desk, book, "a"), arrive(desk, book, "b")
    desk.start(first)
    assert desk.running is first
    with pytest.raises(AssertionError):
        desk.start(second)
    desk.finish(second)  # not the running one: nothing changes
    assert desk.running is first
    desk.finish(first)
    assert desk.running is None


def test_latest_is_the_running_task_and_stays_after_it_ends(trace: SessionTrace) -> None:
    """A capsule link's call takes the latest task's context and trust (spec/links.md): the
    task running now, else the last one that ran, so a command a task left behind still calls
    under that task's trust."""
    desk, book, _ = intake(trace)
    assert desk.latest is None
    first, second = arrive(desk, book, "a"), arrive(desk, book, "b")
    desk.start(desk.next() or first)
    assert desk.latest is first and desk.running is first
    desk.finish(first)
    assert desk.running is None and desk.latest is first
    desk.start(desk.next() or second)
    assert desk.latest is second
