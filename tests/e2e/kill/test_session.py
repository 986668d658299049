"""Kill busy sessions that are not formations: a root ``mur run --task``, and a delegating
parent under a real mur-roost with live, busy delegated children.

Every session runs one plan step per escape variant at once (``_busy.VARIANTS``), each
reporting itself on the readiness FIFO once its escape is done. Survivors are looked for in
the recorded process tree and in the root's cgroup unit. Expectations per class as in
``test_formation``: on the cgroup class nothing is left within 30 s; on the groups class a
SIGTERM leaves nothing, and a SIGKILL may leave only escapees (out of their command's process
group) of the very session that was SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

import pytest
import trio

from murmur import registry

from ._busy import MUR, VARIANTS, Capsule, Report
from ._rig import START_PATHS, Rig, Started, escaped
from ._tree import Proc

pytestmark = [pytest.mark.e2e]

N = len(VARIANTS)


def allowed(rig: Rig, sessions: set[str]) -> list[Proc]:
    """groups class: the escapees of ``sessions`` (SIGKILLed); nothing on the cgroup class."""
    if rig.klass == "cgroup":
        return []
    out = []
    for r in rig.fifo.reports:
        p = rig.census.procs.get(r.pid)
        if p is not None and r.session in sessions and escaped(p, r):
            out.append(p)
    return out


async def expect_nothing_left(rig: Rig, case: str, t0: float, sigkilled: set[str]) -> None:
    spared = allowed(rig, sigkilled)
    rest = [p for p in rig.census.procs.values() if p not in spared]
    await rig.wait_nothing_left(case, t0, rest, units=not spared)
    if spared:
        left = {p.pid for p in rig.census.survivors(spared)}
        print(f"[kill suite] groups {case}: {len(left)} escapee(s) of a SIGKILLed session left "
              f"(the class allows it): {sorted(r.variant for r in rig.fifo.reports if r.pid in left)}")


def _install(rig: Rig, *caps: Capsule) -> None:
    src = rig.tmp / "src"
    for cap in caps:
        registry.install(registry.build(cap.write(src, rig.ready, rig.fifo.path)), global_=True)


async def _run_task(rig: Rig, capsule: str, env: dict[str, str] | None = None) -> Started:
    work = rig.tmp / "work"
    work.mkdir()
    return await rig.start([*MUR, "run", "--capsule", f"local/{capsule}", "--capsule-version", "0.1.0",
                            "--workdir", str(work), "--task", "go"], cwd=work, env=env)


def signalled_status(how: str) -> set[int]:
    """A busy session's exit status after SIGTERM (spec/session.md "Exit status"): wound down
    while busy 1 (``E-RUN-040``), a second signal 143. Two SIGTERMs sent back to back may
    reach the process as one (pending standard signals do not queue), so 1 is allowed then."""
    return {1} if how == "term" else {1, 143}


# -- a root `mur run --task` ---------------------------------------------------------------------

@pytest.mark.parametrize("how", ["kill", "term-twice"])
async def test_root_run_task(rig: Rig, how: str) -> None:
    """`mur run --task` SIGKILLed (or SIGTERMed twice back to back) while every step runs."""
    _install(rig, Capsule("k-solo", "solo"))
    run = await _run_task(rig, "k-solo")
    reports = await rig.busy(N)
    rig.record(run.pid)
    rig.check_contained(reports)
    if rig.klass == "cgroup":
        assert len(rig.census.units) == 1, rig.census.units
    t0 = time.monotonic()
    if how == "kill":
        run.signal(signal.SIGKILL)
    else:
        run.signal(signal.SIGTERM)
        run.signal(signal.SIGTERM)
    await expect_nothing_left(rig, f"root mur run --task, {how}", t0, {"solo"} if how == "kill" else set())
    if how != "kill":
        with trio.fail_after(30):
            assert await run.proc.wait() in signalled_status(how), run.stderr()


# -- a delegating parent under a real mur-roost --------------------------------------------------

async def _delegating(rig: Rig) -> tuple[Started, dict[str, int], list[Report]]:
    """A parent busy in every variant with two busy children; (parent, child ses -> pid, reports)."""
    _install(rig, Capsule("k-child", "{{ session_id }}"),
             Capsule("k-parent", "parent", children=("k-child", "k-child")))
    _roost, url = await rig.roost("--spawn-allow", "k-parent")
    env = dict(rig.env, MURMUR_ROOST_URL=url)
    parent = await _run_task(rig, "k-parent", env)
    reports = await rig.busy(3 * N, timeout=120)
    rig.record(parent.pid)
    rig.check_contained(reports)
    children: dict[str, int] = {}
    for r in reports:
        if r.session != "parent":
            command = rig.census.procs[r.command]  # the step's process; its parent is the child
            children[r.session] = command.ppid
    assert len(children) == 2, children
    for session, pid in children.items():  # the parent's, or its warm starter's (its parent the parent)
        p = rig.census.procs[pid]
        assert p.cmd.startswith("mur run --capsule ") or " run --capsule " in p.cmd, p.describe()
        owner = rig.census.procs.get(p.ppid)
        if rig.start_path == "warm":
            assert owner is not None and owner.cmd.startswith("mur starter"), f"child {session}: {p.describe()}"
            assert owner.ppid == parent.pid, f"child {session}'s starter is not the parent's: {owner.describe()}"
        elif rig.start_path == "exec":
            assert p.ppid == parent.pid, f"child {session} is not the parent's"
    if rig.klass == "cgroup":  # the parent's unit holds its children and all they started
        assert len(rig.census.units) == 1, rig.census.units
    return parent, children, reports


def _of(rig: Rig, session: str, pid: int) -> Sequence[Proc]:
    return [p for p in rig.census.procs.values()
            if p.pid == pid or pid in p.chain
            or any(r.pid == p.pid and r.session == session for r in rig.fifo.reports)]


@pytest.mark.parametrize("start_path", START_PATHS, indirect=True)
@pytest.mark.parametrize("how", ["kill", "term", "term-twice"])
async def test_delegating_parent(rig: Rig, how: str) -> None:
    """The parent SIGKILLed / SIGTERMed (once, twice) while both children and all steps run."""
    parent, _children, _ = await _delegating(rig)
    t0 = time.monotonic()
    if how == "kill":
        parent.signal(signal.SIGKILL)
    else:
        parent.signal(signal.SIGTERM)
        if how == "term-twice":
            parent.signal(signal.SIGTERM)
    await expect_nothing_left(rig, f"delegating parent, {how}", t0,
                              {"parent"} if how == "kill" else set())
    if how != "kill":
        with trio.fail_after(30):
            assert await parent.proc.wait() in signalled_status(how), parent.stderr()


@pytest.mark.parametrize("start_path", START_PATHS, indirect=True)
async def test_delegated_child_killed(rig: Rig) -> None:
    """One delegated child SIGKILLed mid-step: all of it goes while the parent runs on; then
    the parent's SIGTERM leaves nothing at all."""
    parent, children, _ = await _delegating(rig)
    session, pid = sorted(children.items())[0]
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    spared = allowed(rig, {session})
    mine = [p for p in _of(rig, session, pid) if p not in spared]
    await rig.wait_nothing_left("delegated child SIGKILLed (its own processes)", t0, mine, units=False)
    assert parent.proc.returncode is None
    t0 = time.monotonic()
    parent.signal(signal.SIGTERM)
    await expect_nothing_left(rig, "delegated child SIGKILLed, then the parent SIGTERMed", t0, {session})
