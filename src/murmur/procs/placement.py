"""Where a started process is placed: its containment unit (and this process's janitor).

Specification: ``spec/session.md`` "Containment" and ``spec/architecture.md`` "Where a
process starts". :func:`new_unit` is the only way the runtime makes a unit for a process it
is about to start: it first makes sure this process's janitor runs (a root's units must be
cleaned even after a SIGKILL of their owner; :func:`ensure_janitor`), then asks
:meth:`murmur.containment.Containment.new_unit`.
"""

from __future__ import annotations

from murmur import containment
from murmur.procs import detached

__all__ = ["ensure_janitor", "new_unit"]


def ensure_janitor(c: containment.Containment) -> None:
    """Start ``c``'s janitor if it needs one and has none yet (:func:`murmur.procs.detached.start_janitor`)."""
    if c.janitor_wanted():
        c.attach_janitor(detached.start_janitor(str(containment.JANITOR_SCRIPT)))


def new_unit(label: str, c: containment.Containment | None = None) -> containment.Unit:
    """A fresh unit of ``c`` (default: this process's, :func:`murmur.containment.here`) for one
    process about to start; ``label`` names it (``cmd``, a member's name, a delegation id)."""
    c = containment.here() if c is None else c
    ensure_janitor(c)
    return c.new_unit(label)
