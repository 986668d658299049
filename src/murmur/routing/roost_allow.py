"""mur-roost's ``--spawn-allow`` as a running daemon reports it (spec/routing.md).

``GET /health`` answers ``{"spawn_allow": [NAME, ...]}`` (our addition, spec/roost.md), so the
authorization layer of a delegation route is read from the daemon, never guessed.
"""

from __future__ import annotations

import httpx

HEALTH_TIMEOUT = 1.0  # seconds: `mur agent who` never waits long on a gone daemon


def read_spawn_allow(roost_url: str | None, *, transport: httpx.BaseTransport | None = None,
                     ) -> tuple[str, ...] | None:
    """The names a running mur-roost at ``roost_url`` allows at the top level, or None when
    no URL is given, the daemon does not answer, or its answer has no such list."""
    if not roost_url or not roost_url.strip():
        return None
    try:
        with httpx.Client(base_url=roost_url.strip(), timeout=HEALTH_TIMEOUT, transport=transport,
                          trust_env=False) as client:
            r = client.get("/health")
        doc = r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    names = doc.get("spawn_allow") if isinstance(doc, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return tuple(names)
