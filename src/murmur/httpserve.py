"""Hypercorn's Trio connection handler, with two bounds it lacks (door and mur-roost).

hypercorn 0.18 (pinned) sends every byte inside a *shielded* cancel scope with no deadline,
and keeps a connection's keep-alive timer running after the client has closed its end.
So a client that stops reading a stream holds its connection task -- and with it the
server's shutdown, and the session's wind-down -- for ever; and a client that closes an idle
keep-alive connection leaves the socket in CLOSE-WAIT until the keep-alive timeout (30 s).

:class:`BoundedTCPServer` keeps the shield (a response must not be cut by an unrelated
cancellation) but gives each send :data:`SEND_BOUND` seconds: a client
that takes no bytes for that long has stopped reading, and its connection is closed. On the
client's EOF the keep-alive timer is stopped, so the socket closes at once. :func:`install`
puts it in place of hypercorn's own handler (idempotent); :mod:`murmur.session.door` and
:mod:`murmur.roost.app` call it before serving. Spec: spec/door.md "Streams".

A server whose config sets :data:`BODY_IN_SCOPE` (mur-roost: spec/roost.md, "Endpoints") also
gets each request's whole body in its ASGI scope under :data:`BODY_KEY` (``bytes``), put
there when hypercorn has parsed the body's end -- before the app's own receive loop has
taken the messages, so an endpoint reads a body that has arrived without waiting for that
loop (hypercorn hands the body over as one message per chunk and a final empty one). For
such a server the last chunk also travels with the end, in one message (``more_body``
false), as ASGI allows: a one-piece body costs the app one receive, as a GET's does. A body
larger than the config's figure is not kept in the scope (the app reads it as before, and
refuses it).
"""

from __future__ import annotations

import hypercorn.protocol.h11 as _h11
import hypercorn.trio.run as _run
import trio
from hypercorn.events import Closed, Event, RawData
from hypercorn.protocol.events import Body, EndBody
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.http_stream import HTTPStream
from hypercorn.trio.tcp_server import TCPServer

__all__ = ["BODY_IN_SCOPE", "BODY_KEY", "SEND_BOUND", "BodyInScopeStream", "BoundedTCPServer", "install"]

SEND_BOUND = 5.0
"""Seconds one send to a client may take before the client is taken to have stopped reading."""


class BoundedTCPServer(TCPServer):
    """hypercorn's connection handler with bounded sends and prompt close on EOF."""

    send_bound: float = SEND_BOUND

    async def protocol_send(self, event: Event) -> None:
        """Send bytes within :attr:`send_bound` seconds, else close the connection."""
        if not isinstance(event, RawData):
            await super().protocol_send(event)
            return
        async with self.send_lock:
            try:
                with trio.CancelScope(shield=True, deadline=trio.current_time() + self.send_bound) as scope:
                    await self.stream.send_all(event.data)
                stalled = scope.cancelled_caught
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                stalled = False
                await self.protocol.handle(Closed())
                return
        if stalled:
            await self.stream.aclose()
            await self.protocol.handle(Closed())

    async def _read_data(self) -> None:
        await super()._read_data()
        # The client has closed (or the read failed): nothing more will arrive, so the
        # keep-alive timer has nothing to wait for; stopping it lets the socket close now.
        await self.idle_task.stop()


BODY_IN_SCOPE = "murmur_body_in_scope"
"""The ``hypercorn.config.Config`` attribute (bytes, an int) under which a server asks for
each request's body in its scope; absent or 0: not kept."""

BODY_KEY = "murmur.body"
"""The ASGI scope key holding the request's whole body (``bytes``) once it has been parsed."""


_BODY_EVENTS = (Body, EndBody)


class BodyInScopeStream(HTTPStream):
    """hypercorn's HTTP/1 stream, keeping the body in the scope as well (see module doc).

    Costs nothing for a server whose config does not ask (one attribute read per body event).
    """

    _kept: bytearray | None = None
    _held: Body | None = None

    async def handle(self, event: StreamEvent) -> None:
        """As hypercorn's, after noting a body chunk or the body's end; for a server that asks,
        the last chunk is handed to the app together with the end (one message, not two)."""
        if not isinstance(event, _BODY_EVENTS) or self.closed:
            await super().handle(event)
            return
        limit = getattr(self.config, BODY_IN_SCOPE, 0)
        if not limit:
            await super().handle(event)
            return
        self._keep(event, limit)
        held = self._held
        if isinstance(event, Body):
            self._held = event
            if held is not None:  # an earlier chunk: the app has it now
                await super().handle(held)
            return
        self._held = None
        if held is None:
            await super().handle(event)
        else:
            await self.app_put({"type": "http.request", "body": bytes(held.data), "more_body": False})

    def _keep(self, event: Body | EndBody, limit: int) -> None:
        if isinstance(event, Body):
            if self._kept is None:
                self._kept = bytearray()
            if len(self._kept) <= limit:  # one past the limit is enough to know
                self._kept += event.data[: limit + 1 - len(self._kept)]
        elif self._kept is not None and len(self._kept) <= limit:
            scope: dict[str, object] = self.scope  # type: ignore[assignment]
            scope[BODY_KEY] = bytes(self._kept)
            self._kept = None


def install() -> None:
    """Make hypercorn's Trio worker use :class:`BoundedTCPServer` and its HTTP/1 protocol
    :class:`BodyInScopeStream` (idempotent)."""
    setattr(_run, "TCPServer", BoundedTCPServer)  # noqa: B010 - the module does not re-export it
    setattr(_h11, "HTTPStream", BodyInScopeStream)  # noqa: B010 - likewise
