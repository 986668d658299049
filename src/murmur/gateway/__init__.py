"""The inference gateway: one per root, keys that never leave it, budgets over a tree.

Specification: ``spec/gateway.md``. Public face; the work is in the private-by-convention
modules: :mod:`~murmur.gateway.route` (paths, key headers), :mod:`~murmur.gateway.keys`
(the key table), :mod:`~murmur.gateway.nodes` (reach and budget arithmetic),
:mod:`~murmur.gateway.usage` (reported usage), :mod:`~murmur.gateway.callers` (who is
calling), :mod:`~murmur.gateway.server` (the ASGI app), :mod:`~murmur.gateway.serve`,
:mod:`~murmur.gateway.spend` (each node's spend file). Each name is imported on first use, so
``mur ps`` reading spend files loads no HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.gateway.keys import KeyEntry, KeyTable
    from murmur.gateway.nodes import Node, Tree
    from murmur.gateway.route import base_url, origin_of
    from murmur.gateway.serve import (
        ENDPOINT_ENV,
        INFERENCE_ENV,
        PLACEHOLDER_KEY,
        child_environ,
        run_gateway,
    )
    from murmur.gateway.server import REGISTER_PATH, TASK_HEADER, Gateway
    from murmur.gateway.spend import read_spend, write_spend

__all__ = [
    "ENDPOINT_ENV",
    "INFERENCE_ENV",
    "PLACEHOLDER_KEY",
    "REGISTER_PATH",
    "TASK_HEADER",
    "Gateway",
    "KeyEntry",
    "KeyTable",
    "Node",
    "Tree",
    "base_url",
    "child_environ",
    "origin_of",
    "read_spend",
    "run_gateway",
    "write_spend",
]

__getattr__ = lazy.face(__name__, {
    "keys": ["KeyEntry", "KeyTable"],
    "nodes": ["Node", "Tree"],
    "route": ["base_url", "origin_of"],
    "serve": ["ENDPOINT_ENV", "INFERENCE_ENV", "PLACEHOLDER_KEY", "child_environ", "run_gateway"],
    "server": ["REGISTER_PATH", "TASK_HEADER", "Gateway"],
    "spend": ["read_spend", "write_spend"],
})
