"""What the host reports about a process: whether it runs, and signalling it.

A pid alone names a process only while it lives; once it is reaped the number can be reused.
A pid together with its start time (:mod:`murmur.procstat`, clock ticks since boot) names
exactly one process. ``formation.json`` records both for the launcher (``spec/formation.md``
"``formation.json``"), as decimal text, and ``mur stop <formation-id>`` and the retention pass
check both before trusting a marker.
"""

from __future__ import annotations

import os
import signal

from murmur import procstat

NO_PROCESS = -1
"""A start time no process has: what a record's unreadable start time stands for."""


def recorded_start(value: object) -> int | None:
    """A start time as a record holds it (pure): an int, or decimal text as ``formation.json`` has.

    Returns:
        int | None: None when the record holds none (absent, ``""``); :data:`NO_PROCESS` when it
        holds something that is not a whole number (then no running process matches it).
    """
    if isinstance(value, bool) or value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return NO_PROCESS


def is_running(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` is a live (non-zombie) process, and the same one that started at ``started``.

    Args:
        pid (int): a process id (non-positive values are never running).
        started (int | None): a start time from :func:`murmur.procstat.start_time`; when given,
            a process whose start time differs is another process that reused the number.

    Returns:
        bool: True only for a live process that matches ``started`` when it is given.
    """
    if pid <= 0:
        return False
    stat = procstat.read_stat(pid)
    if stat is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return started is None
        return started is None
    if stat.state == "Z":
        return False
    return started is None or stat.start_time == started


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
