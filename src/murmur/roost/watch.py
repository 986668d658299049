"""Watching the process of each registered session, so a SIGKILLed one gives its slots back.

Specification: ``spec/roost.md``, "When a session's process ends". At ``POST /register`` the daemon finds the process at the client end of the request's
connection (:class:`murmur.roost.peer.PeerFinder`), opens a pidfd on it and waits, in a task of
its own, for the pidfd to become readable (the process has ended). Then the session's
``on_end`` callback runs -- the app's, which asks the ledger to retire the session as
``failed`` (:meth:`murmur.roost.ledger.Ledger.process_ended`). A session that deregisters
first is forgotten (:meth:`ProcessWatch.forget`), its pidfd closed.

Where the process cannot be found (not on this host's loopback, another user's, more than
one holder, no pidfd support), nothing is watched: the session stays ``running`` until it deregisters.

Sessions registered by one process share its watch: one pidfd and one task per process, however
many of its sessions are registered (a keep-alive client registering child after child opens
no new pidfd). While that pidfd is open and not readable the process is known to be running,
so :class:`~murmur.roost.peer.PeerFinder` may take a descriptor it reads as proof that this very
process holds the socket, without reading its start time again (the descriptor is read first,
the pidfd polled after it: a process still running after the read was the one read).

Every watcher task lives in the nursery :meth:`ProcessWatch.run` holds; cancelling that task
ends them all and closes every pidfd.
"""

from __future__ import annotations

import os
import select
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from murmur import procstat
from murmur.roost.peer import Peer, PeerFinder

__all__ = ["LOOKUP_BOUND", "ProcessWatch", "open_pidfd"]

LOOKUP_BOUND = 2.0  # seconds the /proc lookup of one registration may take before it is given up

Finder = Callable[[tuple[str, int], tuple[str, int], int | None], Peer | None]
OnEnd = Callable[[Peer], None]


class _Ended(Exception):
    """The peer has already ended (its pid is gone or belongs to another process now)."""


def open_pidfd(peer: Peer, proc: Path = Path("/proc")) -> int:
    """A pidfd on ``peer``'s process, verified to be that process and not a reuse of its pid.

    The pidfd pins the pid (it cannot be reused while the pidfd is open), so reading the
    start time after opening it proves which process the pidfd refers to.

    Returns:
        int: the pidfd (close it with ``os.close``).

    Raises:
        _Ended: the process has already ended.
        OSError: the host has no pidfds (``ENOSYS``) or refuses one.
    """
    try:
        fd = os.pidfd_open(peer.pid)
    except ProcessLookupError:
        raise _Ended from None
    if procstat.start_time(peer.pid, proc) != peer.start_ticks:
        os.close(fd)
        raise _Ended
    return fd


def _endpoint(value: object) -> tuple[str, int] | None:
    """An ASGI ``client``/``server`` value as (host, port), or None."""
    if isinstance(value, Sequence) and len(value) == 2:
        host, port = value[0], value[1]
        if isinstance(host, str) and isinstance(port, int):
            return host, port
    return None


