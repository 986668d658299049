"""What the door holds of finished tasks, bounded by bytes (spec/door.md "Memory"): the bounds,
and a spilled answer.

A finished task stays answerable (``GetTask``, ``ListTasks``) until the book forgets it, but its
answer need not stay in memory: once ``out/result_<tsk>.txt`` holds it, an answer larger than
:data:`SPILL_ABOVE` bytes is dropped from the task (:meth:`Task.spill
<murmur.session.tasks.book.Task.spill>`) and read back from that file when a request needs it
(:func:`load_answer`, :meth:`Task.restored <murmur.session.tasks.book.Task.restored>`). What
remains of each finished task is counted by :meth:`Task.count_held_bytes
<murmur.session.tasks.book.Task.count_held_bytes>`; the book forgets its oldest finished tasks
once their total passes :data:`MAX_HELD_BYTES`.

Pure apart from :func:`load_answer` (one bounded file read). This module knows nothing of a
task: the book imports it, never the other way round.
"""

from __future__ import annotations

from pathlib import Path

import attrs

__all__ = ["MAX_HELD_BYTES", "SPILL_ABOVE", "AnswerUnavailable", "Spilled", "load_answer", "text_bytes"]

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


def text_bytes(text: str | None) -> int:
    """UTF-8 bytes of ``text`` (0 for None or empty; lone surrogates counted as written)."""
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


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
