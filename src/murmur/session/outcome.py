"""How a session ends: its ``session_end.exit_status``, the closing diagnostic, the exit code (pure).

Spec: spec/session.md "How a session ends". The session gathers the facts (the wind-down that
fired, the deciding task's status, what could not be written) and asks here; nothing in this
module reads a clock, a file or the session.

=====================================  ==================================  ===========
The session ended because              ``exit_status``                     exit
=====================================  ==================================  ===========
a wind-down with a fixed status        that status (``deadline_reached``,  1, its own
(the deadline, a failed trace)         ``failed``)                         diagnostic
its deciding task did not complete     that task's status                  1, E-RUN-040
a wind-down cancelled the running      the wind-down's ``busy_status``     0 for
task                                   (``canceled``, ``formation_ended``)  formation_ended
anything else                          ``ok``                              0
=====================================  ==================================  ===========

Then, in this order: a refused launch is ``failed`` with its refusal; an ok ending whose
running record was left behind, or whose records files could not be written, is ``failed``
with that diagnostic.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from murmur.diagnostics import Diagnostic, error
from murmur.session.records import records_lost
from murmur.session.states import TaskState
from murmur.session.winddown import WindDown
from murmur.workload import TaskOutcome

OK_STATUSES = frozenset({"ok", "formation_ended"})
"""``session_end.exit_status`` values that exit 0."""


def deciding_status(
    wind_down: WindDown | None, *, deciding: str | None, canceled_by_wind: bool, see: str
) -> tuple[str, Diagnostic | None]:
    """The status the session's work decides, and its diagnostic.

    Args:
        wind_down (WindDown | None): the wind-down that fired, if one did.
        deciding (str | None): the deciding task's ``task_end.exit_status`` when it was not ok.
        canceled_by_wind (bool): the wind-down cancelled the task that was running.
        see (str): where to look, for the ``E-RUN-040`` hint (result.txt and trace paths).

    Returns:
        tuple[str, Diagnostic | None]: ``(exit_status, diagnostic)``; no diagnostic for an
        ok status.
    """
    if wind_down is not None and wind_down.status is not None:
        return wind_down.status, wind_down.diagnostic
    if deciding is not None:
        status = deciding
    elif wind_down is not None and canceled_by_wind:
        status = wind_down.busy_status
    else:
        status = "ok"
    if status in OK_STATUSES:
        return status, None
    return status, error("E-RUN-040", f"the session's deciding task did not complete ({status})", hint=f"see {see}")


def final_status(
    status: str,
    diagnostic: Diagnostic | None,
    *,
    refusal: Diagnostic | None = None,
    left_behind: Diagnostic | None = None,
    lost: Sequence[tuple[Path, str]] = (),
) -> tuple[str, Diagnostic | None]:
    """The ending once the launch refusal and the records are counted.

    Args:
        status (str), diagnostic (Diagnostic | None): from :func:`deciding_status`.
        refusal (Diagnostic | None): a start hook's or the door's refusal of the launch.
        left_behind (Diagnostic | None): the running record could not be removed.
        lost (Sequence[tuple[Path, str]]): records files that could not be written, with why.
    """
    if refusal is not None:
        return "failed", refusal
    if diagnostic is None and left_behind is not None and not lost:
        return "failed", left_behind
    if diagnostic is None and lost:
        return "failed", records_lost(list(lost))
    return status, diagnostic


def exit_code(status: str, diagnostic: Diagnostic | None) -> int:
    """0 for ``ok``/``formation_ended`` without a diagnostic; else 1."""
    return 0 if status in OK_STATUSES and diagnostic is None else 1


def task_exit_status(state: TaskState, outcome: TaskOutcome | None) -> str:
    """A task's ``task_end.exit_status``: ``ok``, ``canceled``, or the workload's failure status
    (``failed`` when the workload gave none)."""
    if state is TaskState.COMPLETED:
        return "ok"
    if state is TaskState.CANCELED:
        return "canceled"
    return outcome.status if outcome is not None and outcome.status != "ok" else "failed"


def deciding_task(exit_status: str, outcome: TaskOutcome | None) -> tuple[str | None, str | None]:
    """What the task that ends the session gives its ending: ``(deciding status, reason)``.

    Args:
        exit_status (str): the task's ``task_end.exit_status`` (:func:`task_exit_status`).
        outcome (TaskOutcome | None): what the workload returned (None when it was cancelled).

    Returns:
        tuple[str | None, str | None]: ``(None, None)`` for an ``ok`` task; else its status,
        and the workload's failure text when it gave one (``SessionSummary.reason``).
    """
    if exit_status == "ok":
        return None, None
    return exit_status, (outcome.answer if outcome is not None and outcome.status != "ok" else None)
