"""Per-command resource ceilings: ``capabilities.resources`` (spec/containment.md, "Limits").

Upstream's key for process limits is ``capabilities.resources`` (``capabilities.limits`` holds
the WASM component limits). Applied in each command's child as hard rlimits
(:meth:`Limits.apply`): ``max_processes`` -> ``RLIMIT_NPROC`` (counted per user namespace, so
under scoped and sealed it bounds the capsule's own tree), ``cpu_seconds`` -> ``RLIMIT_CPU``,
``memory_bytes`` -> ``RLIMIT_AS``, ``max_open_files`` -> ``RLIMIT_NOFILE``, and no core dumps.
Where the containment unit is a cgroup with the controllers enabled, ``cgroup_memory_bytes``
and ``cgroup_pids_max`` are written to its ``memory.max`` / ``pids.max``
(:meth:`Limits.write_unit`). :func:`stopped_by` names the figure that stopped a command.
"""

from __future__ import annotations

import resource
import signal
from pathlib import Path

import attrs

__all__ = ["Limits", "from_manifest", "stopped_by"]


@attrs.frozen
class Limits:
    """Ceilings for one command (None: not set).

    Attributes:
        max_processes (int | None): processes the command's tree may hold.
        cpu_seconds (int | None): CPU seconds per process.
        memory_bytes (int | None): address space per process, bytes.
        max_open_files (int | None): open files per process.
        cgroup_memory_bytes (int | None): the unit's ``memory.max`` (cgroup class).
        cgroup_pids_max (int | None): the unit's ``pids.max`` (cgroup class).
    """

    max_processes: int | None = None
    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    max_open_files: int | None = None
    cgroup_memory_bytes: int | None = None
    cgroup_pids_max: int | None = None

    def to_wire(self) -> dict[str, int]:
        """The set figures as JSON."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    @classmethod
    def from_wire(cls, data: dict[str, int]) -> Limits:
        """Inverse of :meth:`to_wire`."""
        return cls(**{k: int(v) for k, v in data.items() if k in attrs.fields_dict(cls)})

    def apply(self) -> None:
        """Set the rlimits in this (child) process; a figure above the current hard limit is clamped."""
        pairs = (
            (resource.RLIMIT_NPROC, self.max_processes),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_AS, self.memory_bytes),
            (resource.RLIMIT_NOFILE, self.max_open_files),
            (resource.RLIMIT_CORE, 0),
        )
        for which, value in pairs:
            if value is None:
                continue
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))

    def write_own_unit(self) -> None:
        """In a command's child, after it joined its unit: write ``memory.max``/``pids.max`` into
        the cgroup v2 unit it is in, where that unit has the controllers (else nothing)."""
        if self.cgroup_memory_bytes is None and self.cgroup_pids_max is None:
            return
        try:
            with open("/proc/self/cgroup", encoding="ascii") as f:
                rel = next((ln[3:].strip() for ln in f if ln.startswith("0::")), None)
        except OSError:
            return
        if not rel or rel == "/":
            return
        for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            unit = Path(mount + rel)
            if (unit / "cgroup.procs").exists():
                self.write_unit(unit)
                return

    def write_unit(self, unit: Path) -> list[str]:
        """Write the cgroup figures into unit directory ``unit``; returns the files written."""
        done: list[str] = []
        for name, value in (("memory.max", self.cgroup_memory_bytes), ("pids.max", self.cgroup_pids_max)):
            if value is None or not (unit / name).exists():
                continue
            try:
                (unit / name).write_text(str(value))
                done.append(name)
            except OSError:
                continue
        return done


def from_manifest(manifest: object) -> Limits:
    """``capabilities.resources`` of a manifest (absent: no ceilings)."""
    caps = getattr(manifest, "capabilities", None)
    res = getattr(caps, "resources", None)
    if res is None:
        return Limits()
    return Limits(**{f: getattr(res, f, None) for f in attrs.fields_dict(Limits)})


_FORK_FAILED = ("cannot fork", "can't fork", "fork: retry", "fork: resource temporarily unavailable",
                "resource temporarily unavailable", "blockingioerror")
_OUT_OF_MEMORY = ("memoryerror", "cannot allocate memory", "out of memory")


def stopped_by(limits: Limits, exit_code: int, stderr: bytes) -> str | None:
    """The ceiling that stopped a command, worded for its error (the manifest key that would
    allow it first, with its figure), or None when none did.

    Evidence: ``SIGXCPU`` is the CPU ceiling; a ``fork`` that failed for lack of processes
    (dash ``Cannot fork``, bash ``fork: retry``, busybox ``can't fork``, ``Resource temporarily
    unavailable``, Python's ``BlockingIOError``) or an allocation that failed under an
    address-space ceiling (``MemoryError``, ``Cannot allocate memory``) is read from the
    command's stderr. The process ceiling named is the lower of ``max_processes`` and
    ``cgroup_pids_max`` (the one that binds first)::

        raising capabilities.resources.max_processes (now 8 processes) would allow it: the process-count ceiling stopped it (a fork failed)
    """
    text = stderr.decode("utf-8", "replace").lower()
    if exit_code == -signal.SIGXCPU and limits.cpu_seconds is not None:
        return (f"raising capabilities.resources.cpu_seconds (now {limits.cpu_seconds} s of CPU) would allow "
                "it: that ceiling stopped it")
    pids = [(n, k) for k, n in (("max_processes", limits.max_processes), ("cgroup_pids_max", limits.cgroup_pids_max))
            if n is not None]
    if pids and any(e in text for e in _FORK_FAILED):
        figure, key = min(pids)
        return (f"raising capabilities.resources.{key} (now {figure} processes) would allow it: the "
                "process-count ceiling stopped it (a fork failed)")
    if limits.memory_bytes is not None and any(e in text for e in _OUT_OF_MEMORY):
        return (f"raising capabilities.resources.memory_bytes (now {limits.memory_bytes} bytes) would allow "
                "it: that memory ceiling stopped it")
    return None


class PidsGroup:
    """A session-wide cgroup v1 ``pids`` group: where ``RLIMIT_NPROC`` does not bind (root).

    The kernel exempts uid 0 from ``RLIMIT_NPROC``, so a session running as root bounds its
    commands' process count with a ``pids`` group instead: ``pids.max`` = the figure, every
    command joins it before its other set-up (:attr:`procs`), and :meth:`remove` deletes it
    when the session's sandbox closes. Used only where a v1 ``pids`` hierarchy is mounted
    writable (a cgroup v2 unit with the ``pids`` controller gets ``pids.max`` instead).
    """

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit

    @property
    def procs(self) -> str:
        """The file a joining process writes its pid to."""
        return str(self.path / "cgroup.procs")

    @classmethod
    def make(cls, limit: int) -> PidsGroup | None:
        """Create one beneath this process's v1 ``pids`` group, or None when there is none here."""
        import os
        import secrets

        mount = _v1_mount("pids")
        if mount is None:
            return None
        own = "/"
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                parts = line.split(":", 2)
                if len(parts) == 3 and "pids" in parts[1].split(","):
                    own = parts[2] or "/"
        except OSError:
            return None
        path = mount / own.lstrip("/") / f"murmur-sbx-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError:
            try:
                path.rmdir()
            except OSError:
                pass
            return None
        return cls(path, limit)

    def stopped(self) -> bool:
        """Whether a fork in the group was refused (``pids.events`` ``max`` moved)."""
        try:
            text = (self.path / "pids.events").read_text()
        except OSError:
            return False
        return any(line.split()[:1] == ["max"] and line.split()[1] != "0" for line in text.splitlines())

    def remove(self) -> None:
        """Remove the group (an error is ignored: a killed command may still be leaving it)."""
        try:
            self.path.rmdir()
        except OSError:
            pass


def _v1_mount(controller: str) -> Path | None:
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        tail = right.split()
        if sep and tail[:1] == ["cgroup"] and len(tail) >= 3 and controller in tail[2].split(","):
            return Path(left.split()[4])
    return None
