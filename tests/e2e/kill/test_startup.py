"""The launcher SIGKILLed at random moments of its start-up; the phase it reached asserted.

Each loop launches a real three-member formation (peers ``p1``, ``p2``, entry ``lead``; no
task) and, after a delay, freezes the launcher (SIGSTOP) so that the moment is exact, reads
the phase the start-up had reached, records the process tree, and SIGKILLs it. The phase:

* peers started: peer ``mur run`` processes in the launcher's tree;
* peers ready: peers whose running record (written just before a session reports its
  readiness line) exists in the test's MURMUR_HOME;
* entry announced / ready: the launcher's ``--json`` formation line (printed just before the
  entry member starts) and the entry's readiness line, from the launcher's stdout.

Asserted per loop: the phase is one the launch order allows (a peer is ready only once
started; the formation line only once every peer is ready; the entry's line only after it),
and nothing the launch started is left within 30 s (recorded tree and the formation's
cgroup unit). Asserted over the loops: they hit several distinct phases.
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import attrs
import pytest
import trio

from ._busy import MUR, formation_project
from ._rig import START_PATHS, Rig, Started
from ._tree import formation_unit, unit_dir

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("start_path", START_PATHS, indirect=True)]

PEERS = ("p1", "p2")


@attrs.frozen
class Phase:
    started: int
    ready: int
    announced: bool
    entry_ready: bool

    def check(self) -> None:
        """The launch order: start every peer, wait for each, announce, start the entry."""
        assert 0 <= self.ready <= self.started <= len(PEERS), self
        assert not self.announced or self.ready == len(PEERS), self
        assert not self.entry_ready or self.announced, self

    def __str__(self) -> str:
        entry = "entry ready" if self.entry_ready else "entry started" if self.announced else "no entry"
        return f"{self.started} peers started, {self.ready} ready, {entry}"


def _ready_peers(home: Path, peers: set[int]) -> int:
    """How many of the ``peers`` (pids of this launch's peer processes) wrote their running
    record (a record of an earlier launch names another pid)."""
    count = 0
    for rec in (home / "running").glob("*.json"):
        try:
            count += json.loads(rec.read_text()).get("pid") in peers
        except (OSError, ValueError):
            continue
    return count


async def _drain_lines(launcher: Started) -> list[str]:
    """Every stdout line until EOF (the entry member shares it: EOF once it too is gone)."""
    try:
        while True:
            await launcher.line()
    except EOFError:
        pass
    return launcher.lines


async def _one(rig: Rig, proj: Path, when: float | str, loop: int) -> tuple[Phase, float]:
    """One launch SIGKILLed at ``when``: after that many seconds, or right after the
    ``"announced"`` (formation) or ``"ready"`` (entry) line; (phase, the time from start to the
    entry's readiness line, or inf when the kill came first)."""
    formations = rig.home / "formations" / "proj"
    before = set(formations.glob("frm_*"))
    launcher = await rig.start([*MUR, "run", "--roster", str(proj), "--json"])
    t0 = time.monotonic()
    full = float("inf")
    with trio.move_on_after(when if isinstance(when, float) else 120.0) as moment:
        await launcher.line()
        if when == "announced":
            moment.cancel()
        await launcher.line()
        full = time.monotonic() - t0
        if when == "ready":
            moment.cancel()
        await trio.sleep_forever()  # the chosen moment has not come yet
    wanted = {"announced": 1, "ready": 2}.get(str(when), 0)
    assert len(launcher.lines) >= wanted, f"no {when} line within 120 s: {launcher.stderr()}"
    launcher.signal(signal.SIGSTOP)  # freeze the moment: it starts nothing more
    tree = rig.record(launcher.pid)
    peers = {p.pid for p in tree
             if launcher.pid in p.chain[:2] and any(f"local/k-{n} " in p.cmd + " " for n in PEERS)}
    ready = _ready_peers(rig.home, peers)
    killed = time.monotonic()
    launcher.signal(signal.SIGKILL)
    for frm in set(formations.glob("frm_*")) - before:  # made before the first member starts
        unit = formation_unit(frm.name)
        if rig.klass == "cgroup" and unit_dir(unit).exists():
            rig.census.add_unit(unit)
    with trio.fail_after(30):
        lines = await _drain_lines(launcher)
    phase = Phase(len(peers), ready, len(lines) >= 1, len(lines) >= 2)
    phase.check()
    await rig.wait_nothing_left(f"start-up loop {loop}, SIGKILL at {killed - t0:.2f}s ({phase})", killed)
    with trio.fail_after(10):
        await launcher.proc.wait()
    return phase, full


async def _loops(rig: Rig, moments: list[float | str]) -> list[Phase]:
    """Calibrate (a whole start-up, then the kill), then one loop per moment (a fraction of
    the calibrated start-up, or ``"announced"``)."""
    proj = formation_project(rig.tmp, rig.ready, rig.fifo.path, PEERS, ("sleep",))
    first, full = await _one(rig, proj, "ready", 1)
    assert first == Phase(len(PEERS), len(PEERS), True, True), first
    phases = [first]
    for i, m in enumerate(moments, start=2):
        phase, _ = await _one(rig, proj, m * full if isinstance(m, float) else m, i)
        if m == "announced":
            assert phase.announced and phase.ready == len(PEERS), phase
        phases.append(phase)
    seen = sorted({str(p) for p in phases})
    print(f"[kill suite] {rig.klass} start-up: full start-up {full:.2f}s; phases hit: {seen}")
    return phases


async def test_startup_kills(rig: Rig) -> None:
    """A few moments: at once, half-way, and right after the formation line."""
    phases = await _loops(rig, [0.0, 0.5, "announced"])
    assert len({str(p) for p in phases}) >= 2, phases


RANDOM_LOOPS = {"cgroup": 50, "groups": 24}
"""Loops of the soak random test per class (a few seconds a loop here; `-m soak` runs it).
On the warm start path the members start within a tenth of the start-up, so eight random
moments could all miss it (seen once: two phases hit); 24 make that unlikely."""


@pytest.mark.slow
@pytest.mark.soak  # 50+ launches: run with `python -m pytest -m soak` (kept out of the default run)
@pytest.mark.timeout(900)  # 50 launches of about 5 s each: longer than the suite's 180 s per test
async def test_startup_kills_random(rig: Rig) -> None:
    """:data:`RANDOM_LOOPS` loops at uniformly random moments of the start-up (seeded; the
    seed is printed)."""
    seed = random.randrange(1 << 30)
    print(f"\n[kill suite] start-up random seed {seed}")
    rng = random.Random(seed)
    loops = RANDOM_LOOPS[rig.klass]
    phases = await _loops(rig, [rng.uniform(0.0, 1.1) for _ in range(loops)])
    assert len({str(p) for p in phases}) >= 3, phases
