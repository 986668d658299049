"""Capability routing: who can run what, and where a blocked command can be sent.

Specification: ``spec/routing.md``. Layers:

* :mod:`murmur.routing.catalog` — the frozen value types (what is installed and running, the
  formation, holders, routes, the ranking key);
* :mod:`murmur.routing.ceiling` — the pure spending-ceiling rule (an agent reaches an agent
  capsule only under a positive ceiling), which the index shows and the call sites refuse by;
* :mod:`murmur.routing.index` — the pure decisions: who holds a binary or a label, which
  routes exist from a capsule or member, ready or blocked, and their order;
* :mod:`murmur.routing.render` — routes in words: ``mur agent who`` and the line of a
  denied-binary message (:mod:`murmur.grants`) that says where to send the work;
* :mod:`murmur.routing.gather` — the I/O edge: stores, running records, a roster, and the
  ready routes of a running member.

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use, so a command that asks routing nothing loads none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.routing.catalog import Capsule, Catalog, Formation, Member
    from murmur.routing.ceiling import Ceiling, ceiling_refusal
    from murmur.routing.gather import gather_catalog, member_call_refusal, member_refusal
    from murmur.routing.index import answer
    from murmur.routing.profile import started_profile
    from murmur.routing.render import delegate_line, to_json, to_text
    from murmur.routing.roost_allow import read_spawn_allow

__all__ = [
    "Capsule",
    "Catalog",
    "Ceiling",
    "Formation",
    "Member",
    "answer",
    "ceiling_refusal",
    "delegate_line",
    "gather_catalog",
    "member_call_refusal",
    "member_refusal",
    "read_spawn_allow",
    "started_profile",
    "to_json",
    "to_text",
]

__getattr__ = lazy.face(__name__, {
    "ceiling": ["Ceiling", "ceiling_refusal"],
    "gather": ["gather_catalog", "member_call_refusal", "member_refusal"],
    "index": ["answer"],
    "catalog": ["Capsule", "Catalog", "Formation", "Member"],
    "profile": ["started_profile"],
    "render": ["delegate_line", "to_json", "to_text"],
    "roost_allow": ["read_spawn_allow"],
})
