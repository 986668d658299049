"""The janitor: a small process that survives its owner and kills what the owner left.

Specification: ``spec/formation.md`` "The janitor". Run as ``python -I -S janitor.py`` (this
file imports nothing but the standard library, so it starts in tens of milliseconds and holds
a few MB). Its owner — a formation's launcher, or a root ``mur run`` — starts it in a session
of its own, outside every unit it will clean, and keeps the write end of its stdin. Each line
the owner writes is one JSON object:

* ``{"add": "cgroup", "key": K, "path": P, "pid": N, "start": S}`` — a cgroup unit, and the
  process whose end makes it ownerless (``pid`` with its ``/proc`` start time ``S``, clock ticks
  since boot, ``null`` when unknown; pid ``0``: none, the unit is killed only at the bound — a
  root's own unit, which holds the others);
* ``{"add": "group", "key": K, "pgid": G, "pid": N, "start": S}`` — a process group;
* ``{"add": "pid", "key": K, "pid": N, "start": S}`` — one process that shares its owner's
  group (the entry member on the process-group class): killed when the bound passes;
* ``{"drop": K}`` — the owner cleaned that unit itself;
* ``{"bound": SECONDS}`` — how long a unit's process may still wind down after the owner is gone.

EOF on stdin means the owner is gone (or finished: it drops everything first). Lines are read
at most every :data:`COALESCE` seconds (a burst of them costs one wake-up). Then, for each
unit left: as soon as its process has ended, or ``bound`` seconds after the EOF, whichever is
first, everything in the unit is killed and the unit removed. The janitor exits when no unit is
left, and in any case ``bound + 5`` seconds after the EOF (then :data:`LAST_WORD` more for what
it kills at that moment to exit, so its units can be removed). It ignores SIGINT, SIGHUP and
SIGTERM (a terminal's Ctrl-C or a group kill must not stop the one process that cleans up);
SIGKILL ends it, and then its owner's own teardown still runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

POLL = 0.02  # seconds between checks while units wind down
LAST_WORD = 2.0
"""Seconds the janitor gives units it killed when it gave up waiting to empty before it leaves:
a unit removed at once after the kill is still populated by its dying processes, and stays."""
COALESCE = 0.02
"""Seconds the janitor waits after reading before it reads again: an owner starting commands
fast writes several lines per read instead of waking the janitor for each (on a busy host each
wake-up took the owner's core for a while). EOF is seen at most this much later."""


def _parse_start(text: str) -> str | None:
    """Field 22 of a ``/proc/<pid>/stat`` line as text; None when malformed or a zombie (not alive).

    The rule of :func:`murmur.procstat.parse_stat`, copied on purpose: this file runs as
    ``python -I -S janitor.py``, which puts neither the package nor site-packages on the path,
    and importing them would cost its start. ``tests/test_procstat.py`` holds both to one table.
    """
    _, close, rest = text.rpartition(")")
    fields = rest.split()
    if not close or len(fields) < 20 or fields[0] == "Z":
        return None
    if not all(fields[i].isdigit() for i in (1, 2, 3, 19)):
        return None
    return fields[19]


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return _parse_start(f.read())
    except OSError:
        return None


def _alive(pid: int, start: str) -> bool:
    now = _start_time(pid)
    return now is not None and (not start or now == start)


def _populated(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.events"), encoding="ascii") as f:
            return "populated 1" in f.read()
    except OSError:
        return False


def _kill_cgroup(path: str) -> None:
    try:
        with open(os.path.join(path, "cgroup.kill"), "w", encoding="ascii") as f:
            f.write("1")
        return
    except OSError:
        pass
    for root, _dirs, _files in os.walk(path):
        try:
            with open(os.path.join(root, "cgroup.procs"), encoding="ascii") as f:
                pids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _remove_cgroup(path: str) -> bool:
    if not os.path.isdir(path):
        return True
    for root, dirs, _files in os.walk(path, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Unit:
    def __init__(self, spec: dict[str, object]) -> None:
        self.kind = str(spec.get("add"))
        self.path = str(spec.get("path", ""))
        pgid = spec.get("pgid", 0)
        pid = spec.get("pid", 0)
        self.pgid = pgid if isinstance(pgid, int) else 0
        self.pid = pid if isinstance(pid, int) else 0
        start = spec.get("start")
        self.start = "" if start is None else str(start)  # "": unknown, any process with the pid
        self.killed = False

    def owner_alive(self) -> bool:
        """Whether the watched process runs; a unit watching no process (pid 0) waits the bound."""
        if self.pid <= 0:
            return True
        return self.pid > 1 and _alive(self.pid, self.start)

    def empty(self) -> bool:
        if self.kind == "cgroup":
            return not _populated(self.path)
        if self.kind == "pid":
            return self.pid <= 1 or not _alive(self.pid, self.start)
        return self.pgid <= 1 or not _group_alive(self.pgid)

    def kill(self) -> None:
        self.killed = True
        if self.kind == "cgroup":
            _kill_cgroup(self.path)
        elif self.kind == "pid":
            if self.pid > 1 and _alive(self.pid, self.start):
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
        elif self.pgid > 1:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except OSError:
                pass

    def finish(self) -> bool:
        """True once nothing is left of it."""
        if not self.empty():
            return False
        return _remove_cgroup(self.path) if self.kind == "cgroup" else True


def read_registrations(stream: object) -> tuple[dict[str, Unit], float]:
    """Read lines until EOF; the units still registered and the bound (seconds)."""
    units: dict[str, Unit] = {}
    bound = 25.0
    buf = b""
    fd = stream  # an int fd
    assert isinstance(fd, int)
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            break
        buf += chunk
        time.sleep(COALESCE)
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if "add" in msg and isinstance(msg.get("key"), str):
                units[msg["key"]] = Unit(msg)
            elif isinstance(msg.get("drop"), str):
                units.pop(msg["drop"], None)
            elif isinstance(msg.get("bound"), (int, float)):
                bound = max(0.0, float(msg["bound"]))
    return units, bound


def clean(units: dict[str, Unit], bound: float, now: float) -> None:
    """Kill and remove every unit, each when its process has ended or at ``now + bound``."""
    kill_at = now + bound
    give_up = kill_at + 5.0
    pending = dict(units)
    while pending and time.monotonic() < give_up:
        t = time.monotonic()
        for key, unit in list(pending.items()):
            if unit.finish():
                del pending[key]
                continue
            if not unit.killed and (t >= kill_at or not unit.owner_alive()):
                unit.kill()
        if pending:
            time.sleep(POLL)
    for unit in pending.values():  # the last word: kill once more, give the killed
        unit.kill()  # processes a moment to exit (a unit is removable only once empty), then leave
    last = time.monotonic() + LAST_WORD
    while pending and time.monotonic() < last:
        for key, unit in list(pending.items()):
            if unit.finish():
                del pending[key]
        if pending:
            time.sleep(POLL)


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    try:
        os.chdir("/")
    except OSError:
        pass
    units, bound = read_registrations(0)
    clean(units, bound, time.monotonic())
    return 0


if __name__ == "__main__":
    sys.exit(main())
