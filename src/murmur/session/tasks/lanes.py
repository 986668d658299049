"""Lanes: which queued task runs next (pure; spec/session.md "Tasks").

Three lanes, ``user`` > ``peer`` > ``bg``. The next task is the front of the highest non-empty
lane; within a lane tasks run first in, first out. A running task is never preempted: the queue
only decides what starts next.
"""

from __future__ import annotations

from collections import deque

LANES: tuple[str, ...] = ("user", "peer", "bg")


class LaneQueue:
    """Pending task ids, one FIFO per lane.

    Raises:
        ValueError: from :meth:`push` when ``lane`` is not one of :data:`LANES`.
    """

    def __init__(self) -> None:
        self._lanes: dict[str, deque[str]] = {lane: deque() for lane in LANES}

    def push(self, task_id: str, lane: str) -> None:
        """Append ``task_id`` to the back of ``lane``."""
        if lane not in self._lanes:
            raise ValueError(f"unknown lane {lane!r}")
        self._lanes[lane].append(task_id)

    def pop(self) -> str | None:
        """Remove and return the next task id to run, or ``None`` when every lane is empty."""
        for lane in LANES:
            q = self._lanes[lane]
            if q:
                return q.popleft()
        return None

    def remove(self, task_id: str) -> bool:
        """Take ``task_id`` out of whichever lane holds it; whether it was there."""
        for q in self._lanes.values():
            try:
                q.remove(task_id)
            except ValueError:
                continue
            return True
        return False

    def drain(self) -> list[str]:
        """Remove and return every pending id, in the order they would have run."""
        out: list[str] = []
        while (tid := self.pop()) is not None:
            out.append(tid)
        return out

    def __len__(self) -> int:
        return sum(len(q) for q in self._lanes.values())

    def __contains__(self, task_id: object) -> bool:
        return any(task_id in q for q in self._lanes.values())