def _running(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` has not ended (its pidfd is not readable yet)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return not poller.poll(0)


@attrs.define(eq=False)
class _Watched:
    """One process's watch: its pidfd (None when it had ended before one was opened), the
    cancel scope of its task, and the sessions it registered (session id -> ``on_end``)."""

    peer: Peer
    pidfd: int | None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    sessions: dict[str, OnEnd] = attrs.field(factory=dict)


class ProcessWatch:
    """One task per watched process, waiting on its pidfd; its sessions end together.

    Args:
        find (Finder | None): ``find(client, server, hint)`` -> the peer process or None, run in a
            worker thread (default: a :class:`murmur.roost.peer.PeerFinder`).
        lookup_bound (float): seconds one lookup may take; past it, the session is not watched.

    Use: ``await nursery.start(watch.run)``; then :meth:`watch` at each registration and
    :meth:`forget` at each deregistration.
    """

    def __init__(self, find: Finder | None = None, *, lookup_bound: float = LOOKUP_BOUND) -> None:
        self._find = find if find is not None else PeerFinder()
        self.lookup_bound = lookup_bound
        self._nursery: trio.Nursery | None = None
        self._sessions: dict[str, _Watched] = {}
        self._by_pid: dict[int, _Watched] = {}  # the processes known running, by pid

    @property
    def watched(self) -> int:
        """Sessions whose process is being watched now."""
        return len(self._sessions)

    @property
    def processes(self) -> int:
        """Processes with an open pidfd now (one per process, whatever its sessions)."""
        return len(self._by_pid)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold every watcher task until cancelled (which closes every pidfd)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._sessions.clear()
            self._by_pid.clear()

    def living(self, pid: int) -> Peer | None:
        """The watched process ``pid`` while its pidfd says it is still running, else None.

        A pidfd names one process (checked against its start time when opened), so a process
        found running through it is that :class:`Peer`, and ``pid`` has not been reused.
        """
        held = self._by_pid.get(pid)
        if held is None or held.pidfd is None or not _running(held.pidfd):
            return None
        return held.peer

    async def watch(
        self,
        session_id: str,
        client: object,
        server: object,
        on_end: OnEnd,
        *,
        hint: int | None = None,
        tried_quickly: bool = False,
    ) -> Peer | None:
        """Find the process at ``client`` and call ``on_end(peer)`` once it has ended.

        Args:
            session_id (str): the session just registered (the key :meth:`forget` takes).
            client (object): the request's ASGI ``client`` value, ``(host, port)``.
            server (object): the request's ASGI ``server`` value, ``(host, port)``.
            on_end (OnEnd): called once, from the watcher task, when the process has ended
                (at once when it already has). Never called after :meth:`forget`.
            hint (int | None): the pid the registrant's client says it is; looked at first,
                and believed only when that process holds the connection's socket.
            tried_quickly (bool): the caller has just had ``(False, None)`` from
                :meth:`watch_quickly` for this registration; go straight to the scan.

        Returns:
            Peer | None: the process being watched, or None when it cannot be found (or this
            watch is not running); then nothing is watched.
        """
        if not tried_quickly:
            done, peer = self.watch_quickly(session_id, client, server, on_end, hint=hint)
            if done:
                return peer
        peer_at, here = _endpoint(client), _endpoint(server)
        if self._nursery is None or peer_at is None or here is None:
            return None
        with trio.move_on_after(self.lookup_bound):
            peer = await trio.to_thread.run_sync(self._find, peer_at, here, hint, abandon_on_cancel=True)
        return self._attach(session_id, peer, on_end) if peer is not None else None

    def watch_quickly(
        self, session_id: str, client: object, server: object, on_end: OnEnd, *, hint: int | None = None
    ) -> tuple[bool, Peer | None]:
        """:meth:`watch` as far as it goes without a worker thread (no ``await``).

        Returns:
            tuple[bool, Peer | None]: ``(True, peer or None)`` when decided -- the peer found
            by a remembered connection or the hint and now watched, or nothing to watch (this
            watch is not running, the addresses are not TCP); ``(False, None)`` when only the
            scan of every process can tell, which :meth:`watch` runs in a thread.
        """
        peer_at, here = _endpoint(client), _endpoint(server)
        if self._nursery is None or peer_at is None or here is None:
            return True, None
        if not isinstance(self._find, PeerFinder):
            return False, None
        peer = self._find.quick(peer_at, here, hint, living=self.living)
        if peer is None:
            return False, None
        return True, self._attach(session_id, peer, on_end)

    def _attach(self, session_id: str, peer: Peer, on_end: OnEnd) -> Peer | None:
        """Watch ``peer`` for ``session_id``: join its process's pidfd, or open one."""
        nursery = self._nursery
        if nursery is None:
            return None
        self.forget(session_id)
        held = self._by_pid.get(peer.pid)
        if held is None or held.peer != peer or self.living(peer.pid) is None:
            try:
                pidfd: int | None = open_pidfd(peer)
            except _Ended:
                pidfd = None
            except OSError:
                return None
            held = _Watched(peer, pidfd)
            if pidfd is not None:
                self._by_pid[peer.pid] = held
            nursery.start_soon(self._wait, held)
        held.sessions[session_id] = on_end
        self._sessions[session_id] = held
        return peer

    def forget(self, session_id: str) -> None:
        """Stop watching ``session_id`` (it deregistered); its ``on_end`` will not run.

        The last session of a process forgotten closes that process's pidfd.
        """
        held = self._sessions.pop(session_id, None)
        if held is None:
            return
        held.sessions.pop(session_id, None)
        if not held.sessions:
            self._retire(held)
            held.scope.cancel()

    def _retire(self, held: _Watched) -> None:
        """No new session joins ``held`` (its process ended, or it has no session left)."""
        if self._by_pid.get(held.peer.pid) is held:
            del self._by_pid[held.peer.pid]

    async def _wait(self, held: _Watched) -> None:
        try:
            with held.scope:
                if held.pidfd is not None:
                    await trio.lowlevel.wait_readable(held.pidfd)
        finally:
            self._retire(held)
            if held.pidfd is not None:
                os.close(held.pidfd)
        if held.scope.cancel_called:
            return
        ended, held.sessions = held.sessions, {}
        for session_id, on_end in ended.items():
            if self._sessions.get(session_id) is held:
                del self._sessions[session_id]
            on_end(held.peer)
