"""Which process holds the other end of a loopback TCP connection (Linux ``/proc``).

Specification: ``spec/roost.md``, "When a session's process ends". At ``POST /register`` mur-roost asks which process opened the connection the request
came on, so that it can learn when that process ends without deregistering.

How: the connection's client-side socket is found by its exact addresses (local: the request's
client address; remote: the daemon's own) with one ``NETLINK_SOCK_DIAG`` request
(:mod:`murmur.roost.sockdiag`), or, where the host serves none, as the row of
``/proc/net/tcp`` (or ``tcp6``) with those addresses; either names the socket's inode and
owner uid. The process holding it is the one whose
``/proc/<pid>/fd`` holds a link to ``socket:[<inode>]``; only processes of the socket's uid are
looked at, and only those whose descriptors this process may read (the same user, or root).
A process is named together with its start time (``/proc/<pid>/stat`` field 22, clock ticks
since boot, :func:`murmur.procstat.start_time`), so a pid the kernel has since given to another process is never mistaken for it.

The parsers are pure (table-tested); :func:`find_peer` does the reading. Nothing here raises
for a connection it cannot place: it answers None, and the caller watches nothing.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from murmur import procstat
from murmur.roost import sockdiag

__all__ = [
    "Peer",
    "PeerFinder",
    "find_peer",
    "owners_of",
    "parse_endpoint",
    "socket_row",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Endpoint = tuple[Address, int]
Living = Callable[[int], "Peer | None"]  # pid -> the process a held pidfd proves running, or None
_PROC = Path("/proc")
_RECENT_FDS = 256  # descriptors remembered per process as having held one of its sockets
_FIRST_TRIES = 16  # of those, read before listing the process's descriptors
_SEEN_LINKS = 1024  # socket links per process noted while listing its descriptors


@attrs.frozen
class Peer:
    """A process, named so that a reused pid cannot pass for it.

    Attributes:
        pid (int): its process id (thread-group id).
        start_ticks (int): when it started, in clock ticks since boot (``/proc/<pid>/stat``
            field 22).
    """

    pid: int
    start_ticks: int


def _normal(addr: Address) -> Address:
    """IPv4-mapped IPv6 addresses compare as the IPv4 address they map."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


@functools.lru_cache(maxsize=256, typed=True)
def _host(text: str) -> Address:
    """An ASGI host string as :func:`_normal` compares it; remembered (a pure function of the
    text, and a daemon sees the same loopback host or two: parsing one cost more than the
    socket lookup). Raises ``ValueError`` for a string that is not an address."""
    return _normal(ipaddress.ip_address(text))


def parse_endpoint(text: str, byteorder: str = sys.byteorder) -> Endpoint:
    """One ``/proc/net/tcp{,6}`` address column, e.g. ``0100007F:1F90`` -> (127.0.0.1, 8080).

    The address is the kernel's in-memory bytes printed as 32-bit words (so each word is
    byte-swapped on a little-endian host); the port is a plain hexadecimal number.

    Raises:
        ValueError: when ``text`` is not such a column.
    """
    host, _, port = text.partition(":")
    if len(host) not in (8, 32) or not port:
        raise ValueError(f"not a /proc/net/tcp address: {text!r}")
    raw = bytes.fromhex(host)
    if byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    addr: Address = ipaddress.IPv4Address(raw) if len(raw) == 4 else ipaddress.IPv6Address(raw)
    return _normal(addr), int(port, 16)


