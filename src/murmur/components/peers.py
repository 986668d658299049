"""Formation peers for components: virtual ``<name>.formation.invalid`` addresses (spec/components.md, "Formation peers").

A member's WASM components call a member they may call at ``http://<name>.formation.invalid``.
The HTTP check (:mod:`murmur.components.outgoing_http`) hands such a request here:

1. the name is resolved to the member's real door URL (``route(name)``, which waits up to
   10 s for it on the formation channel);
2. the real URL is checked against the component's effective ``network.allow`` (a bare
   ``localhost`` is what reaches a door);
3. the request is sent on through a loopback relay of this session (:func:`relays`, one
   listener per callee, living for the call) that removes any ``Authorization``,
   ``x-murmur-task-origin`` and ``x-murmur-task-trust`` the component set and attaches the
   edge's formation token, origin ``peer`` and the task's trust class (``route`` supplies
   them), then forwards to the real door.

Any other name under ``formation.invalid`` is refused before a connection, with one sentence
whatever the name. The component only ever sees the virtual address; the token and the door
URL never reach it, a trace record or a log. Specification: ``spec/components.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import attrs
import trio

STRIPPED = ("authorization", "x-murmur-task-origin", "x-murmur-task-trust")
_HOP = ("host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade")

PeerRoute = Callable[[str], Awaitable["tuple[str, Mapping[str, str]] | None"]]
"""``route(name)`` → (the member's door URL, headers to attach), or None (no URL in time)."""


@attrs.frozen
class PeerAccess:
    """What the HTTP check needs for virtual addresses: the relay of each callee and a
    blocking resolver (called from the component's worker thread)."""

    relays: Mapping[str, str]
    resolve: Callable[[str], str | None]


def virtual_url(name: str) -> str:
    return f"http://{name}.formation.invalid"


async def _relay_one(stream: trio.SocketStream, name: str, route: PeerRoute) -> None:
    import h11
    import httpx

    conn = h11.Connection(h11.SERVER)
    request: h11.Request | None = None
    body = bytearray()
    with trio.move_on_after(30):
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                if not data:
                    break
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                break
    status, headers, payload = 502, [(b"content-type", b"text/plain")], b"the member could not be reached\n"
    if request is not None:
        found = await route(name)
        if found is not None:
            door, attach = found
            sent = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers
                    if k.decode("latin-1").lower() not in (*STRIPPED, *_HOP)}
            sent.update(attach)
            try:
                async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
                    reply = await client.request(request.method.decode(), door.rstrip("/") + request.target.decode(),
                                                 headers=sent, content=bytes(body))
                status, payload = reply.status_code, reply.content
                headers = [(k.encode(), v.encode()) for k, v in reply.headers.items() if k.lower() not in _HOP]
            except httpx.HTTPError:
                pass
    headers.append((b"content-length", str(len(payload)).encode()))
    try:
        await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        await stream.send_all(conn.send(h11.Data(data=payload)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
        pass
    finally:
        await stream.aclose()


@asynccontextmanager
async def relays(callees: Sequence[str], route: PeerRoute) -> AsyncIterator[dict[str, str]]:
    """One loopback relay per callee for the enclosed call; yields name → ``127.0.0.1:<port>``.

    Every relay is closed (and every connection it holds cancelled) when the block ends.
    """
    failed: Exception | None = None
    async with trio.open_nursery() as nursery:
        out: dict[str, str] = {}
        for name in callees:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            out[name] = f"127.0.0.1:{port}"

            async def handler(stream: trio.SocketStream, name: str = name) -> None:
                await _relay_one(stream, name, route)

            nursery.start_soon(trio.serve_listeners, handler, listeners)
        try:
            yield out
        except Exception as exc:  # the call's own fault, re-raised as itself (not in a group)
            failed = exc
        finally:
            nursery.cancel_scope.cancel()
    if failed is not None:
        raise failed
