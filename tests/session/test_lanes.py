"""Tests of lane ordering: user > peer > bg, FIFO within a lane."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur.session.tasks.lanes import LANES, LaneQueue


class TestLaneQueue:
    def test_priority_then_fifo(self) -> None:
        """The highest non-empty lane goes first; each lane is FIFO."""
        q = LaneQueue()
        for tid, lane in [("b1", "bg"), ("p1", "peer"), ("b2", "bg"), ("u1", "user"), ("p2", "peer")]:
            q.push(tid, lane)
        assert q.drain() == ["u1", "p1", "p2", "b1", "b2"]
        assert q.pop() is None

    def test_remove(self) -> None:
        """A queued task can be taken out (cancel before start)."""
        q = LaneQueue()
        q.push("a", "bg")
        q.push("b", "bg")
        assert q.remove("a") is True
        assert q.remove("a") is False
        assert "b" in q and "a" not in q
        assert len(q) == 1

    def test_unknown_lane(self) -> None:
        """An unknown lane is a programming error."""
        with pytest.raises(ValueError, match="unknown lane"):
            LaneQueue().push("x", "vip")

    @given(st.lists(st.tuples(st.integers(0, 1000), st.sampled_from(LANES)), unique_by=lambda t: t[0]))
    def test_order_property(self, items: list[tuple[int, str]]) -> None:
        """Draining gives lanes in priority order and arrival order within each."""
        q = LaneQueue()
        for n, lane in items:
            q.push(str(n), lane)
        expected = [str(n) for lane in LANES for n, ln in items if ln == lane]
        assert q.drain() == expected
