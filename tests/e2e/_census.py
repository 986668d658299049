"""A formation's processes, found as the standard allows: by containment and by a recorded tree.

Never by environment variables: a forked member (the warm start path) is found the same way
as an exec'd one. Two sources, united:

* the **formation's containment unit** (cgroup class): ``murmur-<formation id>`` beneath the
  cgroup of the process that started the launcher (this test process), every pid in it and its
  sub-units — members, the starter, their commands, escapees adopted by the launcher;
* the **process tree recorded** while the formation ran (:class:`tests.e2e.kill._tree.Census`:
  pid and start time, so a reused pid is never counted): the launcher's descendants.
"""

from __future__ import annotations

from pathlib import Path

from murmur.containment import cgroup
from murmur.containment.host import cgroup2_mount, own_cgroup

from ._formation import alive
from .kill._tree import Census

_MOUNT = cgroup2_mount(Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace"))


def formation_unit(formation_id: str) -> Path | None:
    """The formation's unit directory (it may not exist, or not yet); None without cgroup v2."""
    mine = own_cgroup()
    if _MOUNT is None or mine is None:
        return None
    return _MOUNT / mine.lstrip("/") / f"murmur-{formation_id}"


def unit_pids(formation_id: str) -> set[int]:
    """Live pids in the formation's unit and its sub-units (empty once the unit is gone)."""
    unit = formation_unit(formation_id)
    if unit is None or not unit.is_dir():
        return set()
    return {p for p in cgroup.procs(unit) if alive(p)}


class Formation:
    """One launch's processes: :meth:`record` while it runs, :meth:`left` at any time."""

    def __init__(self, launcher_pid: int, formation_id: str) -> None:
        self.launcher_pid = launcher_pid
        self.formation_id = formation_id
        self.census = Census()

    def record(self) -> list[int]:
        """Record the launcher's descendants now; the pids recorded so far (launcher excluded)."""
        self.census.record([self.launcher_pid])
        return sorted(p for p in self.census.procs if p != self.launcher_pid)

    def left(self) -> list[int]:
        """Every process of the formation still alive, the launcher excluded."""
        found = {p.pid for p in self.census.survivors()} | unit_pids(self.formation_id)
        found.discard(self.launcher_pid)
        return sorted(found)

    def to_kill(self) -> list[int]:
        """:meth:`left` without the launcher's containment janitor, for a teardown's SIGKILL:
        the janitor outlives the launcher to remove the formation's units, and killing it with
        the rest leaves them behind (issue 32 item 1)."""
        return [p for p in self.left() if not is_janitor(p)]


def is_janitor(pid: int) -> bool:
    """Whether ``pid`` runs :mod:`murmur.containment.janitor` (by its command line)."""
    try:
        return b"containment/janitor.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
