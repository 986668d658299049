"""Admission: which tasks a session holds, whether it takes another, and its closing.

Spec: spec/session.md "Lifecycle" and "Tasks". The decisions are pure and live in
:mod:`murmur.session.lifecycle` (:meth:`~murmur.session.lifecycle.Policy.admit`,
:func:`~murmur.session.lifecycle.refusal`); :class:`Intake` keeps the facts they are asked
about (the running task, the lane queue, how many tasks were taken, whether the session is
closing) and acts on the answer: a taken task is queued, a refused one is ``rejected`` with a
``task_rejected`` record.
"""

from __future__ import annotations

import trio

from murmur.session.lifecycle import Admission, Policy, refusal
from murmur.session.origin import LOCAL_USER
from murmur.session.states import TaskEvent, TaskState
from murmur.session.tasks.book import Task, TaskBook
from murmur.session.tasks.lanes import LaneQueue
from murmur.session.trace import SessionTrace


class Intake:
    """The session's admission desk.

    Args:
        policy (Policy): the effective lifecycle.
        book (TaskBook): the session's tasks.
        trace (SessionTrace): where ``task_rejected`` is written.

    Attributes:
        running (Task | None): the task running now; only :meth:`start` and :meth:`finish`
            change it (the desk alone records which task runs).
        latest (Task | None): the task running now, or else the last one that ran (None
            before the first starts); only :meth:`start` changes it.
        taken (int): tasks taken so far, from any source (the ``single`` rule, the idle rule).
        closing (bool): the session takes no more tasks.
        close_cause (str): why it closed (``session_ended`` | ``session_stopped``), the
            ``task_rejected.cause`` of the tasks refused since.
    """

    def __init__(self, policy: Policy, book: TaskBook, trace: SessionTrace) -> None:
        self._policy = policy
        self._book = book
        self._trace = trace
        self._queue = LaneQueue()
        self._changed = trio.Event()
        self._running: Task | None = None
        self._latest: Task | None = None
        self.taken = 0
        self.closing = False
        self.close_cause = "session_ended"

    @property
    def running(self) -> Task | None:
        """The task running now, or None."""
        return self._running

    @property
    def latest(self) -> Task | None:
        """The task running now, or else the last one that ran (None before the first)."""
        return self._latest

    def start(self, task: Task) -> None:
        """``task`` runs now (the runner took it)."""
        assert self._running is None, "one task runs at a time"
        self._running = task
        self._latest = task

    def finish(self, task: Task) -> None:
        """``task`` no longer runs."""
        if self._running is task:
            self._running = None

    def decide(self) -> Admission:
        """Whether a task arriving now is taken (asked before the task is made)."""
        return self._policy.admit(
            running=self.running is not None, queued=len(self._queue), taken=self.taken, closing=self.closing
        )

    def settle(self, task: Task, admission: Admission) -> None:
        """Act on :meth:`decide`'s answer: queue ``task``, or reject it."""
        if admission is Admission.ACCEPT:
            self._enqueue(task)
        else:
            self._reject(task, admission)

    def take_local(self, text: str, context_id: str | None = None) -> Task:
        """Queue a task of the local user (the ``--task`` text, or the idle rule's empty run),
        in ``context_id`` when given (``mur run --context`` / ``--resume``).

        Returns:
            Task: the new ``submitted`` task (``source: task_md``, ``launch``).
        """
        msg = {"messageId": "msg_local", "role": "ROLE_USER", "parts": [{"text": text}]}
        task = self._book.new(
            text=text,
            message=msg,
            origin=LOCAL_USER.origin,
            trust=LOCAL_USER.trust,
            lane=LOCAL_USER.lane,
            source="task_md",
            launch=True,
            context_id=context_id,
        )
        self._enqueue(task)
        return task

    def close(self, *, cause: str) -> None:
        """Take no more tasks, and reject every queued one (the first cause is kept)."""
        if not self.closing:
            self.closing = True
            self.close_cause = cause
        for tid in self._queue.drain():
            task = self._book.get(tid)
            if task is not None:
                self._reject(task, Admission.CLOSING)

    def withdraw(self, task_id: str) -> None:
        """Take a queued task off the queue (it is being cancelled)."""
        self._queue.remove(task_id)

    @property
    def waiting(self) -> int:
        """How many tasks are queued."""
        return len(self._queue)

    def next(self) -> Task | None:
        """Pop the next queued task; None when the popped one no longer waits (or none did)."""
        tid = self._queue.pop()
        task = self._book.get(tid) if tid is not None else None
        return task if task is not None and task.state is TaskState.SUBMITTED else None

    @property
    def changed(self) -> trio.Event:
        """Set at the next change the runner waits for (a task queued or cancelled, a wind-down)."""
        return self._changed

    def wake(self) -> None:
        """Wake whoever waits on :attr:`changed`."""
        self._changed.set()
        self._changed = trio.Event()

    def _enqueue(self, task: Task) -> None:
        self._queue.push(task.id, task.lane)
        self.taken += 1
        self.wake()

    def _reject(self, task: Task, admission: Admission) -> None:
        reason, cause = refusal(admission, close_cause=self.close_cause)
        if self._book.apply(task, TaskEvent.REJECT, message=reason):
            self._trace.emit(
                "task_rejected",
                task_id=task.id,
                context_id=task.context_id,
                source=task.source,
                cause=cause,
                reason=reason,
            )
