"""Lifecycle matrix: admission, ending after a task, the idle rule."""

from __future__ import annotations

import pytest

from murmur import timing
from murmur.manifest.model import AfterTask, Lifecycle, TaskAcceptance
from murmur.session.lifecycle import (
    BUSY_MESSAGE,
    CLOSING_MESSAGE,
    Admission,
    Policy,
    close_cause,
    parse_idle_timeout,
    refusal,
)

A, T = TaskAcceptance, AfterTask


def policy(acc: TaskAcceptance, after: AfterTask, depth: int = 1, **kw: object) -> Policy:
    return Policy.build(Lifecycle(task_acceptance=acc, after_task=after, queue_depth=depth), **kw)  # type: ignore[arg-type]


class TestBuild:
    def test_overrides_win(self) -> None:
        """Command-line overrides replace the manifest's values."""
        p = Policy.build(Lifecycle(), acceptance=A.QUEUE, after_task=T.SLEEP)
        assert (p.acceptance, p.after_task) == (A.QUEUE, T.SLEEP)

    def test_single_sleep_behaves_as_exit(self) -> None:
        """single + sleep is single + exit."""
        assert policy(A.SINGLE, T.SLEEP).after_task is T.EXIT

    @pytest.mark.parametrize(
        ("acc", "after", "launch", "no_idle", "expected"),
        [
            (A.QUEUE, T.SLEEP, False, False, None),
            (A.QUEUE, T.EXIT, False, False, timing.IDLE_TIMEOUT),
            (A.SINGLE, T.EXIT, False, False, timing.IDLE_TIMEOUT),
            (A.SINGLE, T.SLEEP, False, False, timing.IDLE_TIMEOUT),
            (A.NONE, T.EXIT, False, False, timing.IDLE_TIMEOUT),
            (A.SINGLE, T.EXIT, True, False, None),
            (A.QUEUE, T.EXIT, False, True, None),
        ],
    )
    def test_idle_rule(self, acc: TaskAcceptance, after: AfterTask, launch: bool, no_idle: bool, expected: float | None) -> None:
        """Only queue+sleep, a launch task or an explicit opt-out wait forever."""
        assert policy(acc, after, launch_task=launch, no_idle_timeout=no_idle).idle_timeout == expected


class TestAdmit:
    @pytest.mark.parametrize(
        ("acc", "depth", "running", "queued", "taken", "expected"),
        [
            (A.NONE, 1, False, 0, 0, Admission.NOT_SERVED),
            (A.SINGLE, 1, False, 0, 0, Admission.ACCEPT),
            (A.SINGLE, 1, True, 0, 1, Admission.BUSY),
            (A.SINGLE, 1, False, 0, 1, Admission.BUSY),
            (A.SINGLE, 5, False, 1, 1, Admission.BUSY),
            (A.QUEUE, 1, False, 0, 0, Admission.ACCEPT),
            (A.QUEUE, 1, True, 0, 3, Admission.ACCEPT),
            (A.QUEUE, 1, True, 1, 3, Admission.BUSY),
            (A.QUEUE, 3, True, 2, 3, Admission.ACCEPT),
            (A.QUEUE, 3, True, 3, 3, Admission.BUSY),
            (A.QUEUE, 0, False, 0, 9, Admission.ACCEPT),
            (A.QUEUE, 0, True, 0, 9, Admission.BUSY),
        ],
    )
    def test_matrix(self, acc: TaskAcceptance, depth: int, running: bool, queued: int, taken: int, expected: Admission) -> None:
        """Capacity: single holds one task ever; queue holds one running plus depth waiting."""
        p = policy(acc, T.SLEEP, depth)
        assert p.admit(running=running, queued=queued, taken=taken, closing=False) is expected

    @pytest.mark.parametrize("acc", [A.SINGLE, A.QUEUE])
    def test_closing_refuses(self, acc: TaskAcceptance) -> None:
        """A closing session refuses every task as closing."""
        assert policy(acc, T.SLEEP).admit(running=False, queued=0, taken=0, closing=True) is Admission.CLOSING

    def test_none_wins_over_closing(self) -> None:
        """Under none the method is not served at all, closing or not."""
        assert policy(A.NONE, T.EXIT).admit(running=False, queued=0, taken=0, closing=True) is Admission.NOT_SERVED


class TestEndsAfter:
    @pytest.mark.parametrize(
        ("acc", "after", "launch_policy", "launch_task", "expected"),
        [
            (A.SINGLE, T.EXIT, False, False, True),
            (A.QUEUE, T.EXIT, False, False, True),
            (A.QUEUE, T.SLEEP, False, False, False),
            (A.QUEUE, T.SLEEP, True, True, True),
            (A.QUEUE, T.SLEEP, True, False, False),
            (A.QUEUE, T.EXIT, True, False, False),
            (A.SINGLE, T.SLEEP, False, False, True),
        ],
    )
    def test_matrix(self, acc: TaskAcceptance, after: AfterTask, launch_policy: bool, launch_task: bool, expected: bool) -> None:
        """exit ends after the first task; sleep never; a --task run ends with its task."""
        p = policy(acc, after, launch_task=launch_policy)
        assert p.ends_after(launch_task=launch_task) is expected


class TestIdleEnv:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [(None, 30.0), ("", 30.0), ("5", 5.0), ("0.5", 0.5), ("0", 30.0), ("-3", 30.0), ("x", 30.0), ("nan", 30.0), ("inf", 30.0)],
    )
    def test_parse(self, value: str | None, expected: float) -> None:
        """MURMUR_A2A_TIMEOUT_SECS takes a positive number, else the default."""
        assert parse_idle_timeout(value) == expected


class TestRefusal:
    @pytest.mark.parametrize(
        ("admission", "cause", "expected"),
        [
            (Admission.BUSY, "session_ended", (BUSY_MESSAGE, "busy")),
            (Admission.BUSY, "session_stopped", (BUSY_MESSAGE, "busy")),
            (Admission.CLOSING, "session_ended", (CLOSING_MESSAGE, "session_ended")),
            (Admission.CLOSING, "session_stopped", (CLOSING_MESSAGE, "session_stopped")),
            (Admission.NOT_SERVED, "session_ended", (CLOSING_MESSAGE, "session_ended")),
        ],
    )
    def test_table(self, admission: Admission, cause: str, expected: tuple[str, str]) -> None:
        """busy says the capsule is busy; any other refusal says the session is closing, and why."""
        assert refusal(admission, close_cause=cause) == expected

    def test_an_accepted_task_is_not_refused(self) -> None:
        """Asking how to refuse a taken task is a bug, not a message."""
        with pytest.raises(ValueError, match="not refused"):
            refusal(Admission.ACCEPT, close_cause="session_ended")

    @pytest.mark.parametrize(("stopped", "expected"), [(True, "session_stopped"), (False, "session_ended")])
    def test_close_cause(self, stopped: bool, expected: str) -> None:
        """A wind-down stops the session; otherwise its last task ended it."""
        assert close_cause(stopped=stopped) == expected
