"""Killing every process of a demo at once, however deep: freeze the tree, then SIGKILL it.

The demo's children lead process groups of their own, and so do the processes *they* start
(the formation's members, the delegated child, each plan step's shell). Signalling the demo's
own groups therefore leaves the rest running, and a process that is signalled while it forks
may leave a child behind. :func:`kill_tree` closes both gaps: it finds every process linked to
the seeds (child of, or in the process group or session of, a process already found), stops
each with SIGSTOP and waits until the host shows it stopped (a stopped process neither forks
nor writes), looks again until nothing new turns up, then SIGKILLs them all and waits until
they are gone. :func:`session_pids` adds the sessions named by ``$MURMUR_HOME/running``
records, which still run after their parent is gone.

Linux only (``/proc``); elsewhere :func:`process_table` is empty and only the seeds are killed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from murmur import procstat

_PROC = Path("/proc")
_STOPPED_OR_DEAD = frozenset({"T", "t", "Z", "X", "x"})


@attrs.frozen
class ProcInfo:
    """One row of the process table.

    Attributes:
        ppid (int): the parent's pid.
        pgid (int): the process group.
        sid (int): the session.
        state (str): the state letter (``R``, ``S``, ``T``, ``Z`` …).
    """

    ppid: int
    pgid: int
    sid: int
    state: str


def proc_info(pid: int) -> ProcInfo | None:
    """The table row of ``pid`` (:func:`murmur.procstat.read_stat`), or None when it is gone."""
    stat = procstat.read_stat(pid, _PROC)
    if stat is None:
        return None
    return ProcInfo(ppid=stat.ppid, pgid=stat.pgid, sid=stat.sid, state=stat.state)


def process_table() -> dict[int, ProcInfo]:
    """Every process the host shows, by pid (empty without ``/proc``)."""
    table: dict[int, ProcInfo] = {}
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            info = proc_info(int(entry))
            if info is not None:
                table[int(entry)] = info
    return table


def linked(seeds: Iterable[int], table: Mapping[int, ProcInfo], exclude: Iterable[int] = ()) -> set[int]:
    """The seeds plus every process linked to one found: its child, or in its group or session.

    Pure. Zombies and ``exclude`` are left out (and never link anything further); a seed no
    longer in the table is not returned, but its group and session still link their members.

    Args:
        seeds (Iterable[int]): pids to start from.
        table (Mapping[int, ProcInfo]): from :func:`process_table`.
        exclude (Iterable[int]): pids never returned (the caller itself, its parent).
    """
    skip = set(exclude) | {pid for pid, info in table.items() if info.state in ("Z", "X", "x")}
    roots = {s for s in seeds if s > 1 and s not in skip}
    found = {s for s in roots if s in table}
    while True:
        links = roots | found
        more = {pid for pid, info in table.items()
                if pid not in found and pid not in skip
                and (info.ppid in links or info.pgid in links or info.sid in links)}
        if not more:
            return found
        found |= more


def session_pids(home: Path) -> set[int]:
    """The live sessions named by the running records under ``home/running``.

    A record counts only while its pid still has the start time it records (a reused pid is
    another program, never signalled).
    """
    pids: set[int] = set()
    try:
        files = list((home / "running").glob("*.json"))
    except OSError:
        return pids
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        pid, started = data.get("pid"), data.get("start_time")
        if isinstance(pid, int) and pid > 1 and isinstance(started, int) and procstat.start_time(pid) == started:
            pids.add(pid)
    return pids


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_states(pids: Iterable[int], done: frozenset[str] | None, within: float) -> None:
    """Wait up to ``within`` s until each pid is gone or (``done`` given) in one of ``done``."""
    end = time.monotonic() + within
    waiting = set(pids)
    while waiting:
        for pid in list(waiting):
            info = proc_info(pid)
            if info is None or info.state in ("Z", "X", "x") or (done is not None and info.state in done):
                waiting.discard(pid)
        if not waiting or time.monotonic() >= end:
            return
        time.sleep(0.005)


def kill_tree(seeds: Iterable[int], *, exclude: Iterable[int] = (), bound: float = 2.0) -> set[int]:
    """SIGKILL the seeds and everything linked to them (see the module docstring), except the
    containment janitors among them (:func:`murmur.containment.is_janitor`): a janitor outlives
    its owner to kill and remove every unit the owner registered with it -- also one no killed
    process is in when the tree is frozen (a formation's ``starter-1`` made just before its starter
    is moved in, or already empty while its launcher winds down), which this sweep cannot see.
    Killing it left such units behind. A spared janitor exits once its units
    are gone (at most its bound, spec/formation.md "The janitor").

    Args:
        seeds (Iterable[int]): pids (or process group leaders) to start from.
        exclude (Iterable[int]): pids never signalled; the caller's own pid is always added.
        bound (float): seconds spent at most on each of freezing and waiting for the end.

    Returns:
        set[int]: the pids that were signalled.
    """
    from murmur.containment import is_janitor

    skip = {*exclude, os.getpid(), os.getppid()}
    stopped: set[int] = set()
    spared: set[int] = set()  # containment janitors: each removes its dead owner's units
    end = time.monotonic() + bound
    while True:
        found = linked(set(seeds) | stopped, process_table(), skip | spared)
        new = found - stopped
        janitors = {pid for pid in new if is_janitor(pid)}
        spared |= janitors
        new -= janitors
        if not new:
            break
        for pid in new:  # what a scan found is stopped (and then killed) even past the bound
            _signal(pid, signal.SIGSTOP)
        stopped |= new
        if time.monotonic() >= end:
            break
        _wait_states(new, _STOPPED_OR_DEAD, max(0.0, end - time.monotonic()))
    # The units the killed processes are in; a unit that holds none of them at this moment (made
    # but not yet entered, or already left) is removed by its owner's janitor, spared above.
    units = _units_of(stopped)
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    _wait_states(stopped, None, bound)
    _remove_units(units, bound)
    return stopped


def _units_of(pids: Iterable[int]) -> set[Path]:
    """The outermost ``murmur-*`` containment unit each of ``pids`` lives in (cgroup class)."""
    from murmur.containment import detect, pid_cgroup

    host = detect()
    if host.mount is None:
        return set()
    out: set[Path] = set()
    for pid in pids:
        rel = pid_cgroup(pid) or ""
        parts = [p for p in rel.split("/") if p]
        for i, part in enumerate(parts):
            if part.startswith("murmur-"):
                out.add(host.mount.joinpath(*parts[: i + 1]))
                break
    return out


def _remove_units(units: Iterable[Path], bound: float) -> None:
    """Kill what is left in each unit and remove it once empty (bounded; never raises)."""
    from murmur.containment import cgroup

    end = time.monotonic() + bound
    pending = set(units)
    for unit in pending:
        cgroup.kill(unit)
    while pending and time.monotonic() < end:
        pending = {u for u in pending if not cgroup.remove(u)}
        if pending:
            time.sleep(0.01)