def socket_row(
    table: str, local: Endpoint, remote: Endpoint, byteorder: str = sys.byteorder
) -> tuple[int, int] | None:
    """The (inode, uid) of the socket whose addresses are ``local`` -> ``remote``.

    Args:
        table (str): the text of ``/proc/net/tcp`` or ``/proc/net/tcp6`` (header included).
        local (Endpoint): the socket's own address and port.
        remote (Endpoint): the address and port it is connected to.
        byteorder (str): the host's byte order (``sys.byteorder``).

    Returns:
        tuple[int, int] | None: the socket's inode and owner uid; None when no row matches
        or the matching row has no inode (a socket already closed, e.g. in TIME_WAIT).
    """
    want = ((_normal(local[0]), local[1]), (_normal(remote[0]), remote[1]))
    ports = (f":{local[1]:04X}", f":{remote[1]:04X}")  # a cheap filter before parsing
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or not (fields[1].endswith(ports[0]) and fields[2].endswith(ports[1])):
            continue
        try:
            here = (parse_endpoint(fields[1], byteorder), parse_endpoint(fields[2], byteorder))
            uid, inode = int(fields[7]), int(fields[9])
        except ValueError:
            continue
        if here == want and inode > 0:
            return inode, uid
    return None


def owners_of(inode: int, uid: int, proc: Path = Path("/proc"), skip: Iterable[int] = ()) -> list[Peer]:
    """Every process of user ``uid`` holding a descriptor on ``socket:[inode]``.

    A holder's start time is read once its descriptor was found, and the descriptor is read
    again afterwards: only when it still names the socket is the start time the holder's (its
    pid cannot have passed to another process in between). Processes whose descriptors
    cannot be read (another user, gone while being read) are passed over, as are the pids in
    ``skip``.
    """
    link = f"socket:[{inode}]"
    passed = set(skip)
    found: list[Peer] = []
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) in passed:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        fd = _holding(entry.path, link)
        if fd is None:
            continue
        ticks = procstat.start_time(int(entry.name), proc)
        if ticks is not None and _readlink(fd) == link:
            found.append(Peer(int(entry.name), ticks))
    return found


def _held_by(
    pid: int,
    inode: int,
    uid: int,
    proc: Path,
    living: Living | None = None,
    first: Iterable[str] = (),
    seen: dict[str, str] | None = None,
) -> tuple[Peer, str] | None:
    """``pid`` as a :class:`Peer` when it is of user ``uid`` and holds ``socket:[inode]``,
    with the path of the descriptor that holds it.

    ``living(pid)``, when given, names the process ``pid`` while a pidfd proves it running;
    asked *after* the descriptor was read, a process it names is the one that held it, and
    its start time need not be read. ``first``, ``seen``: see :func:`_holding`.
    """
    pid_dir = f"{proc}/{pid}"
    try:
        if os.stat(pid_dir).st_uid != uid:
            return None
    except OSError:
        return None
    link = f"socket:[{inode}]"
    fd = _holding(pid_dir, link, first, seen)
    if fd is None:
        return None
    known = living(pid) if living is not None else None
    if known is not None:
        return known, fd
    ticks = procstat.start_time(pid, proc)
    return (Peer(pid, ticks), fd) if ticks is not None and _readlink(fd) == link else None


def _holding(
    pid_dir: str, link: str, first: Iterable[str] = (), seen: dict[str, str] | None = None
) -> str | None:
    """The path of a descriptor of this process linking to ``link``, or None.

    The paths in ``first`` (descriptors that held this process's earlier connections: the
    kernel gives a new socket the lowest free number, often one a closed connection freed)
    are read before the directory is listed; each is believed only by its own link.
    ``seen``, when given, gathers every socket link the listing read (link -> descriptor path),
    so that a later lookup of another of this process's sockets can read that one first: a
    client that opened several connections at once has them all listed by the first lookup.
    """
    tried = set()
    for path in first:
        if _readlink(path) == link:
            return path
        tried.add(path)
    try:
        fds = os.scandir(os.path.join(pid_dir, "fd"))
    except OSError:
        return None
    found = None
    with fds:
        for fd in fds:
            if fd.path in tried:
                continue
            target = _readlink(fd.path)
            if target == link:
                found = fd.path
                if seen is None:
                    break
            elif seen is not None and target is not None and target.startswith("socket:["):
                seen[target] = fd.path
                if len(seen) > _SEEN_LINKS:
                    del seen[next(iter(seen))]
    return found


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def find_peer(
    client: tuple[str, int], server: tuple[str, int], proc: Path = Path("/proc")
) -> Peer | None:
    """The process at the client end of a TCP connection this process accepted.

    Args:
        client (tuple[str, int]): the connection's client host and port (ASGI ``client``).
        server (tuple[str, int]): this daemon's host and port (ASGI ``server``).
        proc (Path): where procfs is mounted.

    Returns:
        Peer | None: the one process holding the client's socket, with its start time; None
        when the socket is not in the table, no readable process holds it, or more than one
        process does (which of them is the session cannot be told).
    """
    placed = _place(client, server, proc)
    return placed[0] if placed is not None else None


