"""The janitor as a real process (``python -I -S janitor.py``), fed registrations on stdin.

Each test starts the janitor in a session of its own, as its owner does, and the processes
it registers; a fixture kills whatever the test started. The events waited on are the victims'
exits (``Process.wait``), the janitor's exit, and pidfds; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from murmur.containment import cgroup, janitor

from .conftest import Owned, alive, cgroup_only, present, start_time

SCRIPT = Path(janitor.__file__)


class Janitor:
    """A running janitor: write lines to it, close its stdin, wait for its exit."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.closed_at: float | None = None

    async def send(self, *msgs: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        for m in msgs:
            await self.proc.stdin.send_all(m if isinstance(m, bytes) else (json.dumps(m) + "\n").encode())

    async def eof(self) -> None:
        """Close the lifeline (the owner is gone); remembers when."""
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()
        self.closed_at = trio.current_time()

    async def exited(self, within: float) -> tuple[int, float]:
        """(exit status, seconds from EOF to exit); fails after ``within`` seconds."""
        with trio.fail_after(within):
            status = await self.proc.wait()
        assert self.closed_at is not None
        return status, trio.current_time() - self.closed_at


@asynccontextmanager
async def running_janitor(owned: Owned) -> AsyncIterator[Janitor]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-I", "-S", str(SCRIPT)], stdin=subprocess.PIPE, start_new_session=True
    )
    owned.add(proc.pid)
    try:
        yield Janitor(proc)
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()


@asynccontextmanager
async def victim(owned: Owned, argv: list[str] | None = None) -> AsyncIterator[trio.Process]:
    """A process the janitor should kill, leading a group of its own."""
    proc = await trio.lowlevel.open_process(argv or ["/bin/sleep", "300"], start_new_session=True)
    owned.add(proc.pid)
    try:
        yield proc
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()


def group_unit(key: str, proc: trio.Process, *, watch: int, start: str | None) -> dict[str, Any]:
    return {"add": "group", "key": key, "pgid": proc.pid, "pid": watch, "start": start or ""}


async def dead_pid() -> tuple[int, str]:
    """A pid (and its start time) whose process has ended and been reaped."""
    proc = await trio.lowlevel.open_process(["/bin/sleep", "300"])
    start = start_time(proc.pid)
    assert start is not None
    proc.kill()
    await proc.wait()
    return proc.pid, start


async def killed(proc: trio.Process, within: float) -> float:
    """Seconds until ``proc`` died by SIGKILL (fails after ``within``)."""
    t0 = trio.current_time()
    with trio.fail_after(within):
        assert await proc.wait() == -signal.SIGKILL
    return trio.current_time() - t0


async def test_eof_with_nothing_registered_exits_at_once(owned: Owned) -> None:
    async with running_janitor(owned) as j:
        await j.send({"bound": 10})
        await j.eof()
        status, took = await j.exited(within=3)
        assert status == 0 and took < 3


async def test_eof_kills_a_unit_whose_watched_pid_is_dead_at_once(owned: Owned) -> None:
    watched, start = await dead_pid()
    async with running_janitor(owned) as j, victim(owned) as v:
        await j.send({"bound": 10}, group_unit("cmd-1#a", v, watch=watched, start=start))
        await j.eof()
        assert await killed(v, within=3) < 3  # not the 10 s bound
        status, took = await j.exited(within=3)
        assert status == 0 and took < 3


async def test_a_reused_pid_counts_as_dead(owned: Owned) -> None:
    async with running_janitor(owned) as j, victim(owned) as v:
        # the watched pid is alive, but its start time is not the registered one
        await j.send({"bound": 10}, group_unit("m#a", v, watch=v.pid, start="1"))
        await j.eof()
        assert await killed(v, within=3) < 3


async def test_a_live_watched_pid_is_given_the_bound(owned: Owned) -> None:
    async with running_janitor(owned) as j, victim(owned) as v:
        await j.send({"bound": 1.0}, group_unit("m#a", v, watch=v.pid, start=start_time(v.pid)))
        await j.eof()
        took = await killed(v, within=5)
        assert 0.9 <= took < 4  # killed at the bound, not before
        status, _ = await j.exited(within=3)
        assert status == 0


