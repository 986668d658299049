"""The task state machine: a task ends exactly once (pure; spec/session.md "Task states").

States use murmur's words (``submitted``, ``working``, ``completed``, ``failed``,
``canceled``, ``rejected``); :func:`wire_state` gives the A2A 1.0 names. Events are what can
happen to a task. :func:`step` decides, for a state and an event, the next state, or ``None``
when the event changes nothing: a late completion never overwrites ``canceled``, a cancel never
overwrites ``completed``, and nothing leaves a terminal state.

Transition table (anything not listed is refused)::

    submitted --start--> working
    submitted --cancel--> canceled      (CancelTask before any work, wind-down of a queued task)
    submitted --reject--> rejected      (busy, closing)
    working   --complete--> completed
    working   --fail--> failed
    working   --cancel--> canceled
    working   --ask--> input-required   (the workload asked its user; spec/conversations.md)
    input-required --answer--> working  (a SendMessage naming the task)
    input-required --fail--> failed     (``input-timeout``)
    input-required --cancel--> canceled (CancelTask or wind-down while waiting)
"""

from __future__ import annotations

import enum


class TaskState(enum.Enum):
    """A task's state, valued with murmur's word for it."""

    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input-required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"

    @property
    def terminal(self) -> bool:
        """Whether no event can change this state any more."""
        return self in _TERMINAL

    @property
    def wire(self) -> str:
        """The A2A 1.0 enum name, e.g. ``TASK_STATE_COMPLETED``."""
        return "TASK_STATE_" + self.name


_TERMINAL = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)


class TaskEvent(enum.Enum):
    """Something that happens to a task."""

    START = "start"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    REJECT = "reject"
    ASK = "ask"
    ANSWER = "answer"


_TABLE: dict[tuple[TaskState, TaskEvent], TaskState] = {
    (TaskState.SUBMITTED, TaskEvent.START): TaskState.WORKING,
    (TaskState.SUBMITTED, TaskEvent.CANCEL): TaskState.CANCELED,
    (TaskState.SUBMITTED, TaskEvent.REJECT): TaskState.REJECTED,
    (TaskState.WORKING, TaskEvent.COMPLETE): TaskState.COMPLETED,
    (TaskState.WORKING, TaskEvent.FAIL): TaskState.FAILED,
    (TaskState.WORKING, TaskEvent.CANCEL): TaskState.CANCELED,
    (TaskState.WORKING, TaskEvent.ASK): TaskState.INPUT_REQUIRED,
    (TaskState.INPUT_REQUIRED, TaskEvent.ANSWER): TaskState.WORKING,
    (TaskState.INPUT_REQUIRED, TaskEvent.FAIL): TaskState.FAILED,
    (TaskState.INPUT_REQUIRED, TaskEvent.CANCEL): TaskState.CANCELED,
}


def step(state: TaskState, event: TaskEvent) -> TaskState | None:
    """The state after ``event``, or ``None`` when the event changes nothing.

    Args:
        state (TaskState): the task's current state.
        event (TaskEvent): what happened.

    Returns:
        TaskState | None: the next state; ``None`` means "refused: keep the current state"
        (every event on a terminal state, a second start, a completion before start).
    """
    return _TABLE.get((state, event))


def wire_state(state: TaskState) -> str:
    """The A2A 1.0 name of ``state`` (``TASK_STATE_…``)."""
    return state.wire


def state_from_wire(name: str) -> TaskState | None:
    """The state an A2A 1.0 name (``TASK_STATE_…``) denotes, or ``None`` if it names none."""
    if not name.startswith("TASK_STATE_"):
        return None
    try:
        return TaskState[name.removeprefix("TASK_STATE_")]
    except KeyError:
        return None
