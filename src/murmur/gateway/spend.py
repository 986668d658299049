"""Each node's spend where ``mur ps --tree`` reads it: one small JSON file per node.

Specification: ``spec/gateway.md`` "Visible spend" and ``spec/tree.md`` "TOKENS". The gateway
writes ``$MURMUR_HOME/tree/spend/<root>/<node>.json`` (``<root>`` the tree's root id, ``ses_…``
or ``frm_…``; ``<node>`` a session id) after each call it charged, for the caller and each
ancestor, and when a session registers::

    {"v": 1, "node": "ses_…", "root": "ses_…|frm_…", "parent": "ses_…"|null,
     "own_tokens": N, "subtree_tokens": N, "budget_tokens": N|null, "unix_ms": N}

``own_tokens``: the calls this node made itself; ``subtree_tokens``: its own and every
descendant's (what counts against its budget). Each file is replaced whole (written beside it,
then renamed), so a reader sees one complete record or the one before. Mode 0600 in 0700
directories. A write that fails is dropped: a call is never refused for its record.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from murmur import paths
from murmur.gateway.nodes import Node

__all__ = ["read_spend", "spend_dir", "spend_record", "write_spend"]

VERSION = 1


def spend_dir(root: str) -> Path:
    """``$MURMUR_HOME/tree/spend/<root>``."""
    return paths.murmur_home() / "tree" / "spend" / root


def spend_record(root: str, node: Node, now_ms: int) -> dict[str, Any]:
    """The file's content for ``node`` (pure)."""
    return {
        "v": VERSION, "node": node.session, "root": root, "parent": node.parent,
        "own_tokens": node.own, "subtree_tokens": node.spent, "budget_tokens": node.budget,
        "unix_ms": now_ms,
    }


def write_spend(root: str, nodes: Iterable[Node]) -> bool:
    """Replace each node's file atomically; False when any could not be written."""
    d = spend_dir(root)
    now = int(time.time() * 1000)
    ok = True
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    for node in nodes:
        if not _safe(node.session):
            continue
        target = d / f"{node.session}.json"
        tmp = d / f".{node.session}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(spend_record(root, node, now), separators=(",", ":")) + "\n")
            os.replace(tmp, target)
        except OSError:
            ok = False
            try:
                tmp.unlink()
            except OSError:
                pass
    return ok


def read_spend(root: str) -> dict[str, dict[str, Any]]:
    """Node id -> its record, for one tree; files that do not parse are skipped."""
    out: dict[str, dict[str, Any]] = {}
    try:
        files = sorted(spend_dir(root).glob("*.json"))
    except OSError:
        return out
    for path in files:
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("node"), str):
            out[rec["node"]] = rec
    return out


def _safe(name: str) -> bool:
    return bool(name) and "/" not in name and not name.startswith(".")