async def test_a_watched_pid_that_ends_during_the_bound_ends_the_wait(owned: Owned) -> None:
    async with running_janitor(owned) as j, victim(owned) as watched, victim(owned) as v:
        await j.send({"bound": 30}, group_unit("m#a", v, watch=watched.pid, start=start_time(watched.pid)))
        await j.eof()
        assert v.returncode is None
        watched.kill()
        await watched.wait()
        assert await killed(v, within=5) < 5  # well inside the 30 s bound
        status, took = await j.exited(within=3)
        assert status == 0 and took < 8


async def test_a_negative_bound_is_zero(owned: Owned) -> None:
    async with running_janitor(owned) as j, victim(owned) as v:
        await j.send({"bound": 60}, {"bound": -5}, group_unit("m#a", v, watch=v.pid, start=start_time(v.pid)))
        await j.eof()
        assert await killed(v, within=3) < 3  # the last bound sent counts


async def test_drop_forgets_a_unit(owned: Owned) -> None:
    watched, start = await dead_pid()
    async with running_janitor(owned) as j, victim(owned) as v, victim(owned) as other:
        await j.send(
            {"bound": 10},
            group_unit("cmd-1#a", v, watch=watched, start=start),
            group_unit("cmd-2#b", other, watch=watched, start=start),
            {"drop": "cmd-1#a"},
        )
        await j.eof()
        assert await killed(other, within=3) < 3
        status, _ = await j.exited(within=3)
        assert status == 0
        assert v.returncode is None and alive(v.pid, start_time(v.pid))  # the dropped one lives


async def test_a_later_registration_of_a_key_replaces_it(owned: Owned) -> None:
    watched, start = await dead_pid()
    async with running_janitor(owned) as j, victim(owned) as first, victim(owned) as second:
        await j.send(
            {"bound": 10},
            group_unit("k", first, watch=watched, start=start),
            group_unit("k", second, watch=watched, start=start),
        )
        await j.eof()
        assert await killed(second, within=3) < 3
        await j.exited(within=3)
        assert first.returncode is None


async def test_malformed_lines_are_ignored(owned: Owned) -> None:
    watched, start = await dead_pid()
    async with running_janitor(owned) as j, victim(owned) as v:
        line = (json.dumps(group_unit("cmd-1#a", v, watch=watched, start=start)) + "\n").encode()
        await j.send(
            b"not json\n",
            b"[1, 2]\n",
            b"\xff\xfe\x00\n",
            b"\n",
            b'{"add": "group"}\n',  # no key
            b'{"add": "group", "key": 7, "pgid": 1}\n',
            b'{"drop": 5}\n',
            b'{"bound": "soon"}\n',
            b'{"add": "group", "key": "odd", "pgid": "12", "pid": "x"}\n',
            line[:17],  # one registration split across two writes
        )
        await trio.testing.wait_all_tasks_blocked()
        await j.send(line[17:])
        await j.eof()
        assert await killed(v, within=3) < 3
        status, _ = await j.exited(within=3)
        assert status == 0


def ignored_signals(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigIgn line")


async def test_sigterm_sigint_sighup_are_ignored(owned: Owned) -> None:
    watched, start = await dead_pid()
    wanted = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGHUP - 1))
    async with running_janitor(owned) as j, victim(owned) as v:
        with trio.fail_after(5):  # its dispositions are set first thing: wait for the kernel to show them
            while ignored_signals(j.proc.pid) & wanted != wanted:  # noqa: ASYNC110 - /proc has no event
                await trio.sleep(0.005)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            os.kill(j.proc.pid, sig)
        await j.send({"bound": 10}, group_unit("cmd-1#a", v, watch=watched, start=start))
        await j.eof()
        assert await killed(v, within=3) < 3
        status, _ = await j.exited(within=3)
        assert status == 0  # not -15: it is still the janitor that cleaned up


