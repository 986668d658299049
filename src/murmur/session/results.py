"""A session's task results on disk: ``task.md``, ``out/result_<tsk>.txt``, ``out/result.txt``.

Spec: spec/session.md "Records directory". Every file goes through one
:class:`~murmur.session.records.RecordWriter` (a writer thread), so a slow disk never holds the
event loop; what could not be written is kept in :attr:`Results.lost` for the ending
(``E-RUN-007``, :func:`murmur.session.outcome.final_status`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from murmur import realtime
from murmur.session.records import Records, RecordWriter, result_text
from murmur.session.tasks.book import Task, TaskBook

FLUSH_BOUND = 10.0
"""Real seconds the session waits for its records files before it ends without them."""


class Results:
    """Writes a session's task files and remembers what the ending needs from them.

    Args:
        book (TaskBook): the session's tasks (told when an answer is on disk, so it may spill).
        records (Records): the records directory.
        log (logging.Logger): where a lost file is logged (``door.log``).

    Attributes:
        lost (list[tuple[Path, str]]): files that could not be written, with the reason.
        answer (str | None): the launch task's ``out/result.txt`` text once it completed.
        result_written (bool): ``out/result.txt`` was written at least once.
    """

    def __init__(self, book: TaskBook, records: Records, log: logging.Logger) -> None:
        self._book = book
        self._records = records
        self._log = log
        self._writer = RecordWriter(self._record_lost)
        self.lost: list[tuple[Path, str]] = []
        self.answer: str | None = None
        self.result_written = False

    def task_text(self, text: str) -> None:
        """Write ``task.md`` (the text of the task that starts now)."""
        self._writer.write(self._records.task_md, text)

    def result(self, task: Task, state: str, text: str) -> None:
        """Write a task's ending: ``out/result_<tsk>.txt``, and ``out/result.txt`` for a task
        that ran (or the launch task).

        Args:
            task (Task): the task that ended.
            state (str): ``completed`` | ``failed`` | ``canceled`` (see
                :func:`~murmur.session.records.result_text`).
            text (str): the answer, the failure message or the cancel reason.
        """
        body = result_text(state, text)
        if task.launch and state == "completed":
            self.answer = body
        path = self._records.task_result(task.id)
        self._writer.write(path, body, then=self._book.recorder(task, path, body))
        if task.started or task.launch:  # a task that never ran leaves result.txt alone
            self._writer.write(self._records.result, body)
            self.result_written = True

    async def flush(self) -> None:
        """Wait until every file queued so far is written.

        The writer thread tells the loop when it is idle (:meth:`RecordWriter.when_idle`, a
        ``run_sync_soon``); the wait holds no part of the loop (the door keeps serving) and
        gives up after :data:`FLUSH_BOUND` real seconds (the files that were not written are
        reported as lost by the writer). It is a :func:`murmur.realtime.wait_real`, so an
        autojumping ``MockClock`` does not leap past every timer (the deadline, the caller's
        bounds) while the writer works.
        """
        written = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def tell() -> None:  # on the writer thread
            try:
                token.run_sync_soon(written.set)
            except trio.RunFinishedError:
                pass

        if self._writer.when_idle(tell):
            await realtime.wait_real(written.wait, FLUSH_BOUND)
        else:
            await trio.lowlevel.checkpoint()

    def close(self) -> None:
        """Stop the writer thread (what is queued is written first)."""
        self._writer.close()

    def _record_lost(self, path: Path, exc: OSError) -> None:
        """A file could not be written (called on the writer thread)."""
        self.lost.append((path, exc.strerror or type(exc).__name__))
        self._log.error("could not write %s: %s", path, exc.strerror or exc)
