"""The sock_diag lookup of one TCP socket (murmur.roost.sockdiag; spec/roost.md)."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from murmur.roost import peer, sockdiag


def _ends(sock: socket.socket) -> tuple[sockdiag.Endpoint, sockdiag.Endpoint]:
    local, remote = sock.getsockname(), sock.getpeername()
    return (
        (ipaddress.ip_address(local[0]), local[1]),
        (ipaddress.ip_address(remote[0]), remote[1]),
    )


@contextmanager
def _connection(family: int = socket.AF_INET, host: str = "127.0.0.1") -> Iterator[socket.socket]:
    with socket.socket(family) as listener:
        listener.bind(("::" if family == socket.AF_INET6 else host, 0))
        listener.listen()
        with socket.create_connection((host, listener.getsockname()[1])) as client:
            accepted, _ = listener.accept()
            with accepted:
                yield client


def _inode(sock: socket.socket) -> int:
    return os.stat(f"/proc/self/fd/{sock.fileno()}").st_ino


class TestCodec:
    def test_the_request_names_the_four_addresses(self) -> None:
        local = (ipaddress.IPv4Address("127.0.0.1"), 40000)
        remote = (ipaddress.IPv4Address("127.0.0.2"), 7700)
        data = sockdiag.encode_request(local, remote, socket.AF_INET, seq=9)
        length, kind, flags, seq, _ = struct.unpack_from("=IHHII", data)
        assert (length, kind, flags, seq) == (len(data), 20, 1, 9)
        family, proto = struct.unpack_from("=BB", data, 16)
        assert (family, proto) == (socket.AF_INET, socket.IPPROTO_TCP)
        sport, dport = struct.unpack_from("!HH", data, 24)
        assert (sport, dport) == (40000, 7700)
        assert data[28:32] == bytes([127, 0, 0, 1]) and data[44:48] == bytes([127, 0, 0, 2])

    def test_an_ipv4_address_asked_of_the_ipv6_table_is_mapped(self) -> None:
        local = (ipaddress.IPv4Address("127.0.0.1"), 1)
        data = sockdiag.encode_request(local, local, socket.AF_INET6)
        assert data[28:44] == ipaddress.IPv6Address("::ffff:127.0.0.1").packed

    @pytest.mark.parametrize(
        "data",
        [
            b"",
            b"\x00" * 8,
            struct.pack("=IHHII", 36, 2, 0, 1, 0) + struct.pack("=i", -2) + b"\0" * 16,  # ENOENT
            struct.pack("=IHHII", 20, 3, 0, 1, 0) + b"\0\0\0\0",  # DONE
            struct.pack("=IHHII", 99, 20, 0, 1, 0),  # truncated
        ],
    )
    def test_what_names_no_socket(self, data: bytes) -> None:
        assert sockdiag.decode_answer(data) is None

    def test_the_answer_gives_inode_and_uid(self) -> None:
        body = b"\x02\x01\0\0" + b"\0" * 48 + struct.pack("=IIIII", 0, 0, 0, 1000, 4242)
        data = struct.pack("=IHHII", 16 + len(body), 20, 2, 1, 0) + body
        assert sockdiag.decode_answer(data) == (4242, 1000)
        closed = body[:-4] + struct.pack("=I", 0)
        assert sockdiag.decode_answer(struct.pack("=IHHII", 16 + len(closed), 20, 2, 1, 0) + closed) is None


class TestKernel:
    def test_a_connection_is_found_by_its_addresses(self) -> None:
        with _connection() as client:
            local, remote = _ends(client)
            assert sockdiag.lookup(local, remote) == (_inode(client), os.geteuid())
            # Negative control: the reversed pair is the accepted socket, another inode.
            reverse = sockdiag.lookup(remote, local)
            assert isinstance(reverse, tuple) and reverse[0] != _inode(client)

    def test_a_dual_stack_connection_is_found_in_the_ipv6_table(self) -> None:
        with _connection(socket.AF_INET6) as client:
            local, remote = _ends(client)
            assert sockdiag.lookup(local, remote) == (_inode(client), os.geteuid())

    def test_a_closed_connection_is_not_found(self) -> None:
        with _connection() as client:
            local, remote = _ends(client)
        assert sockdiag.lookup(local, remote) is None  # gone, or a TIME_WAIT entry with no inode

    def test_it_agrees_with_the_proc_table(self) -> None:
        with _connection() as client:
            local, remote = _ends(client)
            table = Path("/proc/net/tcp").read_text()
            assert peer.socket_row(table, local, remote) == sockdiag.lookup(local, remote)

    def test_a_host_without_netlink_falls_back_to_the_tables(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sockdiag, "lookup", lambda *a: sockdiag.NOT_AVAILABLE)
        with _connection() as client:
            local, remote = _ends(client)
            assert peer._socket(local, remote, Path("/proc")) == (_inode(client), os.geteuid())
