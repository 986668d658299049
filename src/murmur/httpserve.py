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
"""

from __future__ import annotations

import hypercorn.trio.run as _run
import trio
from hypercorn.events import Closed, Event, RawData
from hypercorn.trio.tcp_server import TCPServer

__all__ = ["SEND_BOUND", "BoundedTCPServer", "install"]

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


def install() -> None:
    """Make hypercorn's Trio worker use :class:`BoundedTCPServer` (idempotent)."""
    setattr(_run, "TCPServer", BoundedTCPServer)  # noqa: B010 - the module does not re-export it
