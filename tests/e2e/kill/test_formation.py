"""Kill a busy formation every way the issue lists; nothing it started may be left.

A real ``mur run --roster --json --task go`` of three real members (``lead`` the entry, which
calls peers ``p1`` and ``p2``). Every member is busy in one plan step per escape variant at
once (``_busy.VARIANTS``: ``sleep``, ``sh -c 'sleep & wait'``, ``nohup``, ``setsid``,
``setsid -f``, ``setsid --wait``, a double fork, a step ignoring SIGTERM): 24 commands, each
reporting itself on the readiness FIFO once its escape is done. Then the formation is
killed; survivors are looked for in the recorded process tree and in the formation's cgroup
unit.

* cgroup class: nothing is left within 30 s, every escapee included.
* groups class: what that class promises: after a SIGTERM path nothing is left (the runtime
  is a subreaper); after a SIGKILL, only escapees that left their command's process group,
  of the very session that was SIGKILLed, may survive.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio

from murmur.containment import CGROUP, detect

from ._busy import MUR, VARIANTS, formation_project
from ._rig import CLASSES, START_PATHS, Rig, Started, escaped
from ._tree import Proc, formation_unit

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("start_path", START_PATHS, indirect=True)]

PEERS = ("p1", "p2")
MEMBERS = ("lead", *PEERS)


@attrs.define
class Formation:
    """A launched, busy formation as the test recorded it."""

    rig: Rig
    launcher: Started
    pids: dict[str, int]  # member -> pid
    formation_id: str

    def procs_of(self, session: str) -> list[Proc]:
        """Recorded processes of one member's session: the member and its busy steps' trees."""
        root = self.pids[session]
        out = []
        for p in self.rig.census.procs.values():
            reported = any(r.pid == p.pid and r.session == session for r in self.rig.fifo.reports)
            if p.pid == root or root in p.chain or reported:
                out.append(p)
        return out


async def launch_busy(rig: Rig, variants: tuple[str, ...] = tuple(VARIANTS)) -> Formation:
    """Launch the formation with a task and wait until every member's steps all run."""
    proj = formation_project(rig.tmp, rig.ready, rig.fifo.path, PEERS, variants)
    launcher = await rig.start([*MUR, "run", "--roster", str(proj), "--json", "--task", "go"])
    with trio.fail_after(120):
        formation = await launcher.json_line()
        entry = await launcher.json_line()
    pids = {p["name"]: int(p["pid"]) for p in formation["peers"]}
    pids["lead"] = int(entry["pid"])
    reports = await rig.busy(len(MEMBERS) * len(variants))
    rig.record(launcher.pid, *pids.values())
    print(f"\n[kill suite] members: {pids}")
    rig.check_contained(reports)
    check_start_path(rig, launcher.pid, pids)
    f = Formation(rig, launcher, pids, str(formation["formation_id"]))
    _janitor(f)  # recorded with the launcher's tree: every case waits for it to be gone too
    if rig.klass == "cgroup":
        assert rig.census.units == {formation_unit(formation["formation_id"])}, rig.census.units
    return f


def check_start_path(rig: Rig, launcher: int, pids: dict[str, int]) -> None:
    """Each member started the way the test asked: forked by the launcher's warm starter
    (its parent, ``mur starter …``) or exec'd by the launcher itself; shown as ``mur run``."""
    for name, pid in pids.items():
        p = rig.census.procs[pid]
        assert p.cmd.startswith(("mur run ", f"{MUR[0]} run ")) or " run --capsule " in p.cmd, p.describe()
        parent = rig.census.procs.get(p.ppid)
        if rig.start_path == "warm":
            assert parent is not None and parent.cmd.startswith("mur starter"), f"{name}: {p.describe()}"
            assert parent.ppid == launcher
        elif rig.start_path == "exec":
            assert p.ppid == launcher, f"{name}: {p.describe()}"


def allowed_survivors(f: Formation, sigkilled: set[str]) -> list[Proc]:
    """What the groups class may leave: escapees (out of their command's group) of a
    session that was SIGKILLed. Nothing on the cgroup class."""
    if f.rig.klass == "cgroup":
        return []
    out = []
    for r in f.rig.fifo.reports:
        p = f.rig.census.procs.get(r.pid)
        if p is not None and r.session in sigkilled and escaped(p, r):
            out.append(p)
    return out


