"""The gateway's serving side: a lean HTTP/1.1 server loop per connection, over Trio.

Specification: ``spec/gateway.md`` "Serving and forwarding". :func:`serve_listener` accepts
connections (at most :data:`MAX_CONNECTIONS` at once; the rest wait in the backlog) as
:class:`~murmur.gateway.sockets.FastStream` and runs :func:`serve_connection` for each:
:mod:`murmur.gateway.http1` reads one request (head at most :data:`MAX_HEAD` bytes, body at most :data:`MAX_BODY`), the
handler gets it as an :class:`Exchange`, and, when the answer has ended and both sides may keep
the connection, the next request is awaited (at most :data:`IDLE_TIMEOUT` seconds).

The handler answers through :class:`Responder` (``start`` / ``body`` / ``end``, ``flush``):
the status and headers it gives, and each body chunk as it is given (a ``content-length`` it
names frames the body; without one, an HTTP/1.1 client gets it chunked, an HTTP/1.0 one until
the close). A send the client takes no bytes of for :data:`SEND_BOUND` seconds closes the
connection (a client that stopped reading).

Bad input never reaches the handler and never shows a traceback: a head too large is
answered 431, a body too large 413, a transfer coding other than chunked 501, anything else
malformed 400, each with a coded JSON body
(``E-GWY-007``), and the connection is closed. A handler that fails before answering gets 500.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import attrs
import trio

from murmur.gateway.http1 import BadMessage, Reader, Truncated, request_framing
from murmur.gateway.refusal import Refusal, body_for
from murmur.gateway.sockets import FastStream, accept, send_within

__all__ = [
    "IDLE_TIMEOUT",
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "MAX_HEAD",
    "SEND_BOUND",
    "Connection",
    "Exchange",
    "Responder",
    "serve_connection",
    "serve_listener",
]

MAX_HEAD = 64 * 1024
"""Bytes a request's line and headers may take (more: 431)."""
MAX_BODY = 64 * 1024 * 1024
"""Bytes a request's body may take (more: 413)."""
IDLE_TIMEOUT = 30.0
"""Seconds a kept-alive connection may wait for its next request (and a request for its head)."""
READ_TIMEOUT = 60.0
"""Seconds a request's body may pause."""
SEND_BOUND = 5.0
"""Seconds one send to a client may take before the client is taken to have stopped reading."""
MAX_CONNECTIONS = 1024
"""Client connections served at once."""
_READ = 65536
_ACCEPT_RETRY = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})

_log = logging.getLogger("murmur.gateway")


class _ClientGone(Exception):
    """The client closed, broke, or stopped reading: the connection ends."""


@attrs.define(eq=False)
class Connection:
    """One client connection: its addresses, and what the handler learns of it once.

    ``client``/``server``: (host, port) of each end. ``placed``: the handler's own note about
    the connection (the gateway keeps the peer's ancestry here), None until it sets one.
    """

    client: tuple[str, int] | None
    server: tuple[str, int] | None
    placed: object = None


class Responder:
    """The answer to one request, written as it is given (framed here).

    The head is held until the first body bytes, or until :meth:`flush` (called before the
    handler waits for more), so a head and the bytes already at hand leave in one write.
    Framing: the handler's ``content-length``, if it names one; else chunked for an
    HTTP/1.1 client, or to the connection's close for HTTP/1.0; no body for ``HEAD``, 1xx,
    204 and 304.
    """

    def __init__(self, stream: trio.abc.Stream, *, head_only: bool, keep_alive: bool, http11: bool) -> None:
        self._stream = stream
        self._head_only = head_only
        self._http11 = http11
        self.keep_alive = keep_alive
        self._pending = b""
        self._chunked = False
        self._bodiless = False
        self._left: int | None = None
        self.started = False
        self.ended = False

    async def _put(self, data: bytes) -> None:
        if self._pending:
            data, self._pending = self._pending + data, b""
        if not data:
            return
        try:
            await send_within(self._stream, data, SEND_BOUND)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as exc:
            raise _ClientGone from exc

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """Hold the status line and ``headers`` (hop-by-hop ones left out by the caller;
        names lower-case, names and values well-formed, as :mod:`~murmur.gateway.http1` parsed
        them)."""
        if self.started:
            raise RuntimeError("the answer has started already")
        self.started = True
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _reason(status))]
        for name, value in headers:
            if name == b"content-length":
                self._left = int(value)
            lines.append(b"%s: %s\r\n" % (name, value))
        self._bodiless = self._head_only or status in (204, 304) or status < 200
        if not self._bodiless and self._left is None:
            if self._http11:
                self._chunked = True
                lines.append(b"transfer-encoding: chunked\r\n")
            else:
                self.keep_alive = False  # the body ends with the connection
        if not self.keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        self._pending = b"".join(lines)

    def _frame(self, chunk: bytes) -> bytes:
        if self._bodiless or not chunk:
            return b""
        if self._left is not None:
            if len(chunk) > self._left:
                raise RuntimeError("more body than its content-length")
            self._left -= len(chunk)
        if self._chunked:
            return b"%x\r\n%s\r\n" % (len(chunk), chunk)
        return chunk

    async def flush(self) -> None:
        """Send what is held (the head), if anything."""
        if self._pending:
            await self._put(b"")

    async def body(self, chunk: bytes) -> None:
        """Send the next body chunk (now: it is not held back)."""
        data = self._frame(chunk)
        if data:
            await self._put(data)

    async def end(self, last: bytes = b"") -> None:
        """Send ``last`` (if any) and end the body."""
        data = self._frame(last)
        if self._chunked:
            data += b"0\r\n\r\n"
        if self._left:
            self.keep_alive = False  # a sized body left short: the connection cannot go on
        await self._put(data)
        self.ended = True