def _place(
    client: tuple[str, int], server: tuple[str, int], proc: Path, *, include_self: bool = False
) -> tuple[Peer, int] | None:
    """(the peer, the client socket's inode), as :func:`find_peer` decides.

    ``include_self``: this process may be the peer (the inference gateway serves the root
    session's own calls); otherwise it is passed over.
    """
    try:
        local = (_host(client[0]), int(client[1]))
        remote = (_host(server[0]), int(server[1]))
    except (ValueError, TypeError, IndexError):
        return None
    row = _socket(local, remote, proc)
    if row is None:
        return None
    holders = owners_of(*row, proc=proc, skip=() if include_self else (os.getpid(),))
    return (holders[0], row[0]) if len(holders) == 1 else None


def _socket(local: Endpoint, remote: Endpoint, proc: Path) -> tuple[int, int] | None:
    """(inode, uid) of the socket ``local`` -> ``remote``: sock_diag, else the /proc tables.

    The kernel's answer to a ``NETLINK_SOCK_DIAG`` request is used when this host serves one
    and ``proc`` is the host's own procfs; otherwise (or in a test's fake procfs) the rows of
    ``/proc/net/tcp`` and ``tcp6`` are read.
    """
    if proc == _PROC:
        asked = sockdiag.lookup(local, remote)
        if asked != sockdiag.NOT_AVAILABLE:
            return asked if isinstance(asked, tuple) else None
    for name in ("tcp", "tcp6"):
        try:
            table = (proc / "net" / name).read_text()
        except OSError:
            continue
        row = socket_row(table, local, remote)
        if row is not None:
            return row
    return None


