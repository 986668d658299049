"""Table tests of how a session ends: exit_status, the closing diagnostic, the exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from murmur.diagnostics import error
from murmur.session.outcome import (
    deciding_status,
    deciding_task,
    exit_code,
    final_status,
    task_exit_status,
)
from murmur.session.states import TaskState
from murmur.session.winddown import (
    cascade_wind_down,
    deadline_wind_down,
    lifeline_wind_down,
    signal_wind_down,
)
from murmur.workload import TaskOutcome

SIGTERM = signal_wind_down("SIGTERM")
DEADLINE = deadline_wind_down(1_900_000_000.0)
FORMATION = lifeline_wind_down(trace_event="formation_ended", detail="the formation ended", busy_status="formation_ended")
SPAWNER = lifeline_wind_down(trace_event="spawner_ended", detail="the spawner ended")


class TestDecidingStatus:
    @pytest.mark.parametrize(
        ("wind", "deciding", "canceled", "status", "code"),
        [
            (None, None, False, "ok", None),
            (None, "failed", False, "failed", "E-RUN-040"),
            (None, "max_turns_reached", False, "max_turns_reached", "E-RUN-040"),
            (None, "canceled", False, "canceled", "E-RUN-040"),
            (SIGTERM, None, False, "ok", None),  # an idle session stopped by a signal
            (SIGTERM, None, True, "canceled", "E-RUN-040"),
            (cascade_wind_down(), None, True, "canceled", "E-RUN-040"),
            (FORMATION, None, True, "formation_ended", None),
            (FORMATION, None, False, "ok", None),
            (SPAWNER, None, True, "canceled", "E-RUN-040"),
            (SIGTERM, "failed", True, "failed", "E-RUN-040"),  # the deciding task ended first
            (DEADLINE, None, False, "deadline_reached", "E-RUN-053"),  # whatever happened
            (DEADLINE, None, True, "deadline_reached", "E-RUN-053"),
            (DEADLINE, "failed", False, "deadline_reached", "E-RUN-053"),
        ],
    )
    def test_table(self, wind, deciding, canceled, status, code) -> None:
        """Each ending maps to the documented exit_status and diagnostic."""
        got, diag = deciding_status(wind, deciding=deciding, canceled_by_wind=canceled, see="out/result.txt")
        assert got == status
        assert (diag.code if diag is not None else None) == code

    def test_hint_names_where_to_look(self) -> None:
        """E-RUN-040 says which status and where the result and trace are."""
        _, diag = deciding_status(None, deciding="failed", canceled_by_wind=False, see="R and T")
        assert diag is not None
        assert diag.message == "the session's deciding task did not complete (failed)"
        assert diag.hint == "see R and T"


REFUSED = error("E-RUN-001", "the door could not be bound")
LEFT = error("E-RUN-007", "the running record was left behind")
E040 = error("E-RUN-040", "the session's deciding task did not complete (failed)")
LOST = [(Path("/r/out/result.txt"), "No space left on device")]


class TestFinalStatus:
    @pytest.mark.parametrize(
        ("status", "diag", "kw", "want_status", "want_code"),
        [
            ("ok", None, {}, "ok", None),
            ("ok", None, {"refusal": REFUSED}, "failed", "E-RUN-001"),
            ("failed", E040, {"refusal": REFUSED}, "failed", "E-RUN-001"),
            ("ok", None, {"left_behind": LEFT}, "failed", "E-RUN-007"),
            ("ok", None, {"lost": LOST}, "failed", "E-RUN-007"),
            ("ok", None, {"left_behind": LEFT, "lost": LOST}, "failed", "E-RUN-007"),
            ("failed", E040, {"lost": LOST}, "failed", "E-RUN-040"),  # the task's failure comes first
            ("failed", E040, {"left_behind": LEFT}, "failed", "E-RUN-040"),
            ("formation_ended", None, {"lost": LOST}, "failed", "E-RUN-007"),
        ],
    )
    def test_table(self, status, diag, kw, want_status, want_code) -> None:
        """A refusal wins; then the records left behind or lost turn an ok ending into failed."""
        got, d = final_status(status, diag, **kw)
        assert got == want_status
        assert (d.code if d is not None else None) == want_code

    def test_lost_names_the_file(self) -> None:
        """The lost-records diagnostic names the first file and why."""
        _, d = final_status("ok", None, lost=LOST)
        assert d is not None and "No space left on device" in d.message


class TestExitCode:
    @pytest.mark.parametrize(
        ("status", "diag", "code"),
        [
            ("ok", None, 0),
            ("formation_ended", None, 0),
            ("ok", REFUSED, 1),
            ("failed", E040, 1),
            ("canceled", E040, 1),
            ("deadline_reached", DEADLINE.diagnostic, 1),
        ],
    )
    def test_table(self, status, diag, code) -> None:
        """Only ok and formation_ended without a diagnostic exit 0."""
        assert exit_code(status, diag) == code


class TestTaskExitStatus:
    @pytest.mark.parametrize(
        ("state", "outcome", "status"),
        [
            (TaskState.COMPLETED, TaskOutcome("ok", "x"), "ok"),
            (TaskState.CANCELED, None, "canceled"),
            (TaskState.CANCELED, TaskOutcome("failed", "x"), "canceled"),
            (TaskState.FAILED, TaskOutcome("failed", "it broke"), "failed"),
            (TaskState.FAILED, TaskOutcome("max_turns_reached", "m"), "max_turns_reached"),
            (TaskState.FAILED, TaskOutcome("no_answer", ""), "no_answer"),
            (TaskState.FAILED, None, "failed"),
            (TaskState.FAILED, TaskOutcome("ok", "late"), "failed"),
        ],
    )
    def test_table(self, state, outcome, status) -> None:
        """task_end.exit_status: ok, canceled, or the workload's failure status."""
        assert task_exit_status(state, outcome) == status


class TestDecidingTask:
    @pytest.mark.parametrize(
        ("exit_status", "outcome", "expected"),
        [
            ("ok", TaskOutcome("ok", "fine"), (None, None)),
            ("failed", TaskOutcome("failed", "it broke"), ("failed", "it broke")),
            ("max_turns_reached", TaskOutcome("max_turns_reached", "m"), ("max_turns_reached", "m")),
            ("canceled", None, ("canceled", None)),  # cancelled: the workload gave no text
            ("canceled", TaskOutcome("ok", "late"), ("canceled", None)),  # its answer is not a reason
            ("failed", TaskOutcome("ok", "late"), ("failed", None)),
        ],
    )
    def test_table(self, exit_status, outcome, expected) -> None:
        """An ok task decides nothing; any other gives its status, and the failure text it had."""
        assert deciding_task(exit_status, outcome) == expected
