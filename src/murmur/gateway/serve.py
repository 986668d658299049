"""Running one tree's gateway on loopback, and the variables descendants find it by.

Specification: ``spec/gateway.md`` "One gateway per root" and "Serving and forwarding".
:func:`run_gateway` serves a :class:`~murmur.gateway.server.Gateway` on ``127.0.0.1:0`` (or
a socket it is given) with :func:`murmur.gateway.wire.serve_listener` (an HTTP/1.1 loop per
connection, in this Trio loop) and reports its URL through ``task_status``.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

import trio

from murmur.gateway.server import Gateway
from murmur.gateway.wire import serve_listener

__all__ = ["ENDPOINT_ENV", "INFERENCE_ENV", "PLACEHOLDER_KEY", "child_environ", "run_gateway"]

ENDPOINT_ENV = "MURMUR_GATEWAY_ENDPOINT"
"""The gateway's URL, handed to every descendant (upstream's name; it carries no key)."""
INFERENCE_ENV = "MURMUR_INFERENCE_ENDPOINT"
"""The endpoint a WASM driver is handed; under a gateway, the gateway's address for it."""
PLACEHOLDER_KEY = "murmur-gateway-placeholder"
"""What a client under the gateway holds as its key: it opens nothing at any provider."""
_BACKLOG = 1024


def child_environ(gateway_url: str) -> Mapping[str, str]:
    """The variables a descendant process is handed so that it finds the gateway."""
    return {ENDPOINT_ENV: gateway_url}


async def run_gateway(
    gateway: Gateway,
    *,
    sock: socket.socket | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``gateway`` on loopback until cancelled; ``started`` receives its URL.

    ``sock``: a listening loopback socket bound already (so its URL could be handed out
    before the serving starts); it stays the caller's to close (a duplicate is served).
    Default: a new one on ``127.0.0.1:0``.

    Raises:
        OSError: when no loopback port can be bound.
    """
    if sock is not None:
        own = sock.dup()
    else:
        own = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            own.bind(("127.0.0.1", 0))
        except OSError:
            own.close()
            raise
    try:
        own.listen(_BACKLOG)
        host, port = own.getsockname()[:2]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gateway.flush_forever)  # the spend files (spec/gateway.md "Visible spend")
            await nursery.start(serve_listener, own, gateway)
            task_status.started(f"http://{host}:{port}")
    finally:
        trio.lowlevel.notify_closing(own)
        own.close()
        with trio.CancelScope(shield=True):
            await gateway.flush()
            await gateway.aclose()
