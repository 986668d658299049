"""The process tree: lineage, spawn sets, the host journal, ``mur ps --tree``, the cascade.

Specification: ``spec/tree.md``. Other packages import what is in ``__all__`` from here; each
name's module is imported on first use (a plain session needs the lineage, not the forest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.tree.caps import (
        CAPS_ENV,
        cap_refusal,
        chain_refusal,
        parse_caps,
        take_one,
        tighten,
        total_refusal,
    )
    from murmur.tree.forest import Scoped, find, render_text, scope, short_ids, to_json
    from murmur.tree.journaling import (
        asked_label,
        contribute,
        mark_ended_by_parent,
        mark_not_started,
        mark_uncertain,
        session_lineage,
    )
    from murmur.tree.lineage import LINEAGE_ENV, cut_caller, narrowings, refusal_sentence
    from murmur.tree.snapshot import load_forest
    from murmur.tree.stop import find_node, stop_node

__all__ = [
    "CAPS_ENV",
    "LINEAGE_ENV",
    "Scoped",
    "asked_label",
    "cap_refusal",
    "chain_refusal",
    "contribute",
    "cut_caller",
    "find",
    "find_node",
    "load_forest",
    "mark_ended_by_parent",
    "mark_not_started",
    "mark_uncertain",
    "narrowings",
    "parse_caps",
    "refusal_sentence",
    "render_text",
    "scope",
    "session_lineage",
    "short_ids",
    "stop_node",
    "take_one",
    "tighten",
    "to_json",
    "total_refusal",
]

__getattr__ = lazy.face(__name__, {
    "caps": ["CAPS_ENV", "cap_refusal", "chain_refusal", "parse_caps", "take_one", "tighten", "total_refusal"],
    "journaling": ["asked_label", "contribute", "mark_ended_by_parent", "mark_not_started", "mark_uncertain", "session_lineage"],
    "forest": ["Scoped", "find", "render_text", "scope", "short_ids", "to_json"],
    "lineage": ["LINEAGE_ENV", "cut_caller", "narrowings", "refusal_sentence"],
    "snapshot": ["load_forest"],
    "stop": ["find_node", "stop_node"],
})
