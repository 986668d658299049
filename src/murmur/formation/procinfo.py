"""What the host reports about a process: whether it runs, and when it started.

A pid alone names a process only while it lives; once it is reaped the number can be reused.
A pid together with its start time names exactly one process. ``formation.json`` records both
for the launcher (``spec/formation.md`` "``formation.json``"), and ``mur stop <formation-id>`` and the
retention pass check both before trusting a marker.

Linux only: the start time is field 22 of ``/proc/<pid>/stat`` (clock ticks since boot), kept
as its decimal text.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None if unreadable.

    Index 0 is field 3 (the state letter); field ``n`` is at index ``n - 3``.
    """
    try:
        text = (_PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    _, sep, rest = text.rpartition(")")
    if not sep:
        return None
    return rest.split()


def start_time(pid: int) -> str | None:
    """When process ``pid`` started, as the host reports it.

    Args:
        pid (int): a process id.

    Returns:
        str | None: clock ticks since boot as decimal text, or None when the process does not
        exist or its stat file cannot be read.
    """
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return fields[19]


def parent_pid(pid: int) -> int | None:
    """The parent process id of ``pid`` (field 4 of its stat), or None when unreadable."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 2:
        return None
    try:
        return int(fields[1])
    except ValueError:
        return None


def is_running(pid: int, started: str | None = None) -> bool:
    """Whether ``pid`` is a live (non-zombie) process, and the same one that started at ``started``.

    Args:
        pid (int): a process id (non-positive values are never running).
        started (str | None): a start time from :func:`start_time`; when given and non-empty,
            a process whose start time differs is another process that reused the number.

    Returns:
        bool: True only for a live process that matches ``started`` when it is given.
    """
    if pid <= 0:
        return False
    fields = _stat_fields(pid)
    if fields is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return not started
        return not started
    if fields and fields[0] == "Z":
        return False
    if started:
        return len(fields) >= 20 and fields[19] == started
    return True


def signal_process(pid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``pid``; False when no such process exists any more."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is empty (already gone)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True
