"""One TCP socket's inode and owner uid, asked of the kernel by its exact addresses (Linux).

Specification: ``spec/roost.md``, "When a session's process ends". mur-roost places the
process at the client end of a registration's connection; the first step is the client
socket's inode and uid. Reading ``/proc/net/tcp{,6}`` walks every TCP socket on the host (most
of the ~15 ms a registration used to cost); a ``NETLINK_SOCK_DIAG`` request naming the
connection's four addresses makes the kernel look the one socket up by its hash
(``inet_diag_dump_one_icsk``) and answer one ``inet_diag_msg``.

The request and answer codecs are pure (:func:`encode_request`, :func:`decode_answer`,
table-tested); :func:`lookup` does the one round trip. Nothing here raises for a connection it
cannot place: it answers None (no such socket, no netlink on this host, an answer it cannot
read), and the caller falls back to ``/proc/net/tcp``.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct

__all__ = ["NOT_AVAILABLE", "decode_answer", "encode_request", "lookup"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Endpoint = tuple[Address, int]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid:
# sport, dport (big-endian), src[16], dst[16], if, cookie[2]
_REQUEST = struct.Struct("=BBBBI")
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_TAIL = struct.Struct("=III")
# inet_diag_msg: family, state, timer, retrans, sockid (48 bytes), expires, rqueue, wqueue,
# uid, inode
_MSG_HEAD = struct.Struct("=BBBB")
_MSG_TAIL = struct.Struct("=IIIII")
_SOCKID_SIZE = _SOCKID.size + _SOCKID_TAIL.size

_UNSERVED = frozenset({errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EACCES})

NOT_AVAILABLE = "not-available"
"""What :func:`lookup` returns when this host answers no ``NETLINK_SOCK_DIAG`` request."""


def _packed(addr: Address, family: int) -> bytes:
    """An address as the 16 bytes of ``inet_diag_sockid.idiag_src``/``dst``."""
    if family == socket.AF_INET:
        return addr.packed.ljust(16, b"\0")
    if isinstance(addr, ipaddress.IPv4Address):
        addr = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + addr.packed)
    return addr.packed


def encode_request(local: Endpoint, remote: Endpoint, family: int, seq: int = 1) -> bytes:
    """The ``SOCK_DIAG_BY_FAMILY`` request for the TCP socket ``local`` -> ``remote``.

    Args:
        local (Endpoint): the socket's own (address, port).
        remote (Endpoint): the (address, port) it is connected to.
        family (int): ``socket.AF_INET`` or ``socket.AF_INET6`` (an IPv4 address asked of
            the IPv6 table is written IPv4-mapped, as the kernel keeps a dual-stack socket).
        seq (int): the netlink sequence number.

    Returns:
        bytes: one netlink message (header included).
    """
    body = (
        _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES)
        + _SOCKID.pack(local[1], remote[1], _packed(local[0], family), _packed(remote[0], family))
        + _SOCKID_TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
    )
    return _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0) + body


def decode_answer(data: bytes) -> tuple[int, int] | None:
    """(inode, uid) from the kernel's answer to :func:`encode_request`, or None.

    None when the answer is an error (``ENOENT``: no such socket), empty, truncated, or names a
    socket with no inode (one already closed).
    """
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _flags, _seq, _pid = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            return None
        body = offset + _HEADER.size
        if kind == _SOCK_DIAG_BY_FAMILY:
            need = _MSG_HEAD.size + _SOCKID_SIZE + _MSG_TAIL.size
            if length - _HEADER.size < need:
                return None
            *_, uid, inode = _MSG_TAIL.unpack_from(data, body + _MSG_HEAD.size + _SOCKID_SIZE)
            return (inode, uid) if inode > 0 else None
        if kind in (_NLMSG_ERROR, _NLMSG_DONE):
            return None
        offset += (length + 3) & ~3
    return None


def lookup(local: Endpoint, remote: Endpoint) -> tuple[int, int] | str | None:
    """Ask the kernel for the TCP socket ``local`` -> ``remote``: (inode, uid).

    Both families are asked when ``local`` is IPv4 (a dual-stack listener's connection may be
    kept in the IPv6 table, IPv4-mapped).

    Returns:
        tuple[int, int] | None | str: (inode, owner uid); None when no such socket exists;
        :data:`NOT_AVAILABLE` when this host answers no sock_diag request (no netlink, a
        seccomp filter, a kernel without ``inet_diag``).
    """
    families = [socket.AF_INET6] if isinstance(local[0], ipaddress.IPv6Address) else [
        socket.AF_INET,
        socket.AF_INET6,
    ]
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG)
    except OSError:
        return NOT_AVAILABLE
    with sock:
        for seq, family in enumerate(families, start=1):
            try:
                sock.send(encode_request(local, remote, family, seq))
                data = sock.recv(65536)
            except OSError as exc:
                if exc.errno in (errno.EINTR, errno.EAGAIN):
                    continue
                return NOT_AVAILABLE
            if _unsupported(data):
                return NOT_AVAILABLE
            found = decode_answer(data)
            if found is not None:
                return found
    return None


def _unsupported(data: bytes) -> bool:
    """Whether the answer is a netlink error saying this request kind is not served here."""
    if len(data) < _HEADER.size + 4:
        return False
    _length, kind, *_ = _HEADER.unpack_from(data, 0)
    if kind != _NLMSG_ERROR:
        return False
    (code,) = struct.unpack_from("=i", data, _HEADER.size)
    return -code in _UNSERVED
