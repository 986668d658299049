"""The figure that stopped a command, named with the manifest key that raises it (pure;
spec/containment.md "Limits")."""

from __future__ import annotations

import signal

import pytest

from murmur.sandbox.limits import Limits, stopped_by


@pytest.mark.parametrize("stderr", [
    b"sh: 0: Cannot fork\n",                                            # dash
    b"bash: fork: retry: Resource temporarily unavailable\n",           # bash
    b"BlockingIOError: [Errno 11] Resource temporarily unavailable\n",  # Python
    b"sh: can't fork: Resource temporarily unavailable\n",              # busybox
])
def test_a_failed_fork_names_the_process_ceiling_and_its_key(stderr: bytes) -> None:
    text = stopped_by(Limits(max_processes=8), 2, stderr)
    assert text == ("raising capabilities.resources.max_processes (now 8 processes) would allow it: "
                    "the process-count ceiling stopped it (a fork failed)")


def test_the_cgroup_pids_figure_is_named_when_it_is_the_binding_one() -> None:
    text = stopped_by(Limits(cgroup_pids_max=16), 2, b"sh: 0: Cannot fork\n")
    assert text is not None and text.startswith("raising capabilities.resources.cgroup_pids_max (now 16 processes)")
    both = stopped_by(Limits(max_processes=32, cgroup_pids_max=16), 2, b"sh: 0: Cannot fork\n")
    assert both is not None and "cgroup_pids_max (now 16 processes)" in both  # the lower figure binds


def test_cpu_and_memory_ceilings_name_their_keys() -> None:
    cpu = stopped_by(Limits(cpu_seconds=3), -signal.SIGXCPU, b"")
    assert cpu == "raising capabilities.resources.cpu_seconds (now 3 s of CPU) would allow it: that ceiling stopped it"
    mem = stopped_by(Limits(memory_bytes=1 << 20), 1, b"MemoryError\n")
    assert mem is not None and mem.startswith("raising capabilities.resources.memory_bytes (now 1048576 bytes)")


def test_no_ceiling_no_sentence() -> None:
    assert stopped_by(Limits(), 2, b"sh: 0: Cannot fork\n") is None  # nothing set: not ours
    assert stopped_by(Limits(max_processes=8), 1, b"cat: x: No such file or directory\n") is None
