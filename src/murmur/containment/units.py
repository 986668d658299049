"""This process's containment: its session unit, the units of what it starts, its janitor.

Specification: ``spec/session.md`` "Containment". One :class:`Containment` per process
(:func:`here`). Every process the runtime starts — a shell command, an agent harness, a
delegated child, a formation member — gets a :class:`Unit` from :meth:`Containment.new_unit`
(through :func:`murmur.procs.new_unit`) before it starts, and the unit is released (everything in it killed, its directory removed)
when its owner is done with it, on every exit path:

* cgroup class: the session unit is a cgroup directory — the cgroup this process was started
  in when its owner made one for it (``MURMUR_CONTAINMENT_UNIT`` names it and
  ``/proc/self/cgroup`` agrees), or else ``murmur-<label>`` beneath this process's own cgroup.
  Each started process gets a sub-unit it joins before ``exec``.
* groups class: each started process leads a process group of its own; this process is a
  child subreaper, and adopted escapees are killed when a command ends and at teardown.

A root (a session no owner placed, or a formation launcher) also has a janitor
(:mod:`murmur.containment.janitor`), started with its first unit by whoever makes units
(:func:`murmur.procs.new_unit`, which starts it through :func:`murmur.procs.start_janitor`
and hands it over with :meth:`Containment.attach_janitor`; this package starts no process).
Lines for it written before it is attached are kept and sent once it is. When this process
dies, by SIGKILL included, the janitor kills each registered unit (at once for a command; after the bound
for a member or child that may still be winding down) and removes it.

:meth:`Containment.kill_all` is synchronous, for the forced exits (second signal, 20 s guard).
"""

from __future__ import annotations

import atexit
import errno
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import trio

from murmur import procstat, realtime
from murmur.containment import cgroup, groups
from murmur.containment.host import CGROUP, GROUPS, UNIT_ENV, HostClass, detect, own_cgroup

__all__ = ["JANITOR_SCRIPT", "Containment", "Unit", "here", "is_janitor", "reset_for_tests"]

JANITOR_SCRIPT = Path(__file__).with_name("janitor.py")
"""The janitor's script (:mod:`murmur.containment.janitor`), run as ``python -I -S JANITOR_SCRIPT``."""


