"""Which containment class this host gives, and where a runtime's units may live.

Specification: ``spec/session.md`` "Containment". Two classes:

* ``cgroup`` — cgroup v2 is mounted and the runtime can create a directory beneath the cgroup
  it runs in (root, or a delegated systemd user subtree). Every process a session starts
  joins a unit (a cgroup directory) before it execs, so nothing it forks, ``setsid`` and
  double forks included, can leave it; killing the unit is ``cgroup.kill``.
* ``groups`` — anything else: process groups plus ``PR_SET_CHILD_SUBREAPER`` on the runtime.
  A process that leaves its group is re-parented to the runtime while the runtime lives; one
  that does so after its session was SIGKILLed can outlive it.

``MURMUR_CONTAINMENT=groups`` forces the second class (tests use it to prove what that class
promises on a host that has cgroups).

Everything here only reads ``/proc`` and the cgroup mount; nothing is created.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

FORCE_ENV = "MURMUR_CONTAINMENT"
"""``groups`` forces the process-group class; ``auto`` (or unset, or blank) lets the host decide.
Any other value is refused by ``mur run`` and ``mur doctor`` (:func:`force_problem`)."""

FORCE_VALUES = ("auto", "groups")

UNIT_ENV = "MURMUR_CONTAINMENT_UNIT"
"""Set by an owner that started a session inside a unit it made: the unit's cgroup path
(relative to the cgroup v2 mount, as ``/proc/self/cgroup`` names it). Runtime-owned."""

CGROUP = "cgroup"
GROUPS = "groups"

_MOUNTINFO = Path("/proc/self/mountinfo")
_SELF_CGROUP = Path("/proc/self/cgroup")


@attrs.frozen
class HostClass:
    """What this host gives.

    Attributes:
        name (str): ``cgroup`` or ``groups``.
        mount (Path | None): the cgroup v2 mount point (None when there is none).
        own (str | None): this process's cgroup path relative to the mount (``/`` for the root).
        why (str): one sentence: why this class (what was found, or what was missing).
        dynmods (bool | None): the cgroup v2 mount has ``favordynmods`` (cgroup class only;
            None otherwise): without it each unit join waits for an RCU grace period
            (:data:`SLOW_JOIN_NOTE`).
    """

    name: str
    mount: Path | None
    own: str | None
    why: str
    dynmods: bool | None = None

    @property
    def base(self) -> Path | None:
        """The directory of this process's own cgroup (cgroup class only)."""
        if self.name != CGROUP or self.mount is None or self.own is None:
            return None
        return self.mount / self.own.lstrip("/")

    def doctor_line(self) -> str:
        """The ``teardown:`` line ``mur doctor`` prints."""
        if self.name == CGROUP:
            return "teardown: cgroup v2 (every process a session starts is contained)"
        return (
            "teardown: process groups (a process that leaves its group can outlive a "
            f"SIGKILLed session; {self.why})"
        )

    def doctor_notes(self) -> list[str]:
        """The lines ``mur doctor`` prints under the ``teardown:`` line (empty: nothing to say)."""
        if self.name == CGROUP and self.dynmods is False and self.mount is not None:
            return [SLOW_JOIN_NOTE.format(mount=self.mount)]
        return []


FAVORDYNMODS = "favordynmods"
"""The cgroup v2 mount option (Linux 6.0+) that makes moving a process between cgroups cheap."""

SLOW_JOIN_NOTE = (
    "  note: the cgroup v2 mount lacks favordynmods, so every process a session starts waits for "
    "its unit join (one RCU grace period, about 5-20 ms); `mount -o remount,favordynmods {mount}` "
    "(as root, Linux 6.0+) makes it cheap"
)
"""``mur doctor``'s note for a cgroup-class host whose mount lacks :data:`FAVORDYNMODS` (spec/session.md "Containment")."""


def unescape_mount_field(text: str) -> str:
    """A mountinfo path field with its octal escapes (``\\040`` for a space) decoded."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 4 <= len(text) and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def cgroup2_mount(mountinfo: str) -> Path | None:
    """The first cgroup2 mount point listed in ``mountinfo`` text (pure), or None."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return Path(unescape_mount_field(fields[4]))
    return None


