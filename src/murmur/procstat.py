"""What the host's ``/proc/<pid>/stat`` says of one process: its state, parent, group and start time.

A pid alone names a process only while it lives: once it is reaped the number can be reused.
A pid together with its **start time** (field 22, ``starttime``: clock ticks since boot) names
exactly one process, so every record that must survive its process — a running-session record
(spec/session.md "Running records"), ``formation.json`` (spec/formation.md), the host journal
(spec/tree.md "The journal"), a containment unit and its janitor (spec/session.md
"Containment"), a mur-roost registrant (spec/roost.md "When a session's process ends") —
stores both and trusts the pid only while the start time still matches.

The second field, the command name in parentheses, may itself hold spaces and parentheses
(``a) (b``): fields are counted from the *last* ``)``. A zombie still has its start time (its pid
cannot be reused until it is reaped); whether it is alive is for the caller to decide from
:attr:`ProcStat.state`.

Linux only; elsewhere every read answers None. Standard library and attrs only (tier 0 of
spec/architecture.md). The one process that cannot import this module is the janitor, which
runs as ``python -I -S`` with nothing of the package on its path: it keeps a copy of
:func:`parse_stat`'s rule, and ``tests/test_procstat.py`` holds both to the same table.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

__all__ = ["PROC", "ProcStat", "parent_pid", "parse_stat", "read_stat", "start_time"]

PROC = Path("/proc")


@attrs.frozen
class ProcStat:
    """The fields of one ``/proc/<pid>/stat`` line this runtime reads.

    Attributes:
        state (str): field 3, one letter (``R``, ``S``, ``D``, ``Z`` a zombie, ``X`` dead, …).
        ppid (int): field 4, the parent's pid.
        pgid (int): field 5, the process group.
        sid (int): field 6, the session.
        start_time (int): field 22, when the process started, in clock ticks since boot.
    """

    state: str
    ppid: int
    pgid: int
    sid: int
    start_time: int


def parse_stat(text: str) -> ProcStat | None:
    """The fields of a ``/proc/<pid>/stat`` line (pure).

    Args:
        text (str): the file's content, e.g. ``"7788 (cat) R 7786 7786 2030 … 57213 …"``.

    Returns:
        ProcStat | None: None when ``text`` is not such a line (no ``)``, fewer than 22 fields,
        or a number field that is not a whole number).
    """
    _, close, rest = text.rpartition(")")
    fields = rest.split()  # field 3 (the state) is at index 0, field n at index n - 3
    if not close or len(fields) < 20:
        return None
    try:
        return ProcStat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except ValueError:
        return None


def read_stat(pid: int, proc: Path = PROC) -> ProcStat | None:
    """What the host says of ``pid`` now; None when no such process exists (or it is unreadable).

    Args:
        pid (int): a process id.
        proc (Path): the proc file system (a test's folder in tests).
    """
    try:  # one open and one read: this runs several times per mur-roost registration
        fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)  # a stat line is well under a page; procfs hands it whole
    except OSError:
        return None
    finally:
        os.close(fd)
    return parse_stat(raw.decode("ascii", errors="replace"))


def start_time(pid: int, proc: Path = PROC) -> int | None:
    """When ``pid`` started, in clock ticks since boot (a zombie's too); None when it is gone."""
    stat = read_stat(pid, proc)
    return None if stat is None else stat.start_time


def parent_pid(pid: int, proc: Path = PROC) -> int | None:
    """The parent of ``pid`` (field 4); None when it is gone."""
    stat = read_stat(pid, proc)
    return None if stat is None else stat.ppid
