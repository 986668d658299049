"""The door's ASGI plumbing: replies, HTTP-level errors, the lifespan, the shielded last send,
and serving on hypercorn's Trio worker (spec/door.md). :mod:`murmur.session.door` holds the
JSON-RPC side and re-exports what callers import from it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, Protocol

import attrs
import trio

DOOR_GRACE = 2.0  # seconds in-flight requests get once the door is told to stop


class Servable(Protocol):
    """What :func:`serve_door` serves (a :class:`murmur.session.door.Door`)."""

    @property
    def app(self) -> Any: ...  # the ASGI app, shielded last sends included

    @property
    def log(self) -> logging.Logger: ...


def shield_send(app: Any, bound: float = 5.0) -> Any:
    """Wrap an ASGI app so each response's last body chunk is sent in a shielded scope.

    A handler whose scope is being cancelled as it answers still finishes its response, and
    hypercorn, which re-arms the connection's keep-alive timer from inside that send, keeps
    the timer (spec/door.md, its opening). The shielded send is bounded, so a client that
    stopped reading cannot hold it.

    Args:
        app: the ASGI app.
        bound (float): seconds the shielded send may take.
    """

    async def wrapped(scope: Any, receive: Any, send: Any) -> Any:
        if scope["type"] != "http":
            return await app(scope, receive, send)

        async def shielded_send(msg: Any) -> None:
            if msg["type"] == "http.response.body" and not msg.get("more_body", False):
                with trio.CancelScope(shield=True, deadline=trio.current_time() + bound):
                    await send(msg)
            else:
                await send(msg)

        return await app(scope, receive, shielded_send)

    return wrapped


def dumps(obj: object) -> bytes:
    """Compact UTF-8 JSON (no spaces, non-ASCII kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sse_frame(obj: object, *, event: str | None = None) -> bytes:
    """One SSE event: an optional ``event:`` line, ``data: <JSON>``, a blank line."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + dumps(obj) + b"\n\n"


@attrs.frozen
class Reply:
    """An HTTP answer of the JSON-RPC route, independent of the web framework.

    Attributes:
        status (int): the HTTP status.
        body (bytes): the body (ignored when ``stream`` is set).
        content_type (str): ``application/json`` or ``text/event-stream``.
        headers (tuple[tuple[str, str], ...]): extra headers.
        stream (AsyncIterator[bytes] | None): SSE chunks, sent as they come.
    """

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    stream: AsyncIterator[bytes] | None = None


_HTTP_ERRORS = {
    400: ("bad_request", "the request could not be read"),
    404: ("not_found", "this door serves only POST / and GET /.well-known/agent-card.json"),
    405: ("method_not_allowed", "this path does not answer that method"),
    413: ("payload_too_large", "the request body is larger than 16 MiB"),
}


def http_error_body(status: int) -> tuple[str, str]:
    """The ``error`` code and ``message`` sentence of an HTTP-level error the door sends."""
    return _HTTP_ERRORS.get(status, ("http_error", f"the request was answered HTTP {status}"))


ROUTES: dict[str, tuple[str, ...]] = {"/": ("POST",), "/.well-known/agent-card.json": ("GET", "HEAD")}
"""The door's paths and the methods each answers (anything else: 404, or 405 with ``Allow``)."""


def http_error(status: int, *, allow: str | None = None) -> Reply:
    """A JSON ``{"error", "message"}`` answer of an HTTP-level error (405 carries ``Allow``)."""
    error, message = http_error_body(status)
    headers = (("allow", allow),) if allow else ()
    return Reply(status, dumps({"error": error, "message": message}), headers=headers)


def reply_headers(reply: Reply) -> list[tuple[bytes, bytes]]:
    out = [(b"content-type", reply.content_type.encode())]
    out += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
    return out


async def send_reply(send: Any, reply: Reply, *, head: bool = False) -> None:
    """Send a whole (non-stream) reply; ``head`` sends its headers and no body."""
    headers = [*reply_headers(reply), (b"content-length", str(len(reply.body)).encode())]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else reply.body})


async def lifespan(receive: Any, send: Any) -> None:
    """The ASGI lifespan protocol: nothing to start or stop, so acknowledge both."""
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def refuse_websocket(scope: Any, send: Any) -> None:
    """The door serves no WebSocket: a JSON 404 where the server allows one, else a close."""
    if scope["type"] != "websocket":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        reply = http_error(404)
        await send({"type": "websocket.http.response.start", "status": 404, "headers": reply_headers(reply)})
        await send({"type": "websocket.http.response.body", "body": reply.body})
    else:
        await send({"type": "websocket.close", "code": 1008})


def hypercorn_config(*, bind: str = "127.0.0.1:0", graceful: float = DOOR_GRACE, logger: logging.Logger | None = None) -> Any:
    """A hypercorn config for a door: loopback, no access log, errors to ``logger``.

    Args:
        bind (str): ``host:port`` (port 0: the OS chooses).
        graceful (float): seconds hypercorn waits for open requests when told to stop.
        logger (logging.Logger | None): where hypercorn's errors go (default ``murmur.door``).

    Returns:
        Any: a ``hypercorn.config.Config`` (typed ``Any`` so that importing this module does
        not import hypercorn).
    """
    from hypercorn.config import Config

    cfg = Config()
    cfg.bind = [bind]
    cfg.graceful_timeout = graceful
    cfg.accesslog = None
    cfg.errorlog = logger or logging.getLogger("murmur.door")
    cfg.keep_alive_timeout = 30
    cfg.keep_alive_max_requests = 1 << 30
    return cfg


async def serve_door(
    door: Servable,
    stop: trio.Event,
    *,
    bind: str = "127.0.0.1:0",
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``door`` until ``stop`` is set; ``task_status.started`` gets ``http://host:port``.

    Raises:
        OSError: the address cannot be bound.
    """
    from hypercorn.trio import serve

    from murmur.httpserve import install

    install()  # bounded sends, prompt close on EOF
    cfg = hypercorn_config(bind=bind, logger=door.log)
    up = False
    try:
        async with trio.open_nursery() as n:
            binds = await n.start(partial(serve, door.app, cfg, shutdown_trigger=stop.wait, mode="asgi"))
            up = True
            task_status.started(str(binds[0]))
    except BaseExceptionGroup as group:
        cause = None if up else _lone_os_error(group)
        if cause is None:
            raise
        raise cause from None  # the address could not be bound: the caller's E-RUN-001


def _lone_os_error(group: BaseExceptionGroup[BaseException]) -> OSError | None:
    """The one ``OSError`` a (nested) exception group holds, or None when it holds anything else."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 and isinstance(leaves[0], OSError) else None
