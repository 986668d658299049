"""cgroup.py on this host: a unit is joined before exec, killed whole, waited on, removed.

These need the cgroup class; on a host that gives process groups they are skipped with the
reason :func:`murmur.containment.host.detect` gives.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio
import trio.testing

from murmur.containment import cgroup
from murmur.containment.host import pid_cgroup

from .conftest import HOST, SETSID_ESCAPEE, Owned, alive, cgroup_only, present, start_time

pytestmark = cgroup_only


READY = ["/bin/sh", "-c", "echo ready; exec /bin/sleep 300"]
"""A command that says ``ready`` once it runs (so it has joined its unit), then sleeps."""


async def start_ready(unit: Path) -> trio.Process:
    """Start :data:`READY` in ``unit`` and return once it said ``ready`` (bounded)."""
    proc = await trio.lowlevel.open_process([*cgroup.join_prefix(unit), *READY], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    with trio.fail_after(5):
        assert await proc.stdout.receive_some(6) == b"ready\n"
    return proc


async def reap(proc: trio.Process) -> None:
    """Kill and reap ``proc`` (shielded: a test's teardown)."""
    with trio.CancelScope(shield=True):
        proc.kill()
        await proc.wait()
        if proc.stdout is not None:
            await proc.stdout.aclose()


def rel(path: Path) -> str:
    """``path`` as ``/proc/<pid>/cgroup`` names it."""
    assert HOST.mount is not None
    return "/" + str(path.relative_to(HOST.mount))


def run_in(unit: Path, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cgroup.join_prefix(unit), *argv], capture_output=True, text=True, timeout=10, check=False, **kw
    )  # type: ignore[call-overload]


def test_make_unit_creates_and_reuses(scratch: Path) -> None:
    sub = cgroup.make_unit(scratch / "a")
    assert sub == scratch / "a" and (sub / "cgroup.procs").exists()
    assert cgroup.make_unit(scratch / "a") == sub  # an existing unit is reused


def test_make_unit_without_its_parent_raises(scratch: Path) -> None:
    with pytest.raises(FileNotFoundError):
        cgroup.make_unit(scratch / "missing" / "a")


def test_join_prefix_joins_before_exec(scratch: Path) -> None:
    # cat's first read of /proc/self/cgroup already names the unit: nothing ran outside it
    got = run_in(scratch, ["/bin/cat", "/proc/self/cgroup"])
    assert got.returncode == 0, got.stderr
    assert f"0::{rel(scratch)}\n" in got.stdout


def test_join_prefix_execs_so_the_command_keeps_the_pid(scratch: Path) -> None:
    proc = subprocess.Popen(
        [*cgroup.join_prefix(scratch), "/bin/sh", "-c", "echo $$"], stdout=subprocess.PIPE, text=True
    )
    out, _ = proc.communicate(timeout=10)
    assert int(out) == proc.pid


def test_join_prefix_passes_exactly_the_environment(scratch: Path) -> None:
    env = {"A": "1", "PATH": "/usr/bin:/bin"}
    got = run_in(scratch, ["/usr/bin/env"], env=env)
    assert got.returncode == 0, got.stderr
    assert dict(line.split("=", 1) for line in got.stdout.splitlines()) == env


def test_join_prefix_keep_pwd_keeps_it(scratch: Path, tmp_path: Path) -> None:
    env = {"PWD": str(tmp_path), "PATH": "/usr/bin:/bin"}
    got = subprocess.run(
        [*cgroup.join_prefix(scratch, keep_pwd=True), "/usr/bin/env"],
        capture_output=True, text=True, timeout=10, env=env, cwd=tmp_path, check=False,
    )
    assert f"PWD={tmp_path}" in got.stdout.splitlines()


def test_join_failure_never_starts_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    got = run_in(tmp_path / "no-such-unit", ["/usr/bin/touch", str(marker)])
    assert got.returncode == 125
    assert f"murmur: could not join containment unit {tmp_path / 'no-such-unit'}" in got.stderr
    assert not marker.exists()


