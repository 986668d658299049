"""Who may ask: the peer of a capability-socket connection (spec/links.md "Who may ask").

The kernel names the peer (``SO_PEERCRED``: pid, uid, gid at ``connect``). It may ask when it
runs as this user and

* cgroup class: its cgroup (``/proc/<pid>/cgroup``) is a live command unit of this session
  (``…/murmur-<id>/cmd-<n>``) or beneath one — wherever it forked or double-forked to, as long
  as it is still contained; a delegated child's units (``dlg_…``) are not command units, so a
  child cannot use its parent's socket;
* groups class: its parent chain reaches the pid of a live command unit of this session, and
  that pid's start time is the one recorded when the command started (pid reuse guard). A
  process that double-forked out of its command is adopted by the runtime, not the command,
  and is refused.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterable
from pathlib import Path

import attrs

from murmur import procstat
from murmur.containment import Containment, Unit, pid_cgroup

COMMAND_LABEL = "cmd-"
_CHAIN_LIMIT = 128  # ancestors walked before giving up


@attrs.frozen
class Peer:
    """The process at the other end of a connection."""

    pid: int
    uid: int


@attrs.frozen
class Verdict:
    """Whether the peer may ask; ``why`` is one sentence when it may not."""

    allowed: bool
    why: str = ""
    unit: str | None = None


def peer_of(sock: socket.socket) -> Peer:
    """``SO_PEERCRED`` of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return Peer(pid, uid)


def command_units(units: Iterable[Unit]) -> list[Unit]:
    """The live units of commands (shell commands, agent shell tool, process harness)."""
    return [u for u in units if u.label.startswith(COMMAND_LABEL) and not u.released]


def within(path: Path, unit_path: Path) -> bool:
    """``path`` is ``unit_path`` or beneath it (pure)."""
    return path == unit_path or unit_path in path.parents


def check(peer: Peer, where: Containment, *, session_id: str) -> Verdict:
    """Decide whether ``peer`` may ask this session (see the module docstring)."""
    outside = f"process {peer.pid} is not inside session {session_id}"
    if peer.uid != os.getuid():
        return Verdict(False, f"{outside} (it runs as another user)")
    units = command_units(where.live_units())
    if where.class_name == "cgroup" and where.host.mount is not None:
        rel = pid_cgroup(peer.pid)
        if rel is None:
            return Verdict(False, f"{outside} (its cgroup cannot be read)")
        path = where.host.mount / rel.lstrip("/")
        for unit in units:
            if unit.path is not None and within(path, unit.path):
                return Verdict(True, unit=unit.label)
        return Verdict(False, f"{outside} (its cgroup {rel} is no command unit of this session)")
    by_pid = {u.pid: u for u in units if u.pid is not None}
    pid: int | None = peer.pid
    for _ in range(_CHAIN_LIMIT):
        if pid is None or pid <= 1:
            break
        found = by_pid.get(pid)
        if found is not None and found.is_started_process(pid):
            return Verdict(True, unit=found.label)
        if pid == os.getpid():
            break  # adopted by the runtime itself: it left its command
        pid = procstat.parent_pid(pid)
    return Verdict(False, f"{outside} (it descends from no command this session started)")
