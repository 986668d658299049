"""The gateway's upstream side: keep-alive HTTP/1.1 connections per origin, over Trio.

Specification: ``spec/gateway.md`` "Serving and forwarding". :class:`Pool` sends one request
(head and body in one write) on an idle connection to the origin, or a new one, and hands back
the reply's status, headers and body chunks as they arrive (:class:`Reply`). A connection whose
reply ended cleanly and may be kept goes back to the pool (at most ``max_idle`` per origin, each
for ``idle_expiry`` seconds; one the server has closed meanwhile is found by a non-blocking
peek and dropped); any other is closed forcefully, a cancellation included.

The transport is injectable: a :class:`Connector` opens a byte stream to ``(scheme, host,
port)`` (default :func:`tcp_connect`: TCP, and TLS with :func:`ssl.create_default_context` for
``https``); a test hands in one that returns one end of an in-memory stream pair.

Errors: :class:`UpstreamError` when the origin cannot be reached, or closes or breaks the
protocol before the reply's head (its ``reason`` names the kind, never a key). A failure after
the head propagates from iterating the reply, as ``UpstreamError`` too.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol

import attrs
import trio

from murmur.gateway.http1 import BadMessage, Framing, Reader, Truncated, response_framing
from murmur.gateway.sockets import FastStream, connect_tcp, send_within

__all__ = ["Connector", "Pool", "Reply", "UpstreamError", "tcp_connect"]

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection (TLS handshake included), or to wait for a free one."""
WRITE_TIMEOUT = 30.0
"""Seconds one request may take to be written."""
READ_TIMEOUT = 600.0
"""Seconds the upstream may stay silent while a reply is awaited or streams."""
_MAX_HEAD = 256 * 1024


class Connector(Protocol):
    """Opens a byte stream to an origin: ``await connect(scheme, host, port)``."""

    def __call__(self, scheme: str, host: str, port: int) -> Awaitable[trio.abc.Stream]: ...


class UpstreamError(Exception):
    """The upstream could not be reached or answered badly; ``reason`` is the kind (a class name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    global _tls
    if _tls is None:
        context = ssl.create_default_context()
        context.set_alpn_protocols(["http/1.1"])
        _tls = context
    return _tls


async def tcp_connect(scheme: str, host: str, port: int) -> trio.abc.Stream:
    """A TCP stream to ``host:port`` (Nagle off), wrapped in TLS for ``https``."""
    if scheme != "https":
        return await connect_tcp(host, port)
    stream = await trio.open_tcp_stream(host, port)
    tls = trio.SSLStream(stream, _tls_context(), server_hostname=host, https_compatible=True)
    try:
        await tls.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return tls


def _raw_socket(stream: trio.abc.Stream) -> socket.socket | trio.socket.SocketType | None:
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if isinstance(stream, (FastStream, trio.SocketStream)):
        return stream.socket
    return None


@attrs.define(eq=False)
class _Conn:
    stream: trio.abc.Stream
    reader: Reader
    idle_since: float = 0.0
    reusable: bool = True

    def looks_alive(self) -> bool:
        """Whether the server has not closed it (a non-blocking poll; True if it cannot poll)."""
        sock = _raw_socket(self.stream)
        if sock is None:
            return True
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        if not poll.poll(0):
            return True  # nothing to read: open and quiet, as an idle connection is
        if not isinstance(self.stream, trio.SSLStream):
            return False  # EOF, or bytes no request asked for: either way not reusable
        # on TLS the bytes may be a session ticket: only an EOF says it is closed
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as peek:
            try:
                return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
            except BlockingIOError:
                return True
            except OSError:
                return False


_LINK = (
    OSError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    BadMessage,
    Truncated,
)


@attrs.define(eq=False)
class Reply:
    """One upstream reply: ``status``, ``headers`` (lower-case names, as sent), ``length``
    (its content-length, or None), and its body chunks by ``async for``."""

    status: int
    headers: list[tuple[bytes, bytes]]
    length: int | None
    _conn: _Conn
    _framing: Framing
    complete: bool = False
    before_wait: Callable[[], Awaitable[None]] | None = None
    """Awaited before the reply waits for more bytes (the gateway sends what it holds)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reader = self._conn.reader
        try:
            async for chunk in reader.body(self._framing, timeout=READ_TIMEOUT, hold=self._hold):
                yield chunk
        except _LINK as exc:
            raise UpstreamError(type(exc).__name__) from exc
        self.complete = True
        if self._framing.length is None and not self._framing.chunked and not self._framing.none:
            self._conn.reusable = False  # ended by the close

    async def _hold(self) -> None:
        if self.before_wait is not None:
            await self.before_wait()