async def test_procs_and_populated_follow_the_unit(scratch: Path) -> None:
    sub = cgroup.make_unit(scratch / "inner")
    assert not cgroup.populated(scratch) and cgroup.procs(scratch) == []
    proc = await start_ready(sub)
    try:
        assert cgroup.procs(sub) == [proc.pid]
        assert cgroup.procs(scratch) == [proc.pid]  # the parent lists its sub-units' too
        assert cgroup.populated(scratch) and cgroup.populated(sub)
    finally:
        await reap(proc)
    with trio.fail_after(5):
        await cgroup.wait_empty(scratch)
    assert not cgroup.populated(scratch) and cgroup.procs(scratch) == []


ESCAPEES = (
    f"{SETSID_ESCAPEE} "
    "( /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $! ); "
    "nohup /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $!"
)


async def test_kill_kills_a_setsid_escapee_and_a_double_fork(scratch: Path, owned: Owned) -> None:
    # the command prints its escapees' pids and exits: only the unit still knows them
    got = run_in(scratch, ["/bin/sh", "-c", ESCAPEES])
    assert got.returncode == 0, got.stderr
    pids = [owned.add(int(x)) for x in got.stdout.split()]
    starts = [start_time(p) for p in pids]
    assert len(pids) == 3 and all(starts)
    assert sorted(cgroup.procs(scratch)) == sorted(pids)
    assert all(pid_cgroup(p) == rel(scratch) for p in pids)
    assert sum(os.getsid(p) == p for p in pids) == 1  # the setsid one really left its session
    cgroup.kill(scratch)
    with trio.fail_after(5):
        await cgroup.wait_empty(scratch)
    assert not any(alive(p, s) for p, s in zip(pids, starts, strict=True))
    assert cgroup.remove(scratch) and not present(scratch)


async def test_kill_reaches_sub_units(scratch: Path, owned: Owned) -> None:
    sub = cgroup.make_unit(scratch / "deep")
    got = run_in(sub, ["/bin/sh", "-c", SETSID_ESCAPEE])
    pid = owned.add(int(got.stdout))
    start = start_time(pid)
    cgroup.kill(scratch)
    with trio.fail_after(5):
        await cgroup.wait_empty(scratch)
    assert not alive(pid, start)
    assert cgroup.remove(scratch) and not present(sub) and not present(scratch)


async def test_wait_empty_returns_on_the_event_after_kill(scratch: Path) -> None:
    fd = cgroup._inotify_fd(scratch)
    assert fd is not None  # this host notifies changes of cgroup.events: no polling
    os.close(fd)
    proc = await start_ready(scratch)
    returned = trio.Event()
    try:
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:

                async def waiter() -> None:
                    await cgroup.wait_empty(scratch)
                    returned.set()

                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                assert not returned.is_set()  # populated: it waits
                cgroup.kill(scratch)
        assert returned.is_set()
        assert await proc.wait() == -9
    finally:
        await reap(proc)


async def test_wait_empty_returns_at_once_for_empty_or_gone(scratch: Path, tmp_path: Path) -> None:
    with trio.fail_after(1):
        await cgroup.wait_empty(scratch)
        await cgroup.wait_empty(tmp_path / "gone")


async def test_remove_refuses_a_populated_unit(scratch: Path) -> None:
    proc = await start_ready(scratch)
    try:
        assert cgroup.remove(scratch) is False  # EBUSY: it stays
        assert present(scratch) and cgroup.procs(scratch) == [proc.pid]
    finally:
        await reap(proc)


def test_remove_takes_nested_empty_units(scratch: Path) -> None:
    cgroup.make_unit(cgroup.make_unit(scratch / "a") / "b")
    cgroup.make_unit(scratch / "c")
    assert cgroup.remove(scratch) is True
    assert not scratch.exists()


def test_a_unit_already_gone_is_quiet(tmp_path: Path, scratch: Path) -> None:
    gone = scratch / "never-made"
    cgroup.kill(gone)
    assert cgroup.procs(gone) == []
    assert cgroup.populated(gone) is False
    assert cgroup.remove(gone) is True
    assert cgroup.remove(scratch) is True
    cgroup.kill(scratch)  # removed a moment ago
    assert cgroup.remove(scratch) is True