# -- the ways a formation is killed ------------------------------------------------------------
# Each returns the sessions it SIGKILLed and the launcher's expected exit status (None: the
# launcher itself was SIGKILLed).

Act = Callable[[Formation], Awaitable[tuple[set[str], int | None]]]


async def kill_launcher(f: Formation) -> tuple[set[str], int | None]:
    f.launcher.signal(signal.SIGKILL)
    return set(), None


async def kill_entry(f: Formation) -> tuple[set[str], int | None]:
    os.kill(f.pids["lead"], signal.SIGKILL)
    return {"lead"}, 128 + signal.SIGKILL


async def kill_group(f: Formation) -> tuple[set[str], int | None]:
    f.launcher.signal(signal.SIGKILL, group=True)  # the launcher and the entry member
    return {"lead"}, None


async def kill_peer(f: Formation) -> tuple[set[str], int | None]:
    """SIGKILL p1: everything of p1 goes while the formation runs on; then SIGTERM."""
    t0 = time.monotonic()
    os.kill(f.pids["p1"], signal.SIGKILL)
    mine = [p for p in f.procs_of("p1") if p not in allowed_survivors(f, {"p1"})]
    await f.rig.wait_nothing_left("kill -KILL peer p1 (its own processes)", t0, mine, units=False)
    assert f.launcher.proc.returncode is None, "the formation should outlive one peer"
    f.launcher.signal(signal.SIGTERM)
    return {"p1"}, 128 + signal.SIGTERM


async def term(f: Formation) -> tuple[set[str], int | None]:
    f.launcher.signal(signal.SIGTERM)
    return set(), 128 + signal.SIGTERM


async def term_twice(f: Formation) -> tuple[set[str], int | None]:
    f.launcher.signal(signal.SIGTERM)
    f.launcher.signal(signal.SIGTERM)
    return set(), 128 + signal.SIGTERM


async def term_twice_20ms(f: Formation) -> tuple[set[str], int | None]:
    f.launcher.signal(signal.SIGTERM)
    await trio.sleep(0.02)  # the scenario's own spacing, not a wait for anything
    f.launcher.signal(signal.SIGTERM)
    return set(), 128 + signal.SIGTERM


async def stopped_then_term_twice(f: Formation) -> tuple[set[str], int | None]:
    """p2 cannot run (SIGSTOP); the second SIGTERM SIGKILLs every member at once."""
    os.kill(f.pids["p2"], signal.SIGSTOP)
    f.launcher.signal(signal.SIGTERM)
    await trio.sleep(0.02)  # the scenario's own spacing (two signals 20 ms apart), not a wait
    f.launcher.signal(signal.SIGTERM)
    return set(), 128 + signal.SIGTERM


async def stopped_then_term(f: Formation) -> tuple[set[str], int | None]:
    """p2 cannot run (SIGSTOP): its lifeline closes, and 25 s later it is SIGKILLed."""
    os.kill(f.pids["p2"], signal.SIGSTOP)
    f.launcher.signal(signal.SIGTERM)
    return set(), 128 + signal.SIGTERM


FAST: dict[str, Act] = {
    "kill-launcher": kill_launcher,
    "kill-entry": kill_entry,
    "kill-peer": kill_peer,
    "kill-group": kill_group,
    "term": term,
    "term-twice": term_twice,
    "term-twice-20ms": term_twice_20ms,
    "stopped-term-twice": stopped_then_term_twice,
}
SLOW: dict[str, Act] = {"stopped-term-25s": stopped_then_term}


async def _run_case(rig: Rig, name: str, act: Act) -> None:
    f = await launch_busy(rig)
    t0 = time.monotonic()
    sigkilled, status = await act(f)
    allowed = allowed_survivors(f, sigkilled)
    rest = [p for p in f.rig.census.procs.values() if p not in allowed]
    await rig.wait_nothing_left(f"busy formation, {name}", t0, rest, units=not allowed)
    if status is not None:
        with trio.fail_after(30):
            assert await f.launcher.proc.wait() == status, f.launcher.stderr()
    if allowed:
        left = rig.census.survivors(allowed)
        print(f"[kill suite] groups {name}: {len(left)} escapee(s) of a SIGKILLed session left "
              f"(the class allows it): {sorted({r.variant for r in rig.fifo.reports if r.pid in {p.pid for p in left}})}")


