"""groups.py: process-group kills, the child list, and killing adopted escapees.

These run on every host. The subreaper test runs in a child Python process that marks itself
``PR_SET_CHILD_SUBREAPER``, so the test process itself is never a subreaper, and it kills only
the processes it started.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import trio

from murmur.containment import groups

from .conftest import Owned, alive, start_time

_PR_GET_CHILD_SUBREAPER = 37


def is_subreaper() -> bool:
    """Whether this (the test) process is a child subreaper."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    flag = ctypes.c_int(0)
    assert libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0
    return flag.value != 0


def exited_unreaped(pid: int) -> None:
    """Block until child ``pid`` has exited, leaving it a zombie (not reaped)."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def test_killpg_and_group_alive_are_quiet_on_an_empty_group() -> None:
    proc = subprocess.Popen(["/bin/true"], start_new_session=True)
    proc.wait(timeout=10)  # reaped: its group is empty now
    assert groups.group_alive(proc.pid) is False
    assert groups.killpg(proc.pid) is False
    assert groups.killpg(proc.pid, signal.SIGTERM) is False


def test_killpg_refuses_pgid_0_and_1() -> None:
    for pgid in (-3, 0, 1):
        assert groups.killpg(pgid) is False
        assert groups.group_alive(pgid) is False


def test_killpg_kills_the_group_and_a_zombie_leader_counts_as_alive(owned: Owned) -> None:
    proc = subprocess.Popen(
        ["/bin/sh", "-c", "/bin/sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        owned.add(proc.pid)
        member = owned.add(int(proc.stdout.readline()))
        member_start = start_time(member)
        assert os.getpgid(member) == proc.pid
        assert groups.group_alive(proc.pid) is True
        assert groups.killpg(proc.pid) is True
        exited_unreaped(proc.pid)
        assert groups.group_alive(proc.pid) is True  # the zombie leader still holds the group
        assert proc.wait(timeout=10) == -signal.SIGKILL
        # the member was killed by the same group kill; it is init's to reap, so wait on a pidfd
        fd = os.pidfd_open(member)
        try:
            trio.run(_wait_fd, fd)
        finally:
            os.close(fd)
        assert not alive(member, member_start)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


async def _wait_fd(fd: int) -> None:
    with trio.fail_after(5):
        await trio.lowlevel.wait_readable(fd)


def test_children_of_lists_live_children_with_their_groups() -> None:
    a = subprocess.Popen(["/bin/sleep", "300"], start_new_session=True)
    b = subprocess.Popen(["/bin/sleep", "300"])
    try:
        got = dict(groups.children_of(os.getpid()))
        assert got[a.pid] == a.pid
        assert got[b.pid] == os.getpgrp()
        a.kill()
        exited_unreaped(a.pid)
        assert a.pid not in dict(groups.children_of(os.getpid()))  # a zombie is not listed
        assert b.pid in dict(groups.children_of(os.getpid()))
    finally:
        for p in (a, b):
            p.kill()
            p.wait(timeout=10)


def test_children_of_a_process_without_children_is_empty() -> None:
    proc = subprocess.Popen(["/bin/sleep", "300"])
    try:
        assert groups.children_of(proc.pid) == []
    finally:
        proc.kill()
        proc.wait(timeout=10)


# A child Python process becomes a subreaper, starts one known command, lets two escapees
# (setsid, double fork) and one spared escapee be adopted, and calls kill_adopted. It prints
# one JSON line per process it starts (so the test can clean up after it whatever happens),
# then one result line.
ADOPTER = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys
    from murmur.containment import groups

    def say(**kw):
        print(json.dumps(kw), flush=True)

    def orphan(script):
        sh = subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE, start_new_session=True)
        pid = int(sh.stdout.readline())
        sh.wait()  # the escapee is re-parented to us before our wait returns
        sh.stdout.close()
        say(pid=pid)
        return pid

    say(subreaper=groups.become_subreaper(), again=groups.become_subreaper())
    known = subprocess.Popen(["/bin/sleep", "300"], start_new_session=True)
    say(pid=known.pid)
    setsid = orphan("setsid /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
    double = orphan("( /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $! )")
    spared = orphan("/bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
    spared_group = os.getpgid(spared)
    before = sorted(p for p, _ in groups.children_of(os.getpid()))
    killed = groups.kill_adopted([known.pid], spare_groups=[spared_group])
    after = sorted(p for p, _ in groups.children_of(os.getpid()))
    gone = {p: not os.path.exists(f"/proc/{p}") for p in (setsid, double, spared)}
    say(result=dict(killed=killed, before=before, after=after, gone=gone,
                    known=known.pid, setsid=setsid, double=double, spared=spared))
    known.kill(); known.wait()
    os.kill(spared, signal.SIGKILL); os.waitpid(spared, 0)
    """
)


async def test_kill_adopted_kills_escapees_a_subreaper_adopted(owned: Owned, tmp_path: Path) -> None:
    script = tmp_path / "adopter.py"
    script.write_text(ADOPTER)
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(script)], stdout=subprocess.PIPE, start_new_session=True
    )
    owned.add(proc.pid)
    lines: list[dict[str, object]] = []
    try:
        assert proc.stdout is not None
        buf = b""
        with trio.fail_after(15):
            while chunk := await proc.stdout.receive_some():
                buf += chunk
                *done, buf = buf.split(b"\n")
                for raw in done:
                    msg = json.loads(raw)
                    if isinstance(msg.get("pid"), int):
                        owned.add(msg["pid"])
                    lines.append(msg)
            assert await proc.wait() == 0
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.aclose()
    assert lines[0] == {"subreaper": True, "again": True}
    result = lines[-1]["result"]
    assert isinstance(result, dict)
    setsid, double, spared, known = result["setsid"], result["double"], result["spared"], result["known"]
    assert set(result["before"]) == {known, setsid, double, spared}  # all three were adopted
    assert result["killed"] == 2
    assert result["gone"] == {str(setsid): True, str(double): True, str(spared): False}  # killed and reaped
    assert result["after"] == sorted([known, spared])
    assert not is_subreaper()  # the test process itself never became one
