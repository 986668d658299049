"""What runs in a child between ``fork`` and ``exec``: the unit join, then the confinement.

Specification: ``spec/architecture.md`` "Where a process starts". Used on both start paths:
the exec path runs :func:`preexec` as ``preexec_fn`` (so no ``/bin/sh`` trampoline is exec'd
to join a cgroup unit); the warm starter's forked child calls :func:`join_cgroup` and then the
confinement's setup itself (:mod:`murmur.starter.child`).

Only system calls happen here: the parent has threads, and a child of a threaded process may
take no lock another thread could have held at the fork.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["JOIN_FAILED", "join_cgroup", "preexec"]

JOIN_FAILED = 125
"""The status of a child that could not join its unit (it ran nothing)."""


def join_cgroup(path: str) -> bool:
    """Write this process into unit ``path`` (its ``cgroup.procs``); False when it cannot."""
    try:
        fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def preexec(cgroup: str | None, setup: Callable[[], None] | None) -> Callable[[], None] | None:
    """The ``preexec_fn`` of an exec'd start: join ``cgroup`` (if any), then ``setup`` (if any).

    A child that cannot join writes ``murmur: could not join containment unit <path>`` on its
    stderr and exits :data:`JOIN_FAILED` before it runs anything, as the ``/bin/sh`` trampoline
    of :func:`murmur.containment.cgroup.join_prefix` does. None when there is nothing to do
    (the start then keeps ``vfork``).
    """
    if cgroup is None and setup is None:
        return None
    failed = f"murmur: could not join containment unit {cgroup}\n".encode()

    def run() -> None:
        if cgroup is not None and not join_cgroup(cgroup):
            try:
                os.write(2, failed)
            finally:
                os._exit(JOIN_FAILED)
        if setup is not None:
            setup()

    return run
