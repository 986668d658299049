"""How a formation launch ends: the launcher's exit status and its closing refusals (pure).

Spec: spec/formation.md "How a formation ends". Nothing here reads a clock or touches a
process; :class:`murmur.formation.launch.launcher.FormationLaunch` gathers the facts and asks.

=========================================  ==============================================
The formation ended because                The launcher exits with
=========================================  ==============================================
a signal (SIGINT, SIGTERM, SIGHUP)         128 + the signal
a peer did not come up; the entry member   1 (``E-RUN-045``; ``E-RUN-047``)
could not be started
the ``--deadline`` fell before the entry   1 (``E-RUN-053``)
member started
the entry member ended; the deadline fell  the entry member's status as a shell reports it
after it started                           (128 + signal when a signal ended it)
=========================================  ==============================================
"""

from __future__ import annotations

import enum

from murmur.diagnostics import Diagnostic, error
from murmur.exitstatus import shell_status


class EndReason(enum.Enum):
    """Why a formation ended: the first explicit end, or the members' scope's deadline."""

    ENTRY_ENDED = "entry_ended"
    SIGNAL = "signal"
    PEER_FAILED = "peer_failed"
    DEADLINE = "deadline"
    REFUSED = "refused"  # the entry member could not be started (artifact changed, spawn)


def exit_status(
    reason: EndReason | None,
    *,
    signum: int | None,
    entry_started: bool,
    entry_code: int | None,
) -> int:
    """The launcher's exit status (spec/formation.md "How a formation ends"; pure).

    Args:
        reason (EndReason | None): why the formation ended.
        signum (int | None): the signal, for :attr:`EndReason.SIGNAL`.
        entry_started (bool): whether the entry member was started.
        entry_code (int | None): its returncode (``-sig`` when a signal ended it).

    Returns:
        int: 128 + signal for a signalled launcher; 1 for a refusal before the entry member
        started; otherwise the entry member's status as a shell reports it.
    """
    if reason is EndReason.SIGNAL and signum is not None:
        return 128 + signum
    if reason in (EndReason.PEER_FAILED, EndReason.REFUSED):
        return 1
    if not entry_started or entry_code is None:
        return 1
    return shell_status(entry_code)


def closing_diagnostics(
    failures: list[tuple[str, str, str, str]],
    stopped: list[tuple[str, int]],
    *,
    deadline_first: bool,
) -> list[Diagnostic]:
    """The refusals the launcher prints once every member has stopped, in this order:
    each ``E-RUN-047``, then one ``E-RUN-045`` naming every member that did not come up, or
    instead one ``E-RUN-053`` when the deadline fell before the entry member started (a peer
    refused at that same instant is a consequence of the stop, not a second cause).

    Args:
        failures (list[tuple[str, str, str, str]]): ``(name, capsule@version, reason, code)``
            per refusing member, in roster order, the entry member last; ``code`` is
            ``E-RUN-045`` or ``E-RUN-047``.
        stopped (list[tuple[str, int]]): ``(name, pid)`` of every member the launcher stopped.
        deadline_first (bool): the deadline ended the launch before the entry member started.
    """
    out = [artifact_changed(name, coordinate, reason)
           for name, coordinate, reason, code in failures if code == "E-RUN-047"]
    did_not_come_up = [(name, coordinate, reason)
                       for name, coordinate, reason, code in failures if code == "E-RUN-045"]
    if deadline_first:
        out.append(deadline_before_entry(stopped))
    elif did_not_come_up:
        out.append(not_launched(did_not_come_up, stopped))
    return out


def _stopped_text(stopped: list[tuple[str, int]]) -> str:
    if not stopped:
        return "stopped: none"
    return "stopped: " + ", ".join(f"{n} (pid {pid})" for n, pid in stopped)


def not_launched(
    failures: list[tuple[str, str, str]], stopped: list[tuple[str, int]]
) -> Diagnostic:
    """The ``E-RUN-045`` report (spec/formation.md "How a formation ends").

    Args:
        failures (list[tuple[str, str, str]]): ``(name, capsule@version, reason)`` per member
            that did not come up, in roster order.
        stopped (list[tuple[str, int]]): ``(name, pid)`` of every member the launcher
            stopped, in roster order.
    """
    body = "the formation could not be launched"
    for name, coordinate, reason in failures:
        body += f"\n  '{name}' ({coordinate}): {reason}"
    body += "\n  " + _stopped_text(stopped)
    return error(
        "E-RUN-045",
        body,
        hint="fix the member named above (run it alone with `mur run --capsule … "
        "--capsule-version …` to see it start), then launch the roster again",
    )


def artifact_changed(name: str, coordinate: str, reason: str) -> Diagnostic:
    """The ``E-RUN-047`` refusal for one member."""
    return error(
        "E-RUN-047",
        f"member '{name}' ({coordinate}): {reason}",
        hint="the installed artifact is not the one admission bound this launch to; "
        "reinstall it and launch the roster again",
    )


def deadline_before_entry(stopped: list[tuple[str, int]]) -> Diagnostic:
    """The launcher's ``E-RUN-053``: the deadline fell before the entry member started."""
    return error(
        "E-RUN-053",
        "the formation's --deadline was reached before its entry member started\n  "
        + _stopped_text(stopped),
        hint="give the formation a later --deadline",
    )