class Pool:
    """Keep-alive upstream connections, per origin.

    Args:
        connect (Connector): opens a stream to an origin (default :func:`tcp_connect`).
        max_connections (int): connections in use at once, all origins together (a request
            waits up to :data:`CONNECT_TIMEOUT` seconds for one, then fails ``PoolTimeout``).
        max_idle (int): idle connections kept per origin.
        idle_expiry (float): seconds an idle connection is kept.
    """

    def __init__(
        self,
        connect: Connector | None = None,
        *,
        max_connections: int = 256,
        max_idle: int = 128,
        idle_expiry: float = 15.0,
    ) -> None:
        self._connect: Connector = connect if connect is not None else tcp_connect
        self._slots = trio.Semaphore(max_connections)
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self.max_idle = max_idle
        self.idle_expiry = idle_expiry
        self._closed = False

    async def _take(self, key: tuple[str, str, int]) -> _Conn:
        idle = self._idle.get(key)
        now = trio.current_time()
        while idle:
            conn = idle.pop()  # the most recently used first: the likeliest still open
            if now - conn.idle_since < self.idle_expiry and conn.looks_alive():
                return conn
            await trio.aclose_forcefully(conn.stream)
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                stream = await self._connect(*key)
        except (OSError, ssl.SSLError, trio.BrokenResourceError, trio.TooSlowError) as exc:
            raise UpstreamError(
                "ConnectTimeout" if isinstance(exc, trio.TooSlowError) else "ConnectError"
            ) from exc
        return _Conn(stream, Reader(stream))

    def _give_back(self, key: tuple[str, str, int], conn: _Conn) -> bool:
        if self._closed or not conn.reusable or conn.reader.buf:
            return False
        idle = self._idle.setdefault(key, [])
        if len(idle) >= self.max_idle:
            return False
        conn.idle_since = trio.current_time()
        idle.append(conn)
        return True

    @asynccontextmanager
    async def request(
        self,
        scheme: str,
        host: str,
        port: int,
        method: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> AsyncIterator[Reply]:
        """Send one request; yields its :class:`Reply` once the reply's head has arrived.

        ``headers`` are sent as given, with ``host`` and ``content-length`` added (the caller
        leaves both out). On leaving, a reply read to its end on a connection that may be kept
        returns it to the pool; anything else closes it.

        Raises:
            UpstreamError: the origin could not be reached, or failed before the reply's head.
        """
        key = (scheme, host, port)
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            try:
                with trio.fail_after(CONNECT_TIMEOUT):
                    await self._slots.acquire()
            except trio.TooSlowError as exc:
                raise UpstreamError("PoolTimeout") from exc
        conn: _Conn | None = None
        kept = False
        try:
            conn = await self._take(key)
            reply = await self._send(conn, host, port, scheme, method, target, headers, body)
            yield reply
            kept = reply.complete and self._give_back(key, conn)
        finally:
            self._slots.release()
            if conn is not None and not kept:
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(conn.stream)

    async def _send(
        self,
        conn: _Conn,
        host: str,
        port: int,
        scheme: str,
        method: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> Reply:
        authority = host if port == (443 if scheme == "https" else 80) else f"{host}:{port}"
        if ":" in host:
            authority = f"[{host}]" + (f":{port}" if authority != host else "")
        lines = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method, target, authority.encode("ascii"))]
        lines += [b"%s: %s\r\n" % (name, value) for name, value in headers]
        lines.append(b"content-length: %d\r\n\r\n" % len(body))
        lines.append(body)
        try:
            await send_within(conn.stream, b"".join(lines), WRITE_TIMEOUT)
            while True:
                head = await conn.reader.head(request=False, max_head=_MAX_HEAD, timeout=READ_TIMEOUT)
                if head is None:
                    raise UpstreamError("RemoteProtocolError")  # closed before any reply
                status = int(head.second)
                if status >= 200 or status == 101:
                    break  # a 1xx but 101: the final reply follows
            framing = response_framing(head, method=method)
        except _LINK as exc:
            raise UpstreamError(type(exc).__name__) from exc
        if head.first == b"HTTP/1.0" or any(
            k == b"connection" and b"close" in v.lower() for k, v in head.headers
        ):
            conn.reusable = False
        return Reply(status, head.headers, framing.length, conn, framing)

    async def aclose(self) -> None:
        """Close every idle connection; connections in use close when their reply ends."""
        self._closed = True
        idle, self._idle = self._idle, {}
        with trio.CancelScope(shield=True):
            for conns in idle.values():
                for conn in conns:
                    await trio.aclose_forcefully(conn.stream)

