"""``--die-with-parent``: a process that winds down when the process that started it dies.

Specification: ``spec/session.md`` "Starting a session" and ``spec/roost.md`` (the flag).
Linux's ``PR_SET_PDEATHSIG`` delivers a signal (SIGTERM here) to this process when its parent
dies, so ``mur run`` winds down exactly as on SIGTERM, and ``mur-roost`` stops as on SIGTERM.
A parent that died *before* the request was made is caught by the check that follows it: the
parent named (``--die-with-parent=PID``), or else any parent, must still be this process's
parent, or the signal is sent at once. Without ``=PID``, a parent that died before this
process's first line of Python cannot be told from a subreaper that adopted it: name the pid
where that matters (tests do).

The kernel sends the signal when the *thread* that forked this process ends; a parent that
starts ``mur`` from a worker thread that then exits ends it early.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None, sig: int = signal.SIGTERM) -> bool:
    """Ask for ``sig`` when the parent dies; send it now if the parent is already gone.

    Args:
        parent (int | None): the parent's pid as the caller named it; None: the parent this
            process has now.
        sig (int): the signal (SIGTERM: the graceful wind-down).

    Returns:
        bool: True when the kernel accepted the request (False on a host without prctl; then
        only the parent check was made).
    """
    expected = parent if parent else os.getppid()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        accepted = int(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        accepted = False
    if os.getppid() != expected or expected == 1:
        os.kill(os.getpid(), sig)  # the parent is gone already: wind down as if it had just died
    return accepted
