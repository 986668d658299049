"""A small confinement for the hook's tests: it adds ``MURMUR_TEST_CONFINED=1`` to the
environment, lowers ``RLIMIT_NOFILE`` in the child, and (given a descriptor) writes
``<pid> <cgroup>`` there from the child, after the unit join, before exec.

Importable by the warm starter as ``procs.marker`` (the test puts ``tests/`` on its
``PYTHONPATH``); importing it registers its loader.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from murmur.procs import register_loader

KIND = "test-marker"
NOFILE = 77


class Marker:
    def __init__(self, fd: int | None = None) -> None:
        self.fd = fd

    def argv(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        return {**env, "MURMUR_TEST_CONFINED": "1"}

    def pass_fds(self) -> tuple[int, ...]:
        return () if self.fd is None else (self.fd,)

    def child_setup(self) -> Callable[[], None] | None:
        fd = self.fd

        def setup() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
            if fd is not None:
                with open("/proc/self/cgroup", "rb") as f:
                    cg = f.read().strip().split(b"::")[-1]
                os.write(fd, b"%d %s\n" % (os.getpid(), cg))

        return setup

    def to_wire(self) -> dict[str, Any]:
        return {"kind": KIND, "module": "procs.marker", "fd": self.fd}


def load(data: Mapping[str, Any]) -> Marker:
    fd = data.get("fd")
    return Marker(fd if isinstance(fd, int) else None)


register_loader(KIND, load)