async def test_it_gives_up_at_bound_plus_five_and_the_last_word(owned: Owned) -> None:
    # a group whose zombie leader nobody reaps never empties: the janitor must still leave
    zombie = await trio.lowlevel.open_process(["/bin/true"], start_new_session=True)
    owned.add(zombie.pid)
    try:
        await trio.to_thread.run_sync(os.waitid, os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # not reaped
        async with running_janitor(owned) as j:
            await j.send({"bound": 0}, {"add": "group", "key": "z", "pgid": zombie.pid, "pid": 0})
            await j.eof()
            status, took = await j.exited(within=8 + janitor.LAST_WORD)
            assert status == 0
            # bound + 5 s, then the last word: the moment it gives what it killed to exit
            assert 4.5 + janitor.LAST_WORD <= took < 7.5 + janitor.LAST_WORD
    finally:
        with trio.CancelScope(shield=True):
            await zombie.wait()


async def test_a_pid_unit_is_killed_at_the_bound(owned: Owned) -> None:
    # Unit.started(own_group=False): a process in its owner's group (the entry member, groups class)
    async with running_janitor(owned) as j:
        proc = await trio.lowlevel.open_process(["/bin/sleep", "300"])
        owned.add(proc.pid)
        try:
            await j.send({"bound": 0.5}, {"add": "pid", "key": "m0#a", "pgid": 0, "pid": proc.pid,
                                          "start": start_time(proc.pid)})
            await j.eof()
            assert await killed(proc, within=5) < 5
        finally:
            with trio.CancelScope(shield=True):
                proc.kill()
                await proc.wait()


ESCAPE = "setsid /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $!; exec /bin/sleep 300"


@cgroup_only
async def test_a_cgroup_unit_is_killed_whole_and_removed(owned: Owned, scratch: Path) -> None:
    watched, start = await dead_pid()
    unit = cgroup.make_unit(scratch / "cmd-1")
    cgroup.make_unit(unit / "inner")
    proc = await trio.lowlevel.open_process(
        [*cgroup.join_prefix(unit), "/bin/sh", "-c", ESCAPE], stdout=subprocess.PIPE
    )
    owned.add(proc.pid)
    try:
        assert proc.stdout is not None
        with trio.fail_after(5):
            escapee = owned.add(int(await proc.stdout.receive_some()))
        escapee_start = start_time(escapee)
        async with running_janitor(owned) as j:
            await j.send({"bound": 10}, {"add": "cgroup", "key": "cmd-1#a", "path": str(unit),
                                         "pid": watched, "start": start})
            await j.eof()
            assert await killed(proc, within=3) < 3
            status, _ = await j.exited(within=3)
            assert status == 0
        assert not alive(escapee, escapee_start)
        assert not unit.exists()  # removed, sub-unit first
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.aclose()


@cgroup_only
async def test_a_session_unit_waits_for_its_winding_down_members(owned: Owned, scratch: Path) -> None:
    # as a launcher registers them: the session unit (no watched process) and a member's
    # sub-unit whose process may wind down for the bound; the session unit must not cut it short
    member_unit = cgroup.make_unit(scratch / "m0-1")
    proc = await trio.lowlevel.open_process(
        [*cgroup.join_prefix(member_unit), "/bin/sh", "-c", "echo up; exec /bin/sleep 300"],
        stdout=subprocess.PIPE,
    )
    owned.add(proc.pid)
    try:
        assert proc.stdout is not None
        with trio.fail_after(5):
            assert await proc.stdout.receive_some() == b"up\n"
        async with running_janitor(owned) as j:
            await j.send(
                {"bound": 1.0},
                {"add": "cgroup", "key": "session", "path": str(scratch), "pid": 0, "start": ""},
                {"add": "cgroup", "key": "m0#a", "path": str(member_unit), "pid": proc.pid,
                 "start": start_time(proc.pid)},
            )
            await j.eof()
            took = await killed(proc, within=5)
            assert took >= 0.9  # given its bound
            status, _ = await j.exited(within=5)
            assert status == 0
        assert not present(scratch)
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.aclose()


def test_the_janitor_imports_only_the_standard_library() -> None:
    got = subprocess.run(
        [sys.executable, "-I", "-S", "-c",
         f"import runpy, sys; runpy.run_path({str(SCRIPT)!r}, run_name='probe'); "
         "print(sorted(m for m in sys.modules if m.startswith('murmur')))"],
        capture_output=True, text=True, timeout=10, check=True,
    )
    assert got.stdout.strip() == "[]"


