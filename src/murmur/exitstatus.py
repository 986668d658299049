"""The words for a process's exit status, and the status a shell would report (pure).

Specification: spec/formation.md "Readiness" and spec/delegation.md "Watching a started child"
word an ended member or child with :func:`describe`. A ``returncode`` is Python's: ``n >= 0``
for an exit status, ``-sig`` for a death by signal, None while it runs.
"""

from __future__ import annotations

import signal

__all__ = ["describe", "shell_status"]


def describe(code: int | None) -> str:
    """``status 3`` for an exit status, ``signal SIGKILL`` for ``-9``, ``still running`` for None."""
    if code is None:
        return "still running"
    if code >= 0:
        return f"status {code}"
    try:
        return f"signal {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


def shell_status(code: int) -> int:
    """An exit status as a shell reports it: ``n``, or ``128 + sig`` for ``-sig``."""
    return code if code >= 0 else 128 - code
