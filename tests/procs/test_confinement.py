"""The sandbox hook (issue 25): a confinement is applied on the exec path and on the warm
path, after the containment join, and nowhere is one applied without being asked.

Uses the small confinement of ``tests/procs/marker.py`` (it lowers ``RLIMIT_NOFILE`` in the
child, adds a variable, and reports the child's cgroup at setup time on a descriptor).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from murmur import containment, procs
from murmur.starter.client import Starter, WarmProcess

from .marker import NOFILE, Marker

TESTS = Path(__file__).resolve().parents[1]
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
PROBE = ["sh", "-c", 'ulimit -n; echo "${MURMUR_TEST_CONFINED:-none}"']


async def test_exec_path_applies_the_confinement(tmp_path: Path) -> None:
    """``run_process`` with the confinement: the child's fd limit is the one its setup set
    and its environment has the variable; the same command without it has neither."""
    confined = await procs.run_process(PROBE, env=ENV, cwd=tmp_path, confinement=Marker())
    plain = await procs.run_process(PROBE, env=ENV, cwd=tmp_path)
    assert (confined.returncode, confined.stdout) == (0, f"{NOFILE}\n1\n".encode())
    assert plain.returncode == 0 and plain.stdout != confined.stdout
    assert plain.stdout.split()[1] == b"none" and plain.stdout.split()[0] != str(NOFILE).encode()


async def test_exec_path_joins_the_unit_before_the_setup(tmp_path: Path) -> None:
    """The setup runs in the child after the join: the cgroup it reports is the unit's (cgroup class)."""
    r, w = os.pipe()
    try:
        proc = await procs.open_process(["true"], label="cmd", env=ENV, cwd=tmp_path, confinement=Marker(w),
                                        stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    finally:
        os.close(w)
    try:
        assert await proc.wait() == 0
        pid, cgroup = os.read(r, 4096).split()
        assert int(pid) == proc.pid
        _assert_in_unit(proc.unit, cgroup.decode())
    finally:
        os.close(r)
        await proc.kill_and_reap()


def _assert_in_unit(unit: containment.Unit | None, cgroup: str) -> None:
    assert unit is not None
    host = containment.here().host
    if unit.path is None or host.mount is None:
        return  # groups class: no cgroup to be in
    assert cgroup == "/" + str(unit.path.relative_to(host.mount)).lstrip("/")


def test_the_wire_form_round_trips() -> None:
    """What the warm starter gets rebuilds the same confinement (its module registers it)."""
    again = procs.from_wire(Marker(5).to_wire())
    assert isinstance(again, Marker) and again.fd == 5
    assert procs.from_wire(None) is None
    with pytest.raises(ValueError, match="no confinement loader"):
        procs.from_wire({"kind": "nobody-registers-this"})
    with pytest.raises(ValueError, match="does not import"):
        procs.from_wire({"kind": "elsewhere", "module": "no_such_module_here"})


@pytest.fixture
async def warm() -> AsyncIterator[Starter]:
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    s = Starter.launch({**os.environ, "PYTHONPATH": path})
    assert s is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(s.run)
        try:
            yield s
        finally:
            nursery.cancel_scope.cancel()


async def _fork(s: Starter, tmp_path: Path, confinement: Marker | None) -> tuple[procs.OwnedProcess, bytes]:
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    if confinement is not None:
        confinement.fd = w
    fds = [(devnull, 0), (out_w, 1), (out_w, 2)]

    async def fork(argv: list[str], env: dict[str, str], cgroup: str | None, wire: dict[str, Any] | None,
                   extra: tuple[int, ...]) -> WarmProcess:
        pid = await s.start(argv, env, str(tmp_path), [*fds, *((fd, fd) for fd in extra)], session=True,
                            cgroup=cgroup, confinement=wire)
        return WarmProcess(s, pid, None, None)

    try:
        with trio.fail_after(60):
            proc = await procs.fork_process(["mur", "--version"], label="confined", env=dict(os.environ),
                                            forker=fork, confinement=confinement, winds_down=False)
    finally:
        for fd in (w, out_w, devnull):
            os.close(fd)
    try:
        with trio.fail_after(60):
            assert await proc.wait() == 0
        os.set_blocking(r, False)
        try:
            marked = os.read(r, 4096)
        except BlockingIOError:
            marked = b""
    finally:
        os.close(r)
        os.close(out_r)
        await proc.kill_and_reap()
    return proc, marked


async def test_warm_path_applies_the_confinement_after_the_join(warm: Starter, tmp_path: Path) -> None:
    """The starter rebuilds the confinement from its wire form and runs its setup in the forked
    child, inside the unit; without one, nothing is written (negative control)."""
    proc, marked = await _fork(warm, tmp_path, Marker())
    pid, cgroup = marked.split()
    assert int(pid) == proc.pid
    _assert_in_unit(proc.unit, cgroup.decode())
    _plain, nothing = await _fork(warm, tmp_path, None)
    assert nothing == b""