_REASONS: dict[int, bytes] = {}


def _reason(status: int) -> bytes:
    reason = _REASONS.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase.encode("latin-1")
        except ValueError:
            reason = b""
        _REASONS[status] = reason
    return reason


@attrs.define(eq=False)
class Exchange:
    """One request: method, path, raw query, headers (lower-case names, in order), body."""

    connection: Connection
    method: str
    path: str
    query: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


Handler = Callable[[Exchange, Responder], Awaitable[None]]


def _addr(value: object) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return (str(value[0]), int(value[1]))
    return None


async def serve_listener(
    listener: socket.socket,
    handler: Handler,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept and serve connections on a listening socket until cancelled (then close them all).

    ``listener`` is set non-blocking and stays the caller's to close.
    """
    listener.setblocking(False)
    server = _addr(listener.getsockname())
    slots = trio.Semaphore(MAX_CONNECTIONS)
    async with trio.open_nursery() as nursery:
        task_status.started()
        while True:
            await slots.acquire()
            try:
                stream, client = await accept(listener)
            except OSError as exc:
                slots.release()
                if exc.errno not in _ACCEPT_RETRY:
                    raise
                await trio.sleep(0.1)  # out of descriptors: let connections end first
                continue
            nursery.start_soon(_served, stream, Connection(client, server), handler, slots)


async def _served(
    stream: FastStream, connection: Connection, handler: Handler, slots: trio.Semaphore
) -> None:
    try:
        await serve_connection(stream, connection, handler)
    finally:
        slots.release()


async def serve_connection(stream: trio.abc.Stream, connection: Connection, handler: Handler) -> None:
    """Serve requests on one connection until either side ends it; closes ``stream``."""
    reader = Reader(stream)
    try:
        while True:
            got = await _read_request(reader, connection)
            if got is None:
                return
            exchange, version = got
            http11 = version == b"HTTP/1.1"
            keep = http11 and b"close" not in _connection_tokens(exchange.headers)
            responder = Responder(
                stream, head_only=exchange.method == "HEAD", keep_alive=keep, http11=http11
            )
            try:
                await handler(exchange, responder)
            except _ClientGone:
                return
            except Exception:
                _log.exception("gateway handler failed")
                if not responder.started:
                    await _answer(responder, 500, "the gateway failed to handle the request")
                return
            if not responder.ended or not responder.keep_alive:
                return
    except _ClientGone:
        return
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)


def _connection_tokens(headers: list[tuple[bytes, bytes]]) -> set[bytes]:
    return {
        token.strip().lower()
        for name, value in headers
        if name == b"connection"
        for token in value.split(b",")
    }


async def _read_request(reader: Reader, connection: Connection) -> tuple[Exchange, bytes] | None:
    """The next whole request and its HTTP version, or None when the connection should end
    (a bad one answered first)."""
    try:
        head = await reader.head(request=True, max_head=MAX_HEAD, timeout=IDLE_TIMEOUT)
        if head is None:
            return None
        framing = request_framing(head)
        expects = any(k == b"expect" and v.lower() == b"100-continue" for k, v in head.headers)
        if expects and not reader.buf and (framing.chunked or framing.length):
            await _send_or_gone(reader.stream, b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await reader.read_body(framing, timeout=READ_TIMEOUT, limit=MAX_BODY)
    except BadMessage as exc:
        await _bad(reader.stream, exc.status)
        return None
    except (Truncated, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
        return None
    target = head.second.decode("latin-1")
    path, _, query = target.partition("?")
    exchange = Exchange(
        connection,
        head.first.decode("latin-1"),
        path,
        query.encode("latin-1"),
        head.headers,
        body,
    )
    return exchange, head.third


async def _send_or_gone(stream: trio.abc.Stream, data: bytes | None) -> None:
    if data:
        try:
            await send_within(stream, data, SEND_BOUND)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as exc:
            raise _ClientGone from exc


async def _bad(stream: trio.abc.Stream, status: int) -> None:
    """Answer malformed or oversized input (the connection then closes)."""
    what = {431: "its head is larger than", 413: "its body is larger than"}.get(status)
    limit = MAX_HEAD if status == 431 else MAX_BODY
    message = (
        f"the request is refused: {what} {limit} bytes"
        if what
        else "the request is not well-formed HTTP/1.1 (or names a transfer coding other than chunked)"
    )
    body = body_for(Refusal(status, "E-GWY-007", message, "invalid_request_error"), anthropic=False)
    head = (
        f"HTTP/1.1 {status} {_reason(status).decode()}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode("latin-1")
    try:
        await _send_or_gone(stream, head + body)
    except _ClientGone:
        pass


async def _answer(responder: Responder, status: int, message: str) -> None:
    body = body_for(Refusal(status, "E-GWY-008", message, "api_error"), anthropic=False)
    try:
        await responder.start(
            status,
            [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        )
        await responder.end(body)
    except (_ClientGone, RuntimeError):
        pass
