"""The gateway's serving side: a lean HTTP/1.1 server loop per connection, over h11 and Trio.

Specification: ``spec/gateway.md`` "Serving and forwarding". :func:`serve_listener` accepts
connections (at most :data:`MAX_CONNECTIONS` at once; the rest wait in the backlog) and runs
:func:`serve_connection` for each: read one request (head at most :data:`MAX_HEAD` bytes,
body at most :data:`MAX_BODY`), hand it to the handler as an :class:`Exchange`, and, when the
answer has ended and both sides may keep the connection, wait for the next request (at most
:data:`IDLE_TIMEOUT` seconds).

The handler answers through :class:`Responder` (``start`` / ``body`` / ``end``): the status
and headers it gives, and each body chunk as it is given (a ``content-length`` it names frames
the body; without one, an HTTP/1.1 client gets it chunked). A send the client takes no bytes of
for :data:`SEND_BOUND` seconds closes the connection (a client that stopped reading).

Bad input never reaches the handler and never shows a traceback: a head too large is
answered 431, a body too large 413, anything else malformed 400, each with a coded JSON body
(``E-GWY-007``), and the connection is closed. A handler that fails before answering gets 500.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable

import attrs
import h11
import trio

from murmur.gateway.refusal import Refusal, body_for

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
    """The answer to one request, sent as it is given."""

    def __init__(self, stream: trio.abc.Stream, state: h11.Connection) -> None:
        self._stream = stream
        self._state = state
        self.started = False
        self.ended = False

    async def _put(self, data: bytes | None) -> None:
        if not data:
            return
        try:
            with trio.move_on_after(SEND_BOUND) as scope:
                await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _ClientGone from exc
        if scope.cancelled_caught:
            raise _ClientGone

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """Send the status line and ``headers`` (hop-by-hop ones left out by the caller)."""
        self.started = True
        await self._put(self._state.send(h11.Response(status_code=status, headers=headers)))

    async def body(self, chunk: bytes) -> None:
        """Send the next body chunk (now: it is not held back)."""
        if chunk:
            await self._put(self._state.send(h11.Data(data=chunk)))

    async def end(self, last: bytes = b"") -> None:
        """Send ``last`` (if any) and end the body."""
        data = self._state.send(h11.Data(data=last)) if last else b""
        self.ended = True
        await self._put((data or b"") + (self._state.send(h11.EndOfMessage()) or b""))


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
    listener: trio.SocketListener,
    handler: Handler,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept and serve connections on ``listener`` until cancelled (then close them all)."""
    slots = trio.Semaphore(MAX_CONNECTIONS)
    async with trio.open_nursery() as nursery:
        task_status.started()
        while True:
            await slots.acquire()
            try:
                stream = await listener.accept()
            except OSError as exc:
                slots.release()
                if exc.errno not in _ACCEPT_RETRY:
                    raise
                await trio.sleep(0.1)  # out of descriptors: let connections end first
                continue
            nursery.start_soon(_served, stream, handler, slots)


async def _served(stream: trio.SocketStream, handler: Handler, slots: trio.Semaphore) -> None:
    try:
        await serve_connection(stream, handler)
    finally:
        slots.release()


async def serve_connection(stream: trio.SocketStream, handler: Handler) -> None:
    """Serve requests on one connection until either side ends it; closes ``stream``."""
    try:
        sock = stream.socket
        connection = Connection(_addr(sock.getpeername()), _addr(sock.getsockname()))
    except OSError:
        await trio.aclose_forcefully(stream)
        return
    state = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    try:
        while True:
            exchange = await _read_request(stream, state, connection)
            if exchange is None:
                return
            responder = Responder(stream, state)
            try:
                await handler(exchange, responder)
            except _ClientGone:
                return
            except Exception:
                _log.exception("gateway handler failed")
                if not responder.started:
                    await _answer(responder, 500, "the gateway failed to handle the request")
                return
            if not responder.ended or state.our_state is not h11.DONE:
                return
            if state.their_state is not h11.DONE:
                return  # the handler left part of the body unread (never, as bodies are read whole)
            state.start_next_cycle()
    except _ClientGone:
        return
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)


async def _read_request(
    stream: trio.SocketStream, state: h11.Connection, connection: Connection
) -> Exchange | None:
    """The next whole request, or None when the connection should end (answered if bad)."""
    request: h11.Request | None = None
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            event = state.next_event()
        except h11.RemoteProtocolError as exc:
            await _bad(stream, state, exc.error_status_hint)
            return None
        if event is h11.NEED_DATA:
            if state.they_are_waiting_for_100_continue:
                await _send_or_gone(stream, state.send(h11.InformationalResponse(status_code=100, headers=[])))
            timeout = IDLE_TIMEOUT if request is None else READ_TIMEOUT
            data = b""
            with trio.move_on_after(timeout):
                try:
                    data = await stream.receive_some(_READ)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return None
            if not data:
                return None  # the client closed, or was idle too long
            state.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > MAX_BODY:
                await _bad(stream, state, 413)
                return None
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            target = request.target.decode("latin-1")
            path, _, query = target.partition("?")
            return Exchange(
                connection,
                request.method.decode("latin-1"),
                path,
                query.encode("latin-1"),
                list(request.headers),
                b"".join(chunks),
            )
        else:  # ConnectionClosed, PAUSED
            return None


async def _send_or_gone(stream: trio.abc.Stream, data: bytes | None) -> None:
    if data:
        with trio.move_on_after(SEND_BOUND):
            try:
                await stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _ClientGone from exc


async def _bad(stream: trio.SocketStream, state: h11.Connection, status: int) -> None:
    """Answer malformed or oversized input (the connection then closes)."""
    what = {431: "its head is larger than", 413: "its body is larger than"}.get(status)
    limit = MAX_HEAD if status == 431 else MAX_BODY
    message = (
        f"the request is refused: {what} {limit} bytes"
        if what
        else "the request is not well-formed HTTP/1.1"
    )
    body = body_for(Refusal(status, "E-GWY-007", message, "invalid_request_error"), anthropic=False)
    head = (
        f"HTTP/1.1 {status} {'Bad Request' if status == 400 else 'Refused'}\r\n"
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
    except (_ClientGone, h11.LocalProtocolError):
        pass
