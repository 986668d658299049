"""Who is calling: the TCP peer's process and its ancestry, read from ``/proc``.

Specification: ``spec/gateway.md`` "Who is calling". The peer is found as mur-roost finds it
(:class:`murmur.roost.peer.PeerFinder`: the client socket by sock_diag or ``/proc/net/tcp``,
then the one process holding it, named with its start time). Its ancestry is the chain of
parents up to pid 1; the nearest one that is a registered session is the caller's session
(:meth:`murmur.gateway.nodes.Tree.by_process`). No token takes part: a process can copy a
token, but cannot make itself the child of a session it is not under.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from murmur import procstat
from murmur.roost.peer import PeerFinder

__all__ = ["ancestry", "caller_ancestry", "quick_ancestry"]

_MAX_DEPTH = 256


def ancestry(pid: int, proc: Path = procstat.PROC) -> list[tuple[int, int]]:
    """``pid`` and its ancestors as (pid, start ticks), nearest first; stops at pid 1 or a gap."""
    out: list[tuple[int, int]] = []
    while pid > 1 and len(out) < _MAX_DEPTH:
        stat = procstat.read_stat(pid, proc)
        if stat is None:
            break
        out.append((pid, stat.start_time))
        pid = stat.ppid
    return out


def caller_ancestry(
    finder: PeerFinder,
    client: tuple[str, int],
    server: tuple[str, int],
    hints: Iterable[int] = (),
) -> list[tuple[int, int]]:
    """The ancestry of the process at the client end, or [] when it cannot be placed.

    ``hints``: pids to try first (the peers of recent connections: a process that opened one
    connection usually opens more). A hinted process that holds the client's socket is its
    peer, found by reading that one process's descriptors instead of every process's; a
    process can hold a socket only if it opened it or was handed it by a process that did.

    Blocking (reads ``/proc``): call it in a worker thread.
    """
    peer = None
    for pid in hints:
        peer = finder.quick(client, server, pid)
        if peer is not None:
            break
    if peer is None:
        peer = finder(client, server)
    if peer is None:
        return []
    found = ancestry(peer.pid, finder.proc)
    return found if found and found[0] == (peer.pid, peer.start_ticks) else []


def quick_ancestry(
    finder: PeerFinder, client: tuple[str, int], server: tuple[str, int]
) -> list[tuple[int, int]] | None:
    """As :func:`caller_ancestry` for a connection placed before (cheap: may run on the loop).

    Returns None when the connection is not known cheaply (then ask :func:`caller_ancestry`
    in a worker thread). The ancestry itself is read afresh each time (a few ``stat`` reads),
    so a process whose parent has gone since is judged by its ancestry now.
    """
    peer = finder.quick(client, server)
    if peer is None:
        return None
    found = ancestry(peer.pid, finder.proc)
    return found if found and found[0] == (peer.pid, peer.start_ticks) else []