class PeerFinder:
    """:func:`find_peer` that remembers the connections it has placed.

    A client that registers several sessions over one keep-alive connection is placed once:
    a remembered connection is reused while its peer (same pid, same start time) still holds
    the same socket inode -- a TCP connection's addresses cannot name another connection while
    that socket is open -- which costs its start time and one ``readlink`` of the descriptor
    that held the socket, instead of a socket lookup and every process's descriptors. Safe to
    call from several threads.

    Args:
        proc (Path): where procfs is mounted.
        size (int): connections remembered (the oldest is forgotten first).
        include_self (bool): this process may be the peer (see :func:`_place`).
    """

    def __init__(
        self, proc: Path = Path("/proc"), size: int = 1024, *, include_self: bool = False
    ) -> None:
        self.proc = proc
        self.size = size
        self.include_self = include_self
        self._known: dict[tuple[tuple[str, int], tuple[str, int]], tuple[Peer, int]] = {}
        self._fds: dict[tuple[int, int], str] = {}  # (pid, inode) -> the descriptor that held it
        self._recent: dict[int, dict[str, None]] = {}  # pid -> its descriptors that held sockets
        self._seen: dict[int, dict[str, str]] = {}  # pid -> socket link -> descriptor, as last listed
        self._lock = threading.Lock()

    def __call__(
        self, client: tuple[str, int], server: tuple[str, int], hint: int | None = None
    ) -> Peer | None:
        """As :func:`find_peer`; ``hint`` is the pid the client named (see :func:`_place`)."""
        quick = self.quick(client, server, hint)
        if quick is not None:
            return quick
        placed = _place(client, server, self.proc, include_self=self.include_self)
        return self._remember(client, server, placed)

    def quick(
        self,
        client: tuple[str, int],
        server: tuple[str, int],
        hint: int | None = None,
        *,
        living: Living | None = None,
    ) -> Peer | None:
        """The peer when one process alone need be read: a remembered connection, or a hint.

        Costs one process's descriptors (about 0.1 ms), so it may run on the event loop;
        None means "not known this cheaply" and the caller asks :meth:`__call__` in a worker
        thread, which scans every process. ``living`` (pid -> the :class:`Peer` an open,
        unreadable pidfd proves running, or None; :meth:`murmur.roost.watch.ProcessWatch.living`)
        stands in for a start-time read, asked after the descriptor was read.
        """
        key = (client, server)
        with self._lock:
            known = self._known.get(key)
        if known is not None and self._still_holds(*known, living=living):
            return known[0]
        if hint is None or hint == os.getpid():
            return None
        try:
            local = (_host(client[0]), int(client[1]))
            remote = (_host(server[0]), int(server[1]))
        except (ValueError, TypeError, IndexError):
            return None
        row = _socket(local, remote, self.proc)
        if row is None:
            return None
        link = f"socket:[{row[0]}]"
        with self._lock:  # the longest unconfirmed first: a client reopening its connections
            first = list(itertools.islice(self._recent.get(hint, ()), _FIRST_TRIES))  # in turn
            seen = self._seen.pop(hint, None)
            listed = seen.pop(link, None) if seen is not None else None
        if listed is not None:  # listed by an earlier lookup of this process: read it first
            first.insert(0, listed)
        seen = {} if seen is None else seen
        held = _held_by(hint, *row, proc=self.proc, living=living, first=first, seen=seen)
        with self._lock:
            self._seen[hint] = seen  # the process looked up last, last
            while len(self._seen) > self.size:
                del self._seen[next(iter(self._seen))]
        if held is None:
            return self._remember(client, server, None)
        self._remember_fd(held[0], row[0], held[1])
        return self._remember(client, server, (held[0], row[0]))

    def _remember(
        self, client: tuple[str, int], server: tuple[str, int], placed: tuple[Peer, int] | None
    ) -> Peer | None:
        key = (client, server)
        with self._lock:
            if placed is None:
                self._known.pop(key, None)
                return None
            self._known[key] = placed
            while len(self._known) > self.size:
                del self._known[next(iter(self._known))]
        return placed[0]

    def _still_holds(self, peer: Peer, inode: int, *, living: Living | None = None) -> bool:
        """Whether ``peer`` (same pid, same start time) still holds ``socket:[inode]``.

        The descriptor found holding it last time is read first (one ``readlink``); only when
        it no longer names the socket are the process's other descriptors read. When
        ``living`` names ``peer`` after that read, the start time is not read (a pidfd proves
        the pid was not reused).
        """
        link = f"socket:[{inode}]"
        with self._lock:
            fd = self._fds.get((peer.pid, inode))
        if fd is not None and living is not None and _readlink(fd) == link and living(peer.pid) == peer:
            return True
        if procstat.start_time(peer.pid, self.proc) != peer.start_ticks:
            return False
        if fd is not None and _readlink(fd) == link:
            return True
        fd = _holding(str(self.proc / str(peer.pid)), link)
        if fd is None:
            return False
        self._remember_fd(peer, inode, fd)
        return True

    def _remember_fd(self, peer: Peer, inode: int, fd: str) -> None:
        with self._lock:
            self._fds[(peer.pid, inode)] = fd
            while len(self._fds) > self.size:
                del self._fds[next(iter(self._fds))]
            recent = self._recent.pop(peer.pid, {})
            self._recent[peer.pid] = recent  # the process seen last, last
            recent.pop(fd, None)
            recent[fd] = None  # the descriptor confirmed last, last
            while len(recent) > _RECENT_FDS:
                del recent[next(iter(recent))]
            while len(self._recent) > self.size:
                del self._recent[next(iter(self._recent))]
