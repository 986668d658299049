"""The process-group class: groups, the child subreaper, and adopted orphans.

Specification: ``spec/session.md`` "Containment" (the ``groups`` class). Every command starts
in a process group (and session) of its own; killing its unit is ``killpg``. A runtime marks
itself ``PR_SET_CHILD_SUBREAPER`` so that when a command's process exits, whatever it left
running — a ``setsid`` or double-forked escapee included — is re-parented to the runtime
rather than to init, and the runtime can find and kill it (:func:`kill_adopted`). What this
class cannot catch: an escapee whose runtime was SIGKILLed (it goes to the next subreaper up,
or init).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
from collections.abc import Collection

_PR_SET_CHILD_SUBREAPER = 36
_subreaper = False


def become_subreaper() -> bool:
    """Mark this process a child subreaper (once); False when the host refuses it."""
    global _subreaper
    if _subreaper:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _subreaper = int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        _subreaper = False
    return _subreaper


def killpg(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal group ``pgid``; False when it is empty or not ours (never raises)."""
    if pgid <= 1:
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still exists (a zombie counts as alive)."""
    if pgid <= 1:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def children_of(pid: int) -> list[tuple[int, int]]:
    """``(child pid, its process group)`` for every live process whose parent is ``pid``.

    Reads each ``/proc/<n>/stat`` with one ``os.read`` (about 4x faster than a text read per
    file: a sweep runs when every command ends, so this is on a shell step's path).
    """
    me = str(pid).encode()
    out: list[tuple[int, int]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            data = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = data.rpartition(b")")[2].split()
        if len(fields) >= 3 and fields[1] == me and fields[0] != b"Z":
            out.append((int(name), int(fields[2])))
    return out


def kill_adopted(known: Collection[int], *, spare_groups: Collection[int] = ()) -> int:
    """SIGKILL (and reap) every child of this process it did not start itself.

    With the subreaper mark, an escapee whose parent exited becomes our child. Those in a
    group of ``spare_groups`` (a command still running) are left to that command's end.

    Args:
        known (Collection[int]): pids this process started (Trio owns and reaps those).
        spare_groups (Collection[int]): process groups of commands still running.

    Returns:
        int: how many processes were killed.
    """
    me = os.getpid()
    killed = 0
    for pid, pgid in children_of(me):
        if pid in known or pgid in spare_groups:
            continue
        if pgid != os.getpgrp():
            killpg(pgid)
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            continue
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return killed
