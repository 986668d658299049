"""``mur agent who`` inside a session, answered through the capability socket (spec/links.md).

The asker is the session's own capsule; its routes use the session's effective spawn set
(not only its manifest's), and only ready routes are shown: blocked routes are the
operator's view, never a capsule's (spec/routing.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import attrs


def session_who(name: str, spawn: Sequence[str], can: str | None, as_json: bool, *,
                project_dir: Path) -> tuple[int, str]:
    """(exit status, output) of ``mur agent who [--can X] [--json]`` for session capsule ``name``.

    Exit 0 when a capsule matched, 1 when none did (as outside, spec/routing.md).
    """
    from murmur.routing import answer, gather_catalog, to_json, to_text

    got = gather_catalog(project_dir=project_dir)
    effective = dict(got.catalog.effective_spawn or {})
    effective[name] = tuple(spawn)  # this session's own set, whatever other sessions of it hold
    catalog = attrs.evolve(got.catalog, effective_spawn=effective)
    try:
        ans = answer(catalog, can=can, asking=name if can else None)
    except KeyError:
        ans = answer(catalog, can=can)
    ans = attrs.evolve(ans, blocked=())
    if as_json:
        doc = to_json(ans, can=can, skill=None, asking=name if can else None, roster=None)
        return (0 if ans.holders or ans.indirect else 1), json.dumps(doc) + "\n"
    return (0 if ans.holders or ans.indirect else 1), to_text(ans, can=can, skill=None, show_blocked=False)