def mount_read_only(mountinfo: str, mount: Path) -> bool:
    """Whether ``mountinfo`` lists ``mount`` as mounted read-only (its mount or super options; pure)."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or Path(unescape_mount_field(fields[4])) != mount:
            continue
        options = fields[5].split(",") + (tail[2].split(",") if len(tail) >= 3 else [])
        return "ro" in options
    return False


def mount_favors_dynmods(mountinfo: str, mount: Path) -> bool:
    """Whether ``mountinfo`` lists ``mount`` with the ``favordynmods`` super option (pure).

    Without it the kernel synchronises RCU (one grace period) for every write to a
    ``cgroup.procs`` that moves a process, unless another move happened within the last
    grace period: a unit join costs about 5-20 ms instead of well under 1 ms.
    """
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or Path(unescape_mount_field(fields[4])) != mount:
            continue
        return len(tail) >= 3 and FAVORDYNMODS in tail[2].split(",")
    return False


def _read_only(mountinfo: str, mount: Path) -> bool:
    """``mount`` is read-only here: per ``mountinfo``, or its ``statvfs`` says ``ST_RDONLY``."""
    if mount_read_only(mountinfo, mount):
        return True
    try:
        return bool(os.statvfs(mount).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def v2_path(proc_cgroup: str) -> str | None:
    """The unified-hierarchy path from ``/proc/<pid>/cgroup`` text (the ``0::`` line; pure)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def own_cgroup() -> str | None:
    """This process's cgroup v2 path, or None when there is no unified hierarchy."""
    try:
        return v2_path(_SELF_CGROUP.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def pid_cgroup(pid: int) -> str | None:
    """Process ``pid``'s cgroup v2 path, or None when it is gone or unreadable."""
    try:
        return v2_path(Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def force_problem(environ: Mapping[str, str]) -> str | None:
    """Why ``MURMUR_CONTAINMENT`` in ``environ`` names no class, or None when it is usable (pure)."""
    value = environ.get(FORCE_ENV, "")
    if value.strip().lower() in ("", *FORCE_VALUES):
        return None
    return f"{FORCE_ENV}={value!r} names no containment class (it may be `groups` or `auto`)"


def detect(environ: Mapping[str, str] | None = None, *, probe: bool = False) -> HostClass:
    """The class this process can use (reads ``/proc`` and tests write access).

    Args:
        environ (Mapping[str, str] | None): where ``MURMUR_CONTAINMENT`` is read (default
            ``os.environ``).
        probe (bool): also create and remove a probe unit, so the answer is what a session
            would really get (``mur doctor``); otherwise nothing is created.

    Returns:
        HostClass: ``cgroup`` when cgroup v2 is mounted, this process's cgroup is known, and
        its directory and ``cgroup.procs`` are writable here; ``groups`` otherwise, with why.
    """
    env = os.environ if environ is None else environ
    if env.get(FORCE_ENV, "").strip().lower() == GROUPS:
        return HostClass(GROUPS, None, None, f"{FORCE_ENV}=groups asks for it")
    try:
        mountinfo = _MOUNTINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        mountinfo = ""
    mount = cgroup2_mount(mountinfo)
    if mount is None:
        return HostClass(GROUPS, None, None, "no cgroup v2 hierarchy is mounted")
    own = own_cgroup()
    if own is None:
        return HostClass(GROUPS, mount, None, "this process is in no cgroup v2 group")
    base = mount / own.lstrip("/")
    if not (base / "cgroup.procs").exists():
        return HostClass(GROUPS, mount, own, f"{base} is not visible here")
    if _read_only(mountinfo, mount):
        return HostClass(GROUPS, mount, own, f"the cgroup v2 mount {mount} is read-only")
    if not os.access(base, os.W_OK) or not os.access(base / "cgroup.procs", os.W_OK):
        return HostClass(GROUPS, mount, own, f"cgroup {own} cannot be written by this user")
    if probe:
        trial = base / f"murmur-probe-{os.getpid()}"
        try:
            os.mkdir(trial)
            os.rmdir(trial)
        except OSError as exc:
            return HostClass(GROUPS, mount, own, f"a cgroup cannot be made beneath {own} ({exc.strerror})")
    return HostClass(CGROUP, mount, own, f"cgroup v2 at {mount}, beneath {own}",
                     dynmods=mount_favors_dynmods(mountinfo, mount))
