"""Input-required: a running task asks its user a question and waits (spec/conversations.md).

:class:`Asking` is the session's side of :meth:`murmur.workload.TaskContext.request_input`.
The task goes ``working → input-required`` with a ``prompt`` artifact (the stream sends
``status input-required`` with the prompt as its message); a ``SendMessage`` naming the
task's ``taskId`` answers it (:meth:`Asking.answer`: ``working`` again, the stream sends
``working resumed``) and the answer is returned to the workload. With
``lifecycle.input_timeout_secs`` set and no answer in time, the task fails ``input-timeout``
(``task_failed.cause: input_timeout``) and its scope is cancelled. A cancel while waiting is
the runner's ordinary cancel, traced with ``phase: input``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

from murmur.session.results import Results
from murmur.session.states import TaskEvent, TaskState
from murmur.session.tasks.book import InputSlot, Task, TaskBook
from murmur.session.trace import SessionTrace
from murmur.workload import InputTimeout, InputUnavailable

__all__ = ["INPUT_TIMEOUT", "Asking", "one_line"]

INPUT_TIMEOUT = "input-timeout"
DEFAULT_PROMPT = "Please provide your input:"
LINE_CHARS = 80


def one_line(prompt: str, limit: int = LINE_CHARS) -> str:
    """The prompt cut to one line of at most ``limit`` characters (``…`` when cut; pure)."""
    lines = prompt.strip().splitlines() or [""]
    first = " ".join(lines[0].split())
    if len(lines) > 1 or len(first) > limit:
        return first[: limit - 1] + "…"
    return first


class Asking:
    """Questions of the session's tasks and their answers.

    Args:
        book (TaskBook): the session's tasks.
        trace (SessionTrace): where ``task_failed`` goes on a timeout.
        results (Results): the task's result files.
        timeout (int | None): ``lifecycle.input_timeout_secs`` (None: wait forever).
        on_change (Callable[[], None]): called when a task starts or stops waiting (the
            running record shows waiting tasks to ``mur ps``); settable as ``on_change``.
    """

    def __init__(
        self,
        book: TaskBook,
        trace: SessionTrace,
        results: Results,
        *,
        timeout: int | None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._book = book
        self._trace = trace
        self._results = results
        self._timeout = timeout
        self.on_change = on_change

    def waiting(self) -> list[dict[str, str]]:
        """The tasks now in ``input-required``, in arrival order: ``{task_id, prompt}`` with
        the prompt cut to one line (the running record's ``waiting``)."""
        return [{"task_id": t.id, "prompt": one_line(t.prompt or "")}
                for t in self._book if t.state is TaskState.INPUT_REQUIRED]

    async def ask(self, task: Task, prompt: str) -> str:
        """Suspend ``task`` until its question is answered; return the answer.

        Raises:
            InputUnavailable: the task is not running (or not an A2A task).
            InputTimeout: no answer within the timeout; the task has failed ``input-timeout``.
            trio.Cancelled: the task was cancelled while waiting.
        """
        if task.source != "a2a":
            raise InputUnavailable("request-input is not available outside an A2A task context")
        slot = InputSlot()
        task.reply = slot
        if not self._book.apply(task, TaskEvent.ASK, message=prompt.strip() or DEFAULT_PROMPT):
            task.reply = None
            raise InputUnavailable(f"task {task.id} is not running, so it cannot wait for input")
        self.on_change()
        try:
            with trio.move_on_after(self._timeout if self._timeout is not None else math.inf):
                return await slot.wait()
            self._time_out(task)
            raise InputTimeout(f"no answer came within {self._timeout} s (lifecycle.input_timeout_secs)")
        finally:
            task.reply = None
            self.on_change()

    def answer(self, task: Task, text: str) -> bool:
        """Deliver ``text`` to ``task``'s question; False when it is not waiting."""
        slot = task.reply
        if task.state is not TaskState.INPUT_REQUIRED or slot is None:
            return False
        if not self._book.apply(task, TaskEvent.ANSWER):
            return False
        return slot.give(text)

    def _time_out(self, task: Task) -> None:
        if not self._book.apply(task, TaskEvent.FAIL, message=INPUT_TIMEOUT):
            return
        self._trace.emit("task_failed", parent=task.start_event_id, task_id=task.id, turn=0,
                         cause="input_timeout", reason=INPUT_TIMEOUT)
        self._results.result(task, "failed", INPUT_TIMEOUT)
        if task.scope is not None:
            task.scope.cancel()
