"""Running one tree's gateway on loopback, and the variables descendants find it by.

Specification: ``spec/gateway.md`` "One gateway per root". :func:`run_gateway` serves a
:class:`~murmur.gateway.server.Gateway` with hypercorn's Trio worker (bounded sends,
:mod:`murmur.httpserve`) on ``127.0.0.1:0`` and reports its URL through ``task_status``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

import hypercorn.config
import hypercorn.trio
import trio

from murmur.gateway.server import Gateway

__all__ = ["ENDPOINT_ENV", "INFERENCE_ENV", "PLACEHOLDER_KEY", "child_environ", "run_gateway"]

ENDPOINT_ENV = "MURMUR_GATEWAY_ENDPOINT"
"""The gateway's URL, handed to every descendant (upstream's name; it carries no key)."""
INFERENCE_ENV = "MURMUR_INFERENCE_ENDPOINT"
"""The endpoint a WASM driver is handed; under a gateway, the gateway's address for it."""
PLACEHOLDER_KEY = "murmur-gateway-placeholder"
"""What a client under the gateway holds as its key: it opens nothing at any provider."""


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
    before the serving starts); default: a new one on ``127.0.0.1:0``.

    Raises:
        OSError: when no loopback port can be bound.
    """
    from murmur.httpserve import install

    install()
    cfg = hypercorn.config.Config()
    # hypercorn takes the descriptor it is given as its own (and closes it): give it a copy,
    # so the caller's socket stays the caller's to close.
    cfg.bind = [f"fd://{os.dup(sock.fileno())}"] if sock is not None else ["127.0.0.1:0"]
    cfg.accesslog = None
    cfg.errorlog = logging.getLogger("hypercorn.error")
    cfg.include_date_header = False
    cfg.include_server_header = False
    cfg.graceful_timeout = 1.0
    cfg.keep_alive_timeout = 30.0
    cfg.backlog = 1024

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gateway.flush_forever)  # the spend files (spec/gateway.md "Visible spend")
            urls: list[str] = await nursery.start(_serve, gateway, cfg)
            task_status.started(urls[0])
    finally:
        with trio.CancelScope(shield=True):
            await gateway.flush()
            await gateway.aclose()


async def _serve(
    gateway: Gateway,
    cfg: hypercorn.config.Config,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await hypercorn.trio.serve(gateway, cfg, mode="asgi", task_status=task_status)  # type: ignore[arg-type]
