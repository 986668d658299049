"""What the door holds of finished tasks, bounded by bytes (spec/door.md "Memory").

A finished task stays answerable (``GetTask``, ``ListTasks``) until the book forgets it, but its
answer need not stay in memory: once ``out/result_<tsk>.txt`` holds it, an answer larger than
:data:`SPILL_ABOVE` bytes is dropped from the task and read back from that file when a request
needs it (:func:`load_answer`, :func:`restored`). What remains of each finished task (its text,
its message, a small answer, a failure message) is counted by :func:`held_bytes`; the book
forgets its oldest finished tasks once their total passes :data:`MAX_HELD_BYTES`.

Pure apart from :func:`load_answer` (one bounded file read).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur.session.states import TaskState

if TYPE_CHECKING:
    from murmur.session.tasks.book import StreamEvent, Task, TaskBook

__all__ = [
    "MAX_HELD_BYTES",
    "SPILL_ABOVE",
    "AnswerUnavailable",
    "Spilled",
    "answer_recorded",
    "held_bytes",
    "load_answer",
    "restored",
    "should_spill",
    "spill",
]

SPILL_ABOVE = 64 * 1024
"""Bytes (UTF-8) of a finished task's answer above which it is served from the records file."""

MAX_HELD_BYTES = 64 * 1024 * 1024
"""Bytes of finished tasks the book holds before it forgets the oldest (the newest always stays)."""


class AnswerUnavailable(OSError):
    """A spilled answer's records file is gone, unreadable or not the answer any more."""


@attrs.frozen
class Spilled:
    """Where a finished task's answer lives once it is no longer held.

    Attributes:
        path (Path): ``out/result_<tsk>.txt``; its first ``nbytes`` bytes are the answer.
        nbytes (int): the answer's UTF-8 length in bytes.
    """

    path: Path
    nbytes: int


def _size(text: str | None) -> int:
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


def _answer_of(task: Task) -> str | None:
    """The ``response`` artifact's text of a completed task, or None."""
    if task.state is not TaskState.COMPLETED or task.spilled is not None:
        return None
    for art in task.artifacts:
        if art.get("artifactId") == "response":
            parts = art.get("parts") or [{}]
            text = parts[0].get("text")
            return text if isinstance(text, str) else None
    return None


def held_bytes(task: Task) -> int:
    """Bytes a task holds in memory: its text, its message and its status text or answer.

    The message is counted as its compact JSON; an answer that is also the status message
    (a completed task) is counted once.
    """
    message = len(json.dumps(task.message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return _size(task.text) + message + _size(task.status_message) + sum(_size(v) for v in _extra_texts(task))


def _extra_texts(task: Task) -> list[str]:
    """Artifact texts other than the one equal to the status message (counted there)."""
    out = []
    for art in task.artifacts:
        for part in art.get("parts") or ():
            text = part.get("text")
            if isinstance(text, str) and text is not task.status_message:
                out.append(text)
    return out


def should_spill(task: Task, recorded_bytes: int) -> bool:
    """Whether ``task``'s answer, now on disk as ``recorded_bytes`` bytes, should leave memory.

    Only a completed task's ``response`` answer larger than :data:`SPILL_ABOVE` bytes, and only
    when the file holds at least the answer (a shorter file is not this answer).
    """
    answer = _answer_of(task)
    if answer is None:
        return False
    size = _size(answer)
    return size > SPILL_ABOVE and recorded_bytes >= size


def spill(task: Task, path: Path) -> None:
    """Drop ``task``'s answer from memory; it is read back from ``path`` when needed.

    The artifact keeps its id and name with an empty text part; the completed status event and
    the status message lose their text. :func:`restored` puts them back.
    """
    answer = _answer_of(task)
    if answer is None:
        return
    task.spilled = Spilled(path, _size(answer))
    placeholder: dict[str, Any] = {"artifactId": "response", "name": "response", "parts": [{"text": ""}]}
    task.artifacts = [placeholder if a.get("artifactId") == "response" else a for a in task.artifacts]
    task.events = [_without_answer(ev, placeholder) for ev in task.events]
    task.status_message = None


def _without_answer(ev: StreamEvent, placeholder: dict[str, Any]) -> StreamEvent:
    if ev.kind == "artifact" and ev.artifact is not None and ev.artifact.get("artifactId") == "response":
        return attrs.evolve(ev, artifact=placeholder)
    if ev.kind == "status" and ev.state is TaskState.COMPLETED:
        return attrs.evolve(ev, message=None)
    return ev


def load_answer(spilled: Spilled) -> str:
    """Read a spilled answer back (at most ``nbytes + 1`` bytes are read).

    Raises:
        AnswerUnavailable: the file cannot be read, is shorter than the answer, has more than
            the answer and its newline, or is not UTF-8.
    """
    try:
        with open(spilled.path, "rb") as fh:
            data = fh.read(spilled.nbytes + 2)
    except OSError as exc:
        raise AnswerUnavailable(exc.errno, exc.strerror, str(spilled.path)) from exc
    head, tail = data[: spilled.nbytes], data[spilled.nbytes :]
    if len(head) < spilled.nbytes or tail not in (b"", b"\n"):
        raise AnswerUnavailable(0, "the records file no longer holds this answer", str(spilled.path))
    try:
        return head.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise AnswerUnavailable(0, "the records file is not UTF-8", str(spilled.path)) from exc


def restored(task: Task, answer: str) -> Task:
    """A copy of a spilled ``task`` with ``answer`` put back (for serialising; not held)."""
    artifact: dict[str, Any] = {"artifactId": "response", "name": "response", "parts": [{"text": answer}]}

    def back(ev: StreamEvent) -> StreamEvent:
        if ev.kind == "artifact" and ev.artifact is not None and ev.artifact.get("artifactId") == "response":
            return attrs.evolve(ev, artifact=artifact)
        if ev.kind == "status" and ev.state is TaskState.COMPLETED:
            return attrs.evolve(ev, message=answer)
        return ev

    return attrs.evolve(
        task,
        artifacts=[artifact if a.get("artifactId") == "response" else a for a in task.artifacts],
        events=[back(ev) for ev in task.events],
        status_message=answer,
        spilled=None,
    )


def answer_recorded(book: TaskBook, task: Task, path: Path, body: str) -> Callable[[], None] | None:
    """The records writer's ``then`` for ``task``'s result file (None when it cannot spill).

    Called from Trio; the returned callback runs on the writer thread and hands
    :meth:`TaskBook.answer_recorded` back to the Trio thread (never blocking: the Trio thread
    may itself be waiting for the writer).
    """
    if len(body) * 4 <= SPILL_ABOVE:  # a UTF-8 character is at most 4 bytes: cannot spill
        return None
    token = trio.lowlevel.current_trio_token()
    nbytes = _size(body)

    def recorded() -> None:
        try:
            token.run_sync_soon(book.answer_recorded, task, path, nbytes)
        except trio.RunFinishedError:
            pass  # the session has ended: nothing is served any more

    return recorded