@pytest.mark.parametrize("name", list(FAST))
async def test_busy_formation(rig: Rig, name: str) -> None:
    """Killed or signalled as ``name``, a busy formation leaves what its class promises."""
    await _run_case(rig, name, FAST[name])


async def each_class(tmp: Path, start_path: str, case: Callable[[Rig], Awaitable[None]]) -> None:
    """Run ``case`` on a rig of each class this host backs (cgroup, groups) at once, each rig
    in its own directory and nursery, closed as the ``rig`` fixture closes it. For the cases
    that wait out the members' 25 s bound, mostly asleep: together they wait it once. A
    failure names its class."""
    host_cgroup = detect({}, probe=True).name == CGROUP
    classes = [k for k in CLASSES if k != CGROUP or host_cgroup]

    async def one(klass: str) -> None:
        (tmp / klass).mkdir()
        async with trio.open_nursery() as nursery:
            rig = Rig(tmp / klass, klass, nursery, start_path=start_path)
            try:
                await case(rig)
            except AssertionError as exc:
                raise AssertionError(f"[{klass} class] {exc}") from exc
            finally:
                with trio.CancelScope(shield=True):
                    await rig.aclose()

    async with trio.open_nursery() as nursery:
        for klass in classes:
            nursery.start_soon(one, klass)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW))
async def test_busy_formation_slow(tmp_path: Path, start_path: str, name: str) -> None:
    """A stopped member: the launcher's 25 s SIGKILL ends it and everything it started (each
    class, at once)."""
    await each_class(tmp_path, start_path, lambda rig: _run_case(rig, name, SLOW[name]))


def _janitor(f: Formation) -> Proc:
    """The launcher's janitor, as recorded (exactly one)."""
    (j,) = [p for p in f.rig.census.procs.values()
            if p.chain[:1] == (f.launcher.pid,) and "containment/janitor.py" in p.cmd]
    return j


async def test_janitor_killed_formation_still_tears_down(rig: Rig) -> None:
    """SIGKILL the janitor of a busy formation: the launcher's own teardown (SIGTERM) still
    leaves nothing; the launcher exits 143."""
    f = await launch_busy(rig)
    janitor = _janitor(f)
    os.kill(janitor.pid, signal.SIGKILL)
    await rig.wait_nothing_left("janitor SIGKILLed (the janitor itself)", time.monotonic(), [janitor],
                                units=False)
    t0 = time.monotonic()
    f.launcher.signal(signal.SIGTERM)
    await rig.wait_nothing_left("janitor SIGKILLed, then SIGTERM", t0)
    with trio.fail_after(30):
        assert await f.launcher.proc.wait() == 143


@pytest.mark.slow
async def test_janitor_never_outlives_the_bound(tmp_path: Path, start_path: str) -> None:
    """kill -KILL of the launcher while p2 is stopped (it cannot wind down): the janitor
    waits the members' bound (25 s), kills p2's unit, and is gone by bound + 5 s (each
    class, at once)."""
    await each_class(tmp_path, start_path, _janitor_bound)


async def _janitor_bound(rig: Rig) -> None:
    f = await launch_busy(rig)
    janitor = _janitor(f)
    os.kill(f.pids["p2"], signal.SIGSTOP)
    t0 = time.monotonic()
    f.launcher.signal(signal.SIGKILL)
    took = await rig.wait_nothing_left("launcher SIGKILLed, p2 stopped: the janitor", t0, [janitor],
                                       bound=35.0, units=False)
    assert took <= 25.0 + 5.0 + 2.0  # its own bound; the margin is for a loaded 2-core host
    allowed = allowed_survivors(f, {"p2"})  # the janitor SIGKILLed p2's session
    rest = [p for p in rig.census.procs.values() if p not in allowed]
    await rig.wait_nothing_left("launcher SIGKILLed, p2 stopped: everything", t0, rest, bound=35.0,
                                units=not allowed)
