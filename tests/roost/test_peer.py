"""Finding the process at the client end of a loopback connection (murmur.roost.peer)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from murmur import procstat
from murmur.roost.peer import (
    Peer,
    PeerFinder,
    find_peer,
    owners_of,
    parse_endpoint,
    socket_row,
)

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def row(n: int, local: str, remote: str, uid: int, inode: int, state: str = "01") -> str:
    """One /proc/net/tcp line."""
    return (f"{n:4d}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 "
            f"{uid:5d}        0 {inode} 1 0000000000000000 20 4 30 10 -1\n")


class TestParseEndpoint:
    @pytest.mark.parametrize(
        ("text", "order", "expected"),
        [
            ("0100007F:1F90", "little", (V4("127.0.0.1"), 8080)),
            ("7F000001:1F90", "big", (V4("127.0.0.1"), 8080)),
            ("00000000:0016", "little", (V4("0.0.0.0"), 22)),
            ("0100007F:E0A5", "little", (V4("127.0.0.1"), 57509)),
            ("00000000000000000000000001000000:1E14", "little", (V6("::1"), 7700)),
            ("00000000000000000000000000000001:1E14", "big", (V6("::1"), 7700)),
            # ::ffff:127.0.0.1 compares as 127.0.0.1
            ("0000000000000000FFFF00000100007F:1E14", "little", (V4("127.0.0.1"), 7700)),
        ],
    )
    def test_columns(self, text: str, order: str, expected: tuple[object, int]) -> None:
        """Address words are host-order 32-bit words; the port is plain hex."""
        assert parse_endpoint(text, order) == expected

    @pytest.mark.parametrize("text", ["", "0100007F", "0100:1F90", "zz00007F:1F90", "0100007F:"])
    def test_malformed(self, text: str) -> None:
        """Anything else is a ValueError (socket_row skips such rows)."""
        with pytest.raises(ValueError):
            parse_endpoint(text, "little")


class TestSocketRow:
    TABLE = (
        HEADER
        + row(0, "00000000:1E14", "00000000:0000", 0, 100, state="0A")  # the listener
        + row(1, "0100007F:1E14", "0100007F:E0A5", 0, 101)  # the daemon's side
        + row(2, "0100007F:E0A5", "0100007F:1E14", 1000, 102)  # the client's side
        + row(3, "0100007F:E0A6", "0100007F:1E14", 1000, 0, state="06")  # TIME_WAIT, no inode
        + "   4: garbage line\n"
    )
    CLIENT = (V4("127.0.0.1"), 57509)
    SERVER = (V4("127.0.0.1"), 7700)

    def test_the_client_side_row(self) -> None:
        """local = the client's address, remote = the daemon's: the client's socket and uid."""
        assert socket_row(self.TABLE, self.CLIENT, self.SERVER, "little") == (102, 1000)

    def test_the_daemon_side_is_the_reverse(self) -> None:
        """The same connection read the other way round is the daemon's own socket."""
        assert socket_row(self.TABLE, self.SERVER, self.CLIENT, "little") == (101, 0)

    def test_no_row_or_no_inode(self) -> None:
        """A port with no row, or a closed socket (inode 0), names nothing."""
        assert socket_row(self.TABLE, (V4("127.0.0.1"), 1), self.SERVER, "little") is None
        assert socket_row(self.TABLE, (V4("127.0.0.1"), 57510), self.SERVER, "little") is None
        assert socket_row(HEADER, self.CLIENT, self.SERVER, "little") is None

    def test_mapped_addresses_match(self) -> None:
        """A tcp6 row of an IPv4-mapped connection matches the IPv4 endpoints."""
        table = HEADER + row(0, "0000000000000000FFFF00000100007F:E0A5",
                             "0000000000000000FFFF00000100007F:1E14", 5, 7)
        assert socket_row(table, self.CLIENT, self.SERVER, "little") == (7, 5)


HOLDER = "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); print(s.getsockname()[1], flush=True); sys.stdin.read()"
HOLDERS = (  # opens argv[2] connections at once, then waits
    "import os, socket, sys; ss = [socket.create_connection(('127.0.0.1', int(sys.argv[1]))) "
    "for _ in range(int(sys.argv[2]))]; [os.open('/dev/null', os.O_RDONLY) for _ in range(40)]; "
    "print('up', flush=True); sys.stdin.read()"
)


