"""The request body in the ASGI scope (murmur.httpserve.BodyInScopeStream; spec/roost.md,
"Endpoints"): put there, whole, by the time the app has taken the body's last message, only
for a server that asks, and never past the size it asks for; for such a server the last
chunk travels with the end, so a one-piece body is one message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from functools import partial
from typing import Any

import pytest
import trio

from murmur.httpserve import BODY_IN_SCOPE, BODY_KEY, install
from murmur.roost.app import hypercorn_config

Seen = list[object]


def recorder(seen: Seen) -> Callable[..., Awaitable[None]]:
    """An ASGI app that reads the body's messages, then records what the scope holds."""

    async def app(scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        messages, body = 0, b""
        while True:
            message = await receive()
            messages += 1
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        seen.append((scope.get(BODY_KEY), messages, len(body)))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    return app


async def post(port: int, pieces: list[bytes], length: int) -> bytes:
    """POST ``pieces`` (sent one by one, the scheduler run dry between them) as one body."""
    import trio.testing

    head = f"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n".encode()
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await stream.send_all(head)
        for piece in pieces:
            await trio.testing.wait_all_tasks_blocked()
            await stream.send_all(piece)
        answer = b""
        with trio.fail_after(30):
            while b"\r\n\r\n" not in answer:
                chunk = await stream.receive_some(4096)
                assert chunk
                answer += chunk
    return answer


@pytest.mark.parametrize("asks", [True, False])
async def test_the_body_is_in_the_scope_only_when_asked(asks: bool) -> None:
    """A server whose config asks finds the whole body (sent in three pieces) in the scope;
    one that does not (the door's) finds nothing there; an oversized body is never kept."""
    import hypercorn.trio

    install()
    config = hypercorn_config(0)
    if not asks:
        delattr(config, BODY_IN_SCOPE)
    seen: Seen = []
    limit = getattr(config, BODY_IN_SCOPE, 0)
    async with trio.open_nursery() as nursery:
        stop = trio.Event()
        binds = await nursery.start(partial(hypercorn.trio.serve, recorder(seen), config, shutdown_trigger=stop.wait))
        port = int(binds[0].rsplit(":", 1)[1])
        answer = await post(port, [b'{"a":', b'"b"', b"}"], 9)
        assert answer.startswith(b"HTTP/1.1 200")
        if asks:
            big = b"x" * (limit + 1)
            await post(port, [big[:1000], big[1000:]], len(big))
            exact = b"y" * limit
            await post(port, [exact], len(exact))
            await post(port, [b'{"one":"piece"}'], 15)
        stop.set()
    if asks:  # three pieces: the last with the end; one piece: one message; an oversized body
        # reaches the app whole but not the scope (64 KiB may come in any number of reads)
        assert seen[0] == (b'{"a":"b"}', 3, 9) and seen[3] == (b'{"one":"piece"}', 1, 15)
        assert seen[1][0] is None and seen[1][2] == limit + 1
        assert seen[2][0] == b"y" * limit and seen[2][2] == limit
    else:  # hypercorn's own: one message per piece and an empty end
        assert seen == [(None, 4, 9)]
