"""Outgoing HTTP from components: refused before any connection, and recorded.

wasmtime-py links only wasmtime's default ``wasi:http/outgoing-handler``, which would connect
wherever a component asks and offers no hook to see the request first. Until this host can
read a request's scheme and authority before it is sent, it cannot tell a covered host from
an uncovered one, so it shadows ``handle`` with its own function that refuses **every**
request with the ``wasi:http`` error ``HTTP-request-denied`` (upstream's answer to a host
outside ``network.allow``) before any connection opens, and reports each refusal through the
call's log hook (the caller turns it into a ``component_http_denied`` trace record).
Specification: ``spec/components.md`` ("Outgoing HTTP").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from wasmtime import component as wc

HANDLER_VERSIONS = ("0.2.0", "0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5", "0.2.6", "0.2.7", "0.2.8")
DENIED = "HTTP-request-denied"

_local = threading.local()


def add_http(linker: wc.Linker) -> None:
    """Link ``wasi:http/types`` (wasmtime's) and our refusing ``outgoing-handler.handle``."""
    linker.add_wasi_http()
    linker.allow_shadowing = True
    with linker.root() as root:
        for version in HANDLER_VERSIONS:
            with root.add_instance(f"wasi:http/outgoing-handler@{version}") as inst:
                inst.add_func("handle", _handle)
    linker.allow_shadowing = False


def bind(policy: Any, name: str, log: Callable[[str], None] | None) -> None:
    """Say, for this worker thread, which component's requests the handler sees."""
    _local.name, _local.log = name, log


def _handle(_store: object, _request: object, _options: object) -> Any:
    log = getattr(_local, "log", None)
    if log is not None:
        log(f"murmur: outgoing HTTP request from component `{getattr(_local, 'name', '?')}` refused "
            "before any connection (this host does not filter wasi:http by network.allow)\n")
    return wc.Variant(DENIED)