def is_janitor(pid: int) -> bool:
    """Whether ``pid`` runs this install's containment janitor (its ``/proc/<pid>/cmdline`` names
    :data:`JANITOR_SCRIPT`); False once it is gone. A janitor is what removes its owner's units
    after the owner died, so a sweep that kills a tree spares it (``murmur.demo.sweep``)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(JANITOR_SCRIPT) in args[1:4]

JANITOR_BOUND = 25.0  # seconds a member or child may still wind down after its owner died
_REMOVE_WAIT = 2.0  # seconds release() waits for a killed unit to empty before leaving it
_QUIET = 0.05  # groups class: a sweep is done once nothing was adopted for this long
_CLOSE_SWEEP = 1.0  # groups class: bound on the sweeps at a session's end (seconds)
_FORCED_SWEEP = 0.3  # groups class: bound on the sweeps before a forced exit (seconds)


class Unit:
    """The containment of one started process (and everything it forks).

    Attributes:
        label (str): e.g. ``cmd-3``, ``dlg_…``, a member name.
        kind (str): ``cgroup`` or ``group``.
        path (Path | None): the unit's cgroup directory (cgroup class).
        pid (int | None): the started process, once :meth:`started` was called.
    """

    def __init__(self, owner: Containment, label: str, path: Path | None) -> None:
        self._owner = owner
        self.label = label
        self.path = path
        self.kind = CGROUP if path is not None else "group"
        self.pid: int | None = None
        self._start: int | None = None  # the started process's start time (procstat)
        self._start_read = True
        self._pidfd: int | None = None  # cgroup class: the started process, until released
        self._own_group = True
        self.key = f"{label}#{secrets.token_hex(4)}"
        self.released = False

    # -- starting ---------------------------------------------------------------------------

    def prefix(self, env: dict[str, str] | None = None) -> list[str]:
        """The argv prefix that joins this unit before ``exec`` (empty in the groups class).

        Args:
            env (dict[str, str] | None): the command's environment (a ``PWD`` in it is kept).
        """
        if self.path is None:
            return []
        return cgroup.join_prefix(self.path, keep_pwd=env is not None and "PWD" in env)

    def command(self, argv: list[str] | tuple[str, ...], env: dict[str, str]) -> list[str]:
        """``argv`` made to start inside this unit (:meth:`prefix` + ``argv``).

        With a prefix, the process that starts is ``/bin/sh``, so a missing or non-executable
        ``argv[0]`` would only show as status 127/126. It is checked here first and raised as
        starting it directly would have raised it.

        Raises:
            OSError: ``argv[0]`` is not found (``ENOENT``) or not executable (``EACCES``).
        """
        prefix = self.prefix(env)
        if not prefix:
            return list(argv)
        program = argv[0]
        found = program if "/" in program else shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None or not os.path.exists(found):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(found) or not os.access(found, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return [*prefix, found, *argv[1:]]

    def env(self) -> dict[str, str]:
        """Runtime-owned variables for a *runtime* started in this unit (a member, a child)."""
        if self.path is None or self._owner.host.mount is None:
            return {}
        rel = "/" + str(self.path.relative_to(self._owner.host.mount)).lstrip("/")
        return {UNIT_ENV: rel}

    def started(self, pid: int, *, own_group: bool = True, winds_down: bool = False, child: bool = True) -> None:
        """The process runs: register it with the janitor (if this process has one).

        Args:
            pid (int): its pid.
            own_group (bool): it leads a process group of its own (``start_new_session``).
            winds_down (bool): it is a runtime that winds down by itself when its owner dies
                (a member, a delegated child): the janitor gives it the bound before killing.
                Otherwise (a command) the janitor kills it as soon as its owner is gone.
            child (bool): it is this process's own child, not reaped yet (the exec path), so
                a pidfd opened now names it; False for a warm starter's fork.
        """
        self.pid = pid
        self._own_group = own_group
        self._owner._started.add(pid)
        if self.path is None or winds_down:  # guards pid reuse (is_started_process, the janitor)
            self.start = procstat.start_time(pid)
        else:  # read on first use: /proc/<pid>/stat waits while the trampoline execs (~1 ms)
            self._start_read = False
        if self.path is not None and child:
            # Until its trampoline has written cgroup.procs the process is not in the unit yet,
            # and cgroup.kill would miss it: kill() also signals it through this pidfd (never
            # a reused pid). It is our unreaped child here, so the pid names it.
            try:
                self._pidfd = os.pidfd_open(pid)
            except OSError:
                self._pidfd = None
        watched = pid if winds_down else os.getpid()
        msg: dict[str, Any] = {"key": self.key, "pid": watched,
                               "start": self.start if winds_down else self._owner.start_of(watched)}
        if self.path is not None:
            msg.update({"add": "cgroup", "path": str(self.path)})
        elif own_group:
            msg.update({"add": "group", "pgid": pid})
        else:
            msg.update({"add": "pid", "pgid": 0, "pid": pid, "start": self.start})
        self._owner._janitor_send(msg)

    @property
    def start(self) -> int | None:
        """The started process's start time (``/proc/<pid>/stat``), or None before it started.

        On the cgroup class a command's is read on first use rather than at the start (its
        pid cannot be reused before its owner reaps it, and the class's checks use the
        cgroup, not the pid)."""
        if not self._start_read:
            self._start_read = True
            self._start = procstat.start_time(self.pid) if self.pid is not None else None
        return self._start

    @start.setter
    def start(self, value: int | None) -> None:
        self._start, self._start_read = value, True

    def is_started_process(self, pid: int) -> bool:
        """Whether ``pid`` is the process this unit started, still running as itself.

        The pid and its start time (``/proc/<pid>/stat``) must both be the ones :meth:`started`
        recorded, so a reused pid is not taken for the unit's process.
        """
        return pid == self.pid and self.start is not None and self.start == procstat.start_time(pid)

    # -- ending -----------------------------------------------------------------------------

    def populated(self) -> bool:
        """Whether anything of this unit still runs (a zombie leader counts in the groups class)."""
        if self.path is not None:
            return cgroup.populated(self.path)
        return self.pid is not None and self._own_group and groups.group_alive(self.pid)

    def kill(self, *, sweep: bool = True) -> None:
        """SIGKILL everything in the unit now (synchronous, never raises).

        Args:
            sweep (bool): also kill adopted escapees (groups class); an owner that releases
                the unit right after may leave it to :meth:`release`'s own sweep.
        """
        if self.path is not None:
            cgroup.kill(self.path)
            if self._pidfd is not None:
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                except OSError:
                    pass
        elif self.pid is not None:
            if self._own_group:
                groups.killpg(self.pid)
            else:
                try:
                    os.kill(self.pid, 9)
                except OSError:
                    pass
        if sweep:
            self._owner._sweep_adopted()

    async def wait_empty(self) -> None:
        """Return once nothing of the unit runs (bound it with a cancel scope)."""
        if self.path is not None:
            await cgroup.wait_empty(self.path)
            return
        while self.populated():  # noqa: ASYNC110 - a process group has no event to wait on
            await trio.sleep(0.02)

    async def release(self) -> None:
        """Kill what is left, remove the unit, and forget it (idempotent, never raises).

        The wait for a killed cgroup to empty is an inotify wait on its ``cgroup.events``
        (:func:`murmur.containment.cgroup.wait_empty`), bounded by ``_REMOVE_WAIT`` real
        seconds (:func:`murmur.realtime.wait_real`) and shielded: the loop keeps running, and
        a cancelled owner still releases. A unit still there at the bound stays registered
        with the janitor (which removes it once this process is gone), and the session unit's
        removal takes it too.
        """
        if self.released:
            return
        self.released = True
        self.kill()
        self._close_pidfd()
        removed = True
        if self.path is not None and not cgroup.remove(self.path):
            path = self.path
            with trio.CancelScope(shield=True):
                await realtime.wait_real(lambda: cgroup.wait_empty(path), _REMOVE_WAIT)
            removed = cgroup.remove(path)
        self._owner._forget(self, removed=removed)

    def release_blocking(self) -> None:
        """:meth:`release` for code that runs outside a Trio loop, or a unit known to hold no
        process (a start that failed before anything ran in it): a populated unit is waited
        for by polling (up to ``_REMOVE_WAIT`` s), which holds the calling thread."""
        if self.released:
            return
        self.released = True
        self.kill()
        self._close_pidfd()
        removed = True
        if self.path is not None:
            deadline = time.monotonic() + _REMOVE_WAIT
            while not (removed := cgroup.remove(self.path)) and time.monotonic() < deadline:
                time.sleep(0.005)
        self._owner._forget(self, removed=removed)

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            os.close(fd)


class Containment:
    """This process's containment (make one with :func:`here`).

    Args:
        host (HostClass): the class this host gives.
        label (str): names the session unit a root makes (``murmur-<label>``).
        environ (dict[str, str]): where ``MURMUR_CONTAINMENT_UNIT`` is read.
    """

    def __init__(self, host: HostClass, label: str, environ: dict[str, str]) -> None:
        self.host = host
        self.label = label
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._units: dict[str, Unit] = {}
        self._counter = itertools.count(1)
        self._janitor: subprocess.Popen[bytes] | None = None
        self._janitor_dead = False
        self._unsent: list[dict[str, Any]] = []  # lines for a janitor not attached yet
        self.unit_dir: Path | None = None
        self.inherited = False
        if host.name == CGROUP and host.mount is not None:
            claimed = environ.get(UNIT_ENV, "").strip()
            if claimed and claimed == own_cgroup():
                self.unit_dir = host.mount / claimed.lstrip("/")
                self.inherited = True
        self.subreaper = False
        self._started: set[int] = set()
        self.own_start = procstat.start_time(self.pid)  # this process's start time (janitor lines)

    def start_of(self, pid: int) -> int | None:
        """``pid``'s start time; this process's is read once."""
        return self.own_start if pid == self.pid else procstat.start_time(pid)

    @property
    def class_name(self) -> str:
        """``cgroup`` or ``groups`` (what ``mur doctor`` and the trace report)."""
        return self.host.name

    def adopt_escapees(self) -> bool:
        """Become a child subreaper (groups class), so escapees are ours to kill.

        Only a runtime process (``mur run``, the formation launcher) calls this: from then on
        every child of this process that no unit started is treated as an escapee and killed
        when a unit is killed. Returns whether the mark is set.
        """
        if self.host.name == GROUPS:
            self.subreaper = groups.become_subreaper()
        return self.subreaper

    def relabel(self, label: str) -> None:
        """Name the session unit after the session (before the first unit is made)."""
        if self.unit_dir is None:
            self.label = label

    # -- units --------------------------------------------------------------------------------

    def _session_unit(self) -> Path | None:
        if self.host.name != CGROUP:
            return None
        if self.unit_dir is None:
            base = self.host.base
            assert base is not None
            try:
                self.unit_dir = cgroup.make_unit(base / f"murmur-{self.label}")
            except OSError:
                self.host = HostClass(GROUPS, None, None, f"a cgroup could not be made beneath {base}")
                return None
            self._janitor_send(
                {"add": "cgroup", "key": "session", "path": str(self.unit_dir), "pid": 0, "start": None}
            )
        return self.unit_dir

    def new_unit(self, label: str) -> Unit:
        """A fresh unit for one process about to start (cgroup: a new sub-unit directory)."""
        name = f"{label}-{next(self._counter)}"
        parent = self._session_unit()
        path: Path | None = None
        if parent is not None:
            try:
                path = cgroup.make_unit(parent / name)
            except OSError:
                path = None
        unit = Unit(self, name, path)
        with self._lock:
            self._units[unit.key] = unit
        return unit

    def _forget(self, unit: Unit, *, removed: bool = True) -> None:
        """Forget a released unit; the janitor is told to drop it only once it is gone (a unit
        that could not be removed stays the janitor's, so it is removed after this process)."""
        with self._lock:
            self._units.pop(unit.key, None)
        if removed:
            self._janitor_send({"drop": unit.key}, start=False)

    def live_units(self) -> list[Unit]:
        """The units not released yet."""
        with self._lock:
            return list(self._units.values())

    def kill_all(self) -> None:
        """SIGKILL everything every live unit holds (synchronous; a forced exit's, :func:`kill_all_here`)."""
        for unit in self.live_units():
            unit.kill()
        self._sweep_until_quiet(_FORCED_SWEEP)

    def close(self) -> None:
        """Release every unit, remove the session unit a root made, and let the janitor go
        (what could not be removed stays registered with it: it removes that at its EOF)."""
        for unit in self.live_units():
            unit.release_blocking()
        self._sweep_until_quiet(_CLOSE_SWEEP)
        if self.unit_dir is not None and not self.inherited:
            cgroup.kill(self.unit_dir)
            deadline = time.monotonic() + _REMOVE_WAIT
            while not (removed := cgroup.remove(self.unit_dir)) and time.monotonic() < deadline:
                time.sleep(0.005)
            if removed:  # else the janitor, told nothing, removes it once this process is gone
                self._janitor_send({"drop": "session"}, start=False)
            self.unit_dir = None
        self._close_janitor()

    def _sweep_until_quiet(self, bound: float) -> None:
        """Sweep adopted escapees until none has turned up for a while (groups class).

        A killed command's escapee becomes our child only once its parent has finished
        dying, a moment after the kill: one sweep right after the kill can miss it. Sweeps
        repeat until ``_QUIET`` seconds pass with nothing adopted, within ``bound`` seconds.
        """
        if self.host.name != GROUPS or not self.subreaper:
            return
        end = time.monotonic() + bound
        quiet_since = time.monotonic()
        while True:
            if self._sweep_adopted():
                quiet_since = time.monotonic()
            now = time.monotonic()
            if now - quiet_since >= _QUIET or now >= end:
                return
            time.sleep(0.005)

    def _sweep_adopted(self) -> int:
        if self.host.name != GROUPS or not self.subreaper:
            return 0
        with self._lock:
            units = list(self._units.values())
        known = {u.pid for u in units if u.pid is not None}
        spare = {u.pid for u in units if u.pid is not None and u._own_group and not u.released}
        if self._janitor is not None:
            known.add(self._janitor.pid)
        known |= self._started
        return groups.kill_adopted(known, spare_groups=spare)

    # -- the janitor ----------------------------------------------------------------------------

    def janitor_wanted(self) -> bool:
        """Whether this process should start a janitor now (it is a root, has none, and none died)."""
        return not self.inherited and not self._janitor_dead and self._janitor is None

    def attach_janitor(self, proc: subprocess.Popen[bytes] | None) -> None:
        """Take the janitor :func:`murmur.procs.placement.ensure_janitor` started (None: it could
        not be started; units then have only their owner's own teardown) and tell it the bound."""
        if proc is None:
            self._janitor_dead = True
            return
        self._janitor = proc
        self._janitor_send({"bound": JANITOR_BOUND})
        for msg in self._unsent:
            self._janitor_send(msg)
        self._unsent.clear()

    def _janitor_send(self, msg: dict[str, Any], *, start: bool = True) -> None:
        if self.inherited or self._janitor_dead:
            return
        proc = self._janitor
        if proc is None:
            if start:  # kept for the janitor a unit's maker attaches (murmur.procs.placement)
                self._unsent.append(msg)
            else:
                self._unsent = [m for m in self._unsent if m.get("key") != msg.get("drop")]
            return
        if proc.stdin is None:
            return
        try:
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._janitor_dead = True  # killed: our own teardown still runs

    @property
    def janitor_pid(self) -> int | None:
        """The janitor's pid, when this process started one."""
        return self._janitor.pid if self._janitor is not None else None

    def _close_janitor(self) -> None:
        proc, self._janitor = self._janitor, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass


_here: Containment | None = None
_here_lock = threading.Lock()


def here(label: str | None = None) -> Containment:
    """This process's :class:`Containment` (made on first use; ``label`` names a root's unit)."""
    global _here
    with _here_lock:
        if _here is None:
            env = dict(os.environ)
            _here = Containment(detect(env), label or f"pid{os.getpid()}", env)
            atexit.register(_close_at_exit)
        elif label is not None:
            _here.relabel(label)
        return _here


def kill_all_here() -> None:
    """SIGKILL everything this process's containment holds, if it made one (synchronous).

    The last act of a forced exit (:func:`murmur.session.winddown.forced_exit`); it takes no
    lock, so a timer thread can call it whatever the event loop holds.
    """
    c = _here
    if c is not None:
        c.kill_all()


def _close_at_exit() -> None:
    """An ordinary interpreter exit releases what is still contained (tests, library use)."""
    with _here_lock:
        c = _here
    if c is not None and os.getpid() == c.pid:
        c.close()


def reset_for_tests() -> None:
    """Close and forget this process's containment (tests that change the environment)."""
    global _here
    with _here_lock:
        c, _here = _here, None
    if c is not None:
        c.close()
