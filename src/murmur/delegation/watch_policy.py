"""Who reports a delegation's outcome (pure).

``spec/delegation.md`` "Watching a started child" and "Exactly one reporter". The single
delegation bound (how long a started child is watched, counted from its readiness line) is
resolved once at composition (:func:`murmur.timing.delegation_bound`) and handed to the
launcher.

* :func:`launcher_report` — what the parent's launcher records when the child's own report
  is missing: ``crashed`` (the child exited without a completion), ``terminated`` (the parent
  ended the delegation itself, or the child watch expired — naming the bound in seconds).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from murmur import exitstatus

DETAIL_LINES = 8  # stderr lines kept in a launcher report's detail


class Ending(enum.Enum):
    """Why the launcher stopped watching a started child."""

    EXITED = "exited"  # the child's process ended by itself
    STOPPED = "stopped"  # the parent ended the delegation (its session or task ended)
    EXPIRED = "expired"  # the child watch bound passed


@attrs.frozen
class LauncherReport:
    """What the launcher writes when it, not the child, reports.

    Attributes:
        status (str): ``crashed`` | ``terminated``.
        detail (str): the exit status and the child's last stderr lines, or the bound.
        post (bool): whether the report is posted to the delegating session (False when the
            parent ended the delegation itself: "recorded and posted to nobody").
    """

    status: str
    detail: str
    post: bool


def _with_tail(head: str, tail: Sequence[str]) -> str:
    lines = [line for line in tail if line.strip()][-DETAIL_LINES:]
    return head + ("; last stderr lines:\n" + "\n".join(lines) if lines else "")


def launcher_report(
    ending: Ending,
    *,
    returncode: int | None,
    stderr_tail: Sequence[str] = (),
    bound: int,
    reason: str | None = None,
) -> LauncherReport:
    """The launcher's report for a child that left no completion of its own.

    Args:
        ending (Ending): why the watch ended.
        returncode (int | None): the child's exit status (negative: killed by that signal).
        stderr_tail (Sequence[str]): the child's last stderr lines.
        bound (int): the child watch bound in seconds.
        reason (str | None): for ``STOPPED``, why the parent ended it.

    Returns:
        LauncherReport: ``crashed`` (posted) for ``EXITED``; ``terminated`` naming the bound
        (posted) for ``EXPIRED``; ``terminated`` (posted to nobody) for ``STOPPED``.
    """
    if ending is Ending.EXITED:
        return LauncherReport(
            "crashed",
            _with_tail(f"the child exited without reporting a completion ({exitstatus.describe(returncode)})", stderr_tail),
            post=True,
        )
    if ending is Ending.EXPIRED:
        return LauncherReport(
            "terminated",
            f"the child was still running at lifecycle.delegation_deadline_secs ({bound} s) and was ended",
            post=True,
        )
    return LauncherReport(
        "terminated",
        f"the delegating capsule ended the delegation ({reason or 'its task ended'})",
        post=False,
    )
