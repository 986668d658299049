"""Containment: every process a session starts is in a unit the runtime can kill as a whole.

Specification: ``spec/session.md`` "Containment". :func:`here` is this process's
:class:`Containment`; :func:`detect` tells which class the host gives. See
:mod:`murmur.containment.units` for the model, :mod:`~murmur.containment.cgroup` and
:mod:`~murmur.containment.groups` for the two classes, and
:mod:`~murmur.containment.janitor` for what survives a SIGKILLed owner. Units are made, and processes started in them, by :mod:`murmur.procs` only.
"""

from murmur.containment.groups import become_subreaper, killpg
from murmur.containment.host import (
    CGROUP,
    FORCE_ENV,
    GROUPS,
    UNIT_ENV,
    HostClass,
    detect,
    force_problem,
    pid_cgroup,
)
from murmur.containment.units import (
    JANITOR_SCRIPT,
    Containment,
    Unit,
    here,
    is_janitor,
    kill_all_here,
    reset_for_tests,
)

__all__ = [
    "CGROUP",
    "FORCE_ENV",
    "GROUPS",
    "JANITOR_SCRIPT",
    "UNIT_ENV",
    "Containment",
    "HostClass",
    "Unit",
    "become_subreaper",
    "detect",
    "force_problem",
    "here",
    "is_janitor",
    "kill_all_here",
    "killpg",
    "pid_cgroup",
    "reset_for_tests",
]
