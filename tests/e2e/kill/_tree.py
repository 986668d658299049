"""What the kill suite knows about the processes a test started: a recorded census.

Everything here *reads* ``/proc`` and the cgroup v2 mount; the only processes it ever
signals are ones a test recorded itself (pid and ``/proc`` start time, so a reused pid is
never touched). Survivors are found two ways, never by environment variables:

* by the process tree recorded before the kill: every descendant of the processes the test
  started, plus every process a busy step reported on the readiness FIFO, each with its
  ppid chain, process group, session and cgroup at that moment;
* by containment: the ``murmur-*`` cgroup units those processes were in (cgroup class),
  which must end up empty (``cgroup.events`` ``populated 0``).

Waiting is on events: a pidfd becoming readable per recorded process, an inotify event on
``cgroup.events`` per unit (:func:`murmur.containment.cgroup.wait_empty`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

import attrs
import trio

from murmur.containment import cgroup
from murmur.containment.host import cgroup2_mount, own_cgroup, v2_path

_MOUNT = cgroup2_mount(Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace"))


@attrs.frozen
class Proc:
    """One process as recorded.

    Attributes:
        pid, start: its pid and ``/proc/<pid>/stat`` field 22 (identifies it across reuse).
        ppid, pgid, sid: its parent, process group and session at recording time.
        cgroup: its cgroup v2 path (``/murmur-frm_…/lead-1/cmd-3``), or None.
        cmd: its command line (space-joined, for reports).
        chain: the ppid chain from its parent up to pid 1.
    """

    pid: int
    start: str
    ppid: int
    pgid: int
    sid: int
    cgroup: str | None
    cmd: str
    chain: tuple[int, ...] = ()

    @property
    def unit(self) -> str | None:
        """The top ``murmur-*`` unit it is in (``/murmur-frm_…``), or None."""
        if not self.cgroup:
            return None
        parts = [p for p in self.cgroup.split("/") if p]
        for i, part in enumerate(parts):
            if part.startswith("murmur-"):
                return "/" + "/".join(parts[: i + 1])
        return None

    def describe(self) -> str:
        return (f"pid {self.pid} ({self.cmd[:80]}) ppid {self.ppid} pgid {self.pgid} sid {self.sid} "
                f"cgroup {self.cgroup} chain {'>'.join(map(str, self.chain))}")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields


def read(pid: int) -> Proc | None:
    """``pid`` as it is now (None when it is gone or a zombie)."""
    fields = _stat(pid)
    if fields is None:
        return None
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        cg = v2_path(Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return Proc(pid, fields[19], int(fields[1]), int(fields[2]), int(fields[3]), cg, cmd, chain(pid))


def chain(pid: int) -> tuple[int, ...]:
    """The ppid chain of ``pid`` up to pid 1 (its parent first)."""
    out: list[int] = []
    seen = {pid}
    while pid > 1:
        fields = _stat(pid)
        if fields is None:
            break
        pid = int(fields[1])
        if pid in seen:
            break
        seen.add(pid)
        out.append(pid)
    return tuple(out)


def alive(p: Proc) -> bool:
    """Whether the recorded process still runs (same pid *and* start time, not a zombie)."""
    fields = _stat(p.pid)
    return fields is not None and fields[19] == p.start


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                out[int(entry.name)] = int(fields[1])
    return out


def descendants(roots: Iterable[int]) -> set[int]:
    """``roots`` (those alive) and every live process descending from them (reads /proc)."""
    parents = _parents()
    found = {r for r in roots if r in parents}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def formation_unit(formation_id: str) -> str:
    """A formation's unit as ``/proc/<pid>/cgroup`` names it: ``murmur-<id>`` beneath the cgroup
    this test process runs in (the launcher starts in it; tests/_test_unit.py puts pytest in a
    unit of its own)."""
    own = (own_cgroup() or "/").rstrip("/")
    return f"{own}/murmur-{formation_id}"


def unit_dir(unit: str) -> Path:
    """The directory of a unit named as ``/proc/<pid>/cgroup`` names it."""
    assert _MOUNT is not None, "no cgroup v2 mount"
    return _MOUNT / unit.lstrip("/")


class Census:
    """Every process and unit a test recorded; what it may kill at the end.

    ``record`` adds the live descendants of the given roots (and the roots). Units are the
    top ``murmur-*`` cgroup units of recorded processes, or named by the test.
    """

    def __init__(self) -> None:
        self.procs: dict[int, Proc] = {}
        self.units: set[str] = set()

    def record(self, roots: Iterable[int]) -> list[Proc]:
        """Record ``roots`` and their descendants as they are now; the new records."""
        new: list[Proc] = []
        for pid in sorted(descendants(roots)):
            p = read(pid)
            if p is None:
                continue
            old = self.procs.get(pid)
            if old is not None and old.start == p.start:
                continue
            self.procs[pid] = p
            new.append(p)
            if p.unit is not None:
                self.units.add(p.unit)
        return new

    def add_unit(self, unit: str) -> None:
        self.units.add(unit)

    def survivors(self, among: Iterable[Proc] | None = None) -> list[Proc]:
        return [p for p in (self.procs.values() if among is None else among) if alive(p)]

    def populated_units(self) -> list[str]:
        return [u for u in sorted(self.units) if cgroup.populated(unit_dir(u))]

    async def wait_gone(self, among: Iterable[Proc] | None = None, *, units: bool = True) -> None:
        """Return once every recorded process (of ``among``) has ended and every recorded unit
        is empty. Waits on pidfds and ``cgroup.events``; bound it with ``trio.fail_after``."""
        procs = list(self.procs.values() if among is None else among)
        async with trio.open_nursery() as n:
            for p in procs:
                n.start_soon(_wait_exit, p)
            if units:
                for u in self.units:
                    n.start_soon(cgroup.wait_empty, unit_dir(u))

    def kill_all(self) -> None:
        """SIGKILL every recorded process still alive, and every recorded unit (sync)."""
        for p in self.procs.values():
            if alive(p):
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signal.SIGKILL)
        for u in self.units:
            cgroup.kill(unit_dir(u))

    async def clean(self) -> None:
        """Kill what is left, wait for it (bounded), remove the units (never raises)."""
        self.kill_all()
        with trio.move_on_after(10):
            await self.wait_gone()
        for u in sorted(self.units, reverse=True):
            cgroup.remove(unit_dir(u))


async def _wait_exit(p: Proc) -> None:
    """Return once ``p`` has exited (its pidfd is readable); at once when it is gone."""
    try:
        fd = os.pidfd_open(p.pid)
    except OSError:
        return
    try:
        # Checked after opening (the pidfd is of this very process), and again every half
        # second: a leader that has exited while a thread of it is still in the kernel reads
        # as a zombie (not alive, as the failure message's survivors say) before its pidfd
        # is readable, and the wait must agree with the survivors it would name.
        while alive(p):
            with trio.move_on_after(0.5):
                await trio.lowlevel.wait_readable(fd)
                return
    finally:
        os.close(fd)