class TestFindPeer:
    async def test_finds_the_connecting_process(self) -> None:
        """A real connection from a child process: the child, with its start time."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        proc = await trio.lowlevel.open_process([sys.executable, "-c", HOLDER, str(port)],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            with trio.fail_after(30):
                stream = await listeners[0].accept()
                client = stream.socket.getpeername()
                server = stream.socket.getsockname()
                peer = await trio.to_thread.run_sync(find_peer, client, server)
            assert peer == Peer(proc.pid, procstat.start_time(proc.pid) or -1)
            # the daemon's own side, read the other way round, is this process: never named
            assert await trio.to_thread.run_sync(find_peer, server, client) is None
            await stream.aclose()
        finally:
            with trio.CancelScope(shield=True), trio.fail_after(10):
                proc.kill()
                await proc.wait()
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.aclose()
                await proc.stdout.aclose()
                for listener in listeners:
                    await listener.aclose()

    async def test_the_finder_remembers_a_connection_while_it_is_held(self, tmp_path: Path) -> None:
        """PeerFinder: a second lookup of a held connection reads no socket table; a gone peer is not reused."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        proc = await trio.lowlevel.open_process([sys.executable, "-c", HOLDER, str(port)],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        finder = PeerFinder()
        try:
            with trio.fail_after(30):
                stream = await listeners[0].accept()
                client, server = stream.socket.getpeername(), stream.socket.getsockname()
                first = await trio.to_thread.run_sync(finder, client, server)
                assert first is not None and first.pid == proc.pid
                # a procfs without the socket tables: only the remembered peer can answer
                view = tmp_path / "proc"
                view.mkdir()
                (view / str(proc.pid)).symlink_to(f"/proc/{proc.pid}")
                finder.proc = view
                assert await trio.to_thread.run_sync(finder, client, server) == first
                proc.kill()
                await proc.wait()
                assert await trio.to_thread.run_sync(finder, client, server) is None
            await stream.aclose()
        finally:
            with trio.CancelScope(shield=True), trio.fail_after(10):
                proc.kill()
                await proc.wait()
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.aclose()
                await proc.stdout.aclose()
                for listener in listeners:
                    await listener.aclose()

    async def test_a_hint_is_believed_only_of_the_holder(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The client's pid hint spares the scan of every process, but only a holder passes.

        With the true holder as hint, no process but it is looked at (the full scan is made to
        fail). A hint naming a process that does not hold the socket (this test's parent) is
        not believed: the full scan still names the holder (negative control).
        """
        from murmur.roost import peer as peer_module

        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        proc = await trio.lowlevel.open_process([sys.executable, "-c", HOLDER, str(port)],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            with trio.fail_after(30):
                stream = await listeners[0].accept()
                client, server = stream.socket.getpeername(), stream.socket.getsockname()
                want = Peer(proc.pid, procstat.start_time(proc.pid) or -1)
                wrong = os.getppid()
                assert await trio.to_thread.run_sync(PeerFinder(), client, server, wrong) == want

                def no_scan(*args: object, **kwargs: object) -> list[Peer]:
                    raise AssertionError("every process was scanned")

                monkeypatch.setattr(peer_module, "owners_of", no_scan)
                assert await trio.to_thread.run_sync(PeerFinder(), client, server, proc.pid) == want
                with pytest.raises(AssertionError, match="scanned"):
                    await trio.to_thread.run_sync(PeerFinder(), client, server, wrong)
            await stream.aclose()
        finally:
            with trio.CancelScope(shield=True), trio.fail_after(10):
                proc.kill()
                await proc.wait()
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.aclose()
                await proc.stdout.aclose()
                for listener in listeners:
                    await listener.aclose()

    async def test_a_listed_socket_is_read_first_and_believed_only_by_its_link(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A client that opened several connections at once: the first hinted lookup lists its
        descriptors and notes every socket; each later one reads the noted descriptor alone
        (one readlink, no listing). A noted descriptor that names another socket is not
        believed: the listing is read and the true holder found (negative control)."""
        from murmur.roost import peer as peer_module

        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        proc = await trio.lowlevel.open_process([sys.executable, "-c", HOLDERS, str(port), "4"],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        streams = []
        try:
            with trio.fail_after(30):
                for _ in range(4):
                    streams.append(await listeners[0].accept())
                assert proc.stdout is not None
                assert (await proc.stdout.receive_some(16)).startswith(b"up")
            ends = [(s.socket.getpeername(), s.socket.getsockname()) for s in streams]
            want = Peer(proc.pid, procstat.start_time(proc.pid) or -1)
            reads: list[str] = []
            real_readlink = peer_module._readlink

            def counted(path: str) -> str | None:
                reads.append(path)
                return real_readlink(path)

            monkeypatch.setattr(peer_module, "_readlink", counted)
            finder = PeerFinder()
            assert finder.quick(*ends[0], proc.pid) == want
            assert len(reads) > 40  # the first lookup listed every descriptor
            for client, server in ends[1:3]:
                reads.clear()
                assert finder.quick(client, server, proc.pid) == want
                assert len(reads) == 2  # the noted descriptor, then its re-read after the start time
            # the last socket's note points at another socket's descriptor: not believed
            client, server = ends[3]
            seen = finder._seen[proc.pid]
            (link,) = [k for k in seen]
            seen[link] = finder._fds[(proc.pid, next(iter(i for (p, i) in finder._fds if p == proc.pid)))]
            reads.clear()
            assert finder.quick(client, server, proc.pid) == want
            assert len(reads) > 3
        finally:
            with trio.CancelScope(shield=True), trio.fail_after(10):
                proc.kill()
                await proc.wait()
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.aclose()
                await proc.stdout.aclose()
                for stream in streams:
                    await stream.aclose()
                for listener in listeners:
                    await listener.aclose()

    async def test_a_running_pidfd_stands_in_for_the_start_time(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``living`` naming the remembered peer spares the start-time read; naming nobody, or
        the pid with another start time (a reuse), does not: the start time is read again."""
        from murmur.roost import peer as peer_module

        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        proc = await trio.lowlevel.open_process([sys.executable, "-c", HOLDER, str(port)],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            with trio.fail_after(30):
                stream = await listeners[0].accept()
                client, server = stream.socket.getpeername(), stream.socket.getsockname()
                finder = PeerFinder()
                want = finder.quick(client, server, proc.pid)
                assert want == Peer(proc.pid, procstat.start_time(proc.pid) or -1)
            reads: list[int] = []
            real_start_time = procstat.start_time

            def counted(pid: int, proc_dir: Path = procstat.PROC) -> int | None:
                reads.append(pid)
                return real_start_time(pid, proc_dir)

            monkeypatch.setattr(peer_module.procstat, "start_time", counted)
            reused = attrs.evolve(want, start_ticks=want.start_ticks + 1)
            for living, read in ((lambda pid: want, False), (lambda pid: None, True), (lambda pid: reused, True)):
                reads.clear()
                assert finder.quick(client, server, proc.pid, living=living) == want
                assert bool(reads) is read
            await stream.aclose()
        finally:
            with trio.CancelScope(shield=True), trio.fail_after(10):
                proc.kill()
                await proc.wait()
                assert proc.stdin is not None and proc.stdout is not None
                await proc.stdin.aclose()
                await proc.stdout.aclose()
                for listener in listeners:
                    await listener.aclose()

    async def test_a_connection_of_this_process_is_not_named(self) -> None:
        """Both ends in the daemon's own process (the in-process test client): None."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with await trio.open_tcp_stream("127.0.0.1", port) as mine:
            stream = await listeners[0].accept()
            assert await trio.to_thread.run_sync(
                find_peer, stream.socket.getpeername(), stream.socket.getsockname()) is None
            assert mine.socket.getsockname() == stream.socket.getpeername()
            await stream.aclose()
        for listener in listeners:
            await listener.aclose()

    def test_unplaceable_endpoints(self) -> None:
        """Not an address, or no such connection: None rather than an error."""
        assert find_peer(("localhost", 1), ("127.0.0.1", 2)) is None
        assert find_peer(("127.0.0.1", 1), ("127.0.0.1", 2)) is None

    def test_every_holder_is_named(self) -> None:
        """A socket inherited across a fork has two holders, each named with its start time
        (find_peer names a peer only when there is exactly one); other users' are not read."""
        import socket as socketlib

        a, b = socketlib.socketpair()
        inode = os.fstat(a.fileno()).st_ino
        a.set_inheritable(True)
        holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                  stdin=subprocess.PIPE, close_fds=False)
        try:
            found = owners_of(inode, os.getuid())
            assert {p.pid for p in found} >= {os.getpid(), holder.pid}
            assert owners_of(inode, os.getuid(), skip=[os.getpid()]) == [
                Peer(holder.pid, procstat.start_time(holder.pid) or -1)]
            assert owners_of(inode, os.getuid() + 1) == []  # only the socket owner's processes
        finally:
            holder.kill()
            holder.wait()
            assert holder.stdin is not None
            holder.stdin.close()
            a.close()
            b.close()
