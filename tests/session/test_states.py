"""Table tests of the task state machine: a task ends exactly once."""

from __future__ import annotations

import itertools

import pytest

from murmur.session.states import TaskEvent, TaskState, state_from_wire, step, wire_state

S, E = TaskState, TaskEvent

ALLOWED = {
    (S.SUBMITTED, E.START): S.WORKING,
    (S.SUBMITTED, E.CANCEL): S.CANCELED,
    (S.SUBMITTED, E.REJECT): S.REJECTED,
    (S.WORKING, E.COMPLETE): S.COMPLETED,
    (S.WORKING, E.FAIL): S.FAILED,
    (S.WORKING, E.CANCEL): S.CANCELED,
    (S.WORKING, E.ASK): S.INPUT_REQUIRED,
    (S.INPUT_REQUIRED, E.ANSWER): S.WORKING,
    (S.INPUT_REQUIRED, E.FAIL): S.FAILED,
    (S.INPUT_REQUIRED, E.CANCEL): S.CANCELED,
}


class TestStep:
    @pytest.mark.parametrize(("state", "event"), list(itertools.product(S, E)))
    def test_every_row(self, state: TaskState, event: TaskEvent) -> None:
        """Every (state, event) pair gives exactly the table's answer; all else is refused."""
        assert step(state, event) is ALLOWED.get((state, event))

    @pytest.mark.parametrize("event", list(E))
    @pytest.mark.parametrize("state", [s for s in S if s.terminal])
    def test_terminal_is_final(self, state: TaskState, event: TaskEvent) -> None:
        """Nothing leaves a terminal state."""
        assert step(state, event) is None

    def test_late_completion_never_overwrites_canceled(self) -> None:
        """complete after cancel is refused."""
        assert step(S.CANCELED, E.COMPLETE) is None
        assert step(S.CANCELED, E.FAIL) is None

    def test_cancel_never_overwrites_completed(self) -> None:
        """cancel after complete is refused."""
        assert step(S.COMPLETED, E.CANCEL) is None

    def test_cancel_before_start(self) -> None:
        """A submitted task can be cancelled before any work."""
        assert step(S.SUBMITTED, E.CANCEL) is S.CANCELED


class TestWire:
    @pytest.mark.parametrize("state", list(S))
    def test_round_trip(self, state: TaskState) -> None:
        """Wire names are TASK_STATE_<NAME> and map back."""
        assert wire_state(state) == "TASK_STATE_" + state.name
        assert state_from_wire(wire_state(state)) is state

    @pytest.mark.parametrize("name", ["completed", "TASK_STATE_NOPE", ""])
    def test_unknown(self, name: str) -> None:
        """Anything else names no state."""
        assert state_from_wire(name) is None

    def test_terminal_set(self) -> None:
        """Exactly completed, failed, canceled, rejected are terminal."""
        assert {s for s in S if s.terminal} == {S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED}
