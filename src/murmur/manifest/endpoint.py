"""Which ``inference.endpoint`` URLs a manifest may name (pure; spec/manifest.md, the `inference.endpoint` row).

https to any host; http only to loopback. Both the value rules (a literal endpoint) and the
reference resolver (an endpoint that is only known once ``${VAR}`` is resolved) ask here.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from murmur.manifest.netallow import is_loopback_host


def endpoint_problem(text: str) -> str | None:
    """Why an ``inference.endpoint`` is refused: https anywhere, http only to loopback."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname:
        if is_loopback_host(parts.hostname):
            return None
        return "uses http to a host that is not loopback; use https"
    return "must be an https:// URL (or http:// to localhost or a loopback address)"
