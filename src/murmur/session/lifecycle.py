"""Lifecycle decisions: admit a task, end after a task, the idle rule (pure).

Spec: spec/session.md "Lifecycle". ``task_acceptance`` ``none`` serves no task-starting
method; ``single`` takes one task, then the session ends; ``queue`` holds one running task plus
up to ``queue_depth`` waiting ones (overflow is rejected ``task rejected: capsule is busy``).
``after_task: sleep`` loops back for the next task, except under ``single`` where it behaves as
``exit``. Every combination except ``queue`` + ``sleep`` waits :data:`murmur.timing.IDLE_TIMEOUT`
seconds (``MURMUR_A2A_TIMEOUT_SECS``) for a first message, then runs the workload once with an
empty task and ends. A run started with ``--task`` ends with that task.
"""

from __future__ import annotations

import enum

import attrs

from murmur import timing
from murmur.manifest import AfterTask, Lifecycle, TaskAcceptance

BUSY_MESSAGE = "task rejected: capsule is busy"
CLOSING_MESSAGE = "task rejected: the session is closing"


class Admission(enum.Enum):
    """The door's answer to a task-starting request."""

    ACCEPT = "accept"
    BUSY = "busy"  # rejected: capsule is busy
    CLOSING = "closing"  # rejected: the session is closing
    NOT_SERVED = "not_served"  # task_acceptance none: the method is not served (-32601)


@attrs.frozen
class Policy:
    """The effective lifecycle of one session.

    Attributes:
        acceptance (TaskAcceptance): none | single | queue.
        queue_depth (int): waiting tasks held under ``queue`` (>= 0).
        after_task (AfterTask): exit | sleep (``single`` always behaves as exit).
        launch_task (bool): the session was started with a task (``--task``).
        idle_timeout (float | None): seconds to wait for a first task before the idle run;
            ``None`` waits forever (``queue`` + ``sleep``, or a launch task).
    """

    acceptance: TaskAcceptance
    queue_depth: int
    after_task: AfterTask
    launch_task: bool
    idle_timeout: float | None

    @classmethod
    def build(
        cls,
        lifecycle: Lifecycle,
        *,
        acceptance: TaskAcceptance | None = None,
        after_task: AfterTask | None = None,
        launch_task: bool = False,
        idle_timeout: float = timing.IDLE_TIMEOUT,
        no_idle_timeout: bool = False,
    ) -> Policy:
        """The policy from the manifest's block and the command-line overrides.

        Args:
            lifecycle (Lifecycle): the manifest's ``lifecycle`` block.
            acceptance (TaskAcceptance | None): ``--lifecycle-task-acceptance``.
            after_task (AfterTask | None): ``--lifecycle-after-task``.
            launch_task (bool): whether ``--task`` was given.
            idle_timeout (float): seconds of the idle rule (default 30).
            no_idle_timeout (bool): disable the idle rule (a task-less formation entry member).
        """
        acc = acceptance or lifecycle.task_acceptance
        after = after_task or lifecycle.after_task
        if acc is TaskAcceptance.SINGLE:
            after = AfterTask.EXIT
        waits_forever = (acc is TaskAcceptance.QUEUE and after is AfterTask.SLEEP) or no_idle_timeout
        return cls(
            acceptance=acc,
            queue_depth=max(0, lifecycle.queue_depth),
            after_task=after,
            launch_task=launch_task,
            idle_timeout=None if (waits_forever or launch_task) else idle_timeout,
        )

    @property
    def serves_tasks(self) -> bool:
        """Whether the door serves task-starting methods (false under ``none``)."""
        return self.acceptance is not TaskAcceptance.NONE

    def admit(self, *, running: bool, queued: int, taken: int, closing: bool) -> Admission:
        """Whether a new task is taken.

        Args:
            running (bool): a task is running now.
            queued (int): tasks waiting to start.
            taken (int): tasks this session has taken so far (any source).
            closing (bool): the session is ending (wind-down or its last task ended).
        """
        if not self.serves_tasks:
            return Admission.NOT_SERVED
        if closing:
            return Admission.CLOSING
        held = int(running) + queued
        if self.acceptance is TaskAcceptance.SINGLE:
            return Admission.ACCEPT if held == 0 and taken == 0 else Admission.BUSY
        return Admission.ACCEPT if held < 1 + self.queue_depth else Admission.BUSY

    def ends_after(self, *, launch_task: bool) -> bool:
        """Whether the session ends once the task that just ended is over.

        Args:
            launch_task (bool): the task that ended is the ``--task`` task (or the idle run).
        """
        if launch_task:
            return True
        if self.launch_task:
            return False  # the session ends with its launch task, not before
        return self.after_task is AfterTask.EXIT


def refusal(admission: Admission, *, close_cause: str) -> tuple[str, str]:
    """How a task that is not taken is refused: its ``task_rejected`` reason and cause.

    Args:
        admission (Admission): :meth:`Policy.admit`'s answer (``CLOSING`` for a queued task
            refused when the session closes).
        close_cause (str): why the session is closing (``session_ended`` | ``session_stopped``).

    Returns:
        tuple[str, str]: ``(reason, cause)``: :data:`BUSY_MESSAGE` and ``busy``, else
        :data:`CLOSING_MESSAGE` and ``close_cause``.

    Raises:
        ValueError: for ``ACCEPT`` (a taken task is not refused).
    """
    if admission is Admission.ACCEPT:
        raise ValueError("an accepted task is not refused")
    if admission is Admission.BUSY:
        return BUSY_MESSAGE, "busy"
    return CLOSING_MESSAGE, close_cause


def close_cause(*, stopped: bool) -> str:
    """``task_rejected.cause`` for tasks refused as the session closes: ``session_stopped``
    after a wind-down began, else ``session_ended`` (its last task ended)."""
    return "session_stopped" if stopped else "session_ended"


def parse_idle_timeout(value: str | None) -> float:
    """``MURMUR_A2A_TIMEOUT_SECS``: a positive number of seconds, else the 30 s default."""
    try:
        secs = float((value or "").strip())
    except ValueError:
        return timing.IDLE_TIMEOUT
    return secs if secs > 0 and secs == secs and secs != float("inf") else timing.IDLE_TIMEOUT
