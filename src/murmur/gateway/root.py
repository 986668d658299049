"""The root node and key table of a tree, from the manifests the root answers for.

Specification: ``spec/gateway.md`` "One gateway per root". Pure but for reading the root's
process start time. A session root answers for one manifest; a formation launcher for every
member's (its reach is the union of theirs, so that each member, registering under it, keeps
its own reach; its key table holds each member's ``inference.api_key`` reference, resolved
from the launcher's environment).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from murmur import procstat
from murmur.gateway.keys import KeyTable
from murmur.gateway.nodes import Node, Tree
from murmur.gateway.route import origin_of
from murmur.manifest import Manifest

__all__ = ["calls_models", "reach", "root_tree"]


def calls_models(manifest: Manifest) -> bool:
    """Whether the manifest has an ``inference`` block."""
    return manifest.inference is not None


def reach(manifest: Manifest) -> list[str]:
    """``network.allow`` plus the origin of the manifest's own ``inference.endpoint``."""
    allow = list(manifest.network_allow)
    inference = manifest.inference
    origin = origin_of(inference.endpoint) if inference is not None and inference.endpoint else None
    if origin is not None:
        allow.append(origin)
    return allow


def root_tree(
    session: str, manifests: Iterable[Manifest], environ: Mapping[str, str], budget: int | None
) -> tuple[Tree, KeyTable]:
    """The tree holding only the root (this process) and the key table of ``manifests``."""
    allow: list[str] = []
    keys = KeyTable()
    for manifest in manifests:
        allow.extend(e for e in reach(manifest) if e not in allow)
        inference = manifest.inference
        if inference is not None and inference.endpoint and inference.api_key:
            keys = keys.with_key(inference.endpoint, inference.api_key, environ)
    me = os.getpid()
    node = Node(session, me, procstat.start_time(me) or 0, None, tuple(allow), budget)
    return Tree().add(node), keys
