"""Where a gateway request goes: the upstream a path names, and the key header it carries.

Specification: ``spec/gateway.md`` "Addresses". Pure: no I/O.

A session reaches an upstream endpoint through the gateway at
``http://127.0.0.1:<port>/up/<scheme>/<host>[:<port>]/<path>``; so
``…/up/https/api.anthropic.com/v1/messages`` goes to ``https://api.anthropic.com/v1/messages``.
A client's base URL is the gateway address with the endpoint's origin appended
(:func:`base_url`), so every client that appends its own paths (Claude Code's
``ANTHROPIC_BASE_URL``, Codex's provider ``base_url``, the built-in drivers) works unchanged.
"""

from __future__ import annotations

import functools
from urllib.parse import urlsplit

import attrs

from murmur.manifest.netallow import DEFAULT_PORTS, NetEntry

__all__ = ["PREFIX", "Upstream", "base_url", "key_headers", "origin_of", "parse_path"]

PREFIX = "/up/"
"""Every proxied request's path starts with this."""


@attrs.frozen
class Upstream:
    """One request's real destination.

    Attributes:
        origin (str): ``scheme://host:port`` (port always written), the key table's index.
        url (str): the full upstream URL, query string included.
        target (NetEntry): scheme, host and port, for the ``network.allow`` check.
    """

    origin: str
    url: str
    target: NetEntry


@functools.lru_cache(maxsize=1024)
def origin_of(endpoint: str) -> str | None:
    """``https://api.anthropic.com/v1`` -> ``https://api.anthropic.com:443``; None if unusable.

    Pure, so its answers are remembered (a gateway asks for the same few on every call)."""
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port or DEFAULT_PORTS[scheme]}"


def base_url(gateway: str, endpoint: str) -> str:
    """The URL a client uses instead of ``endpoint`` (its path kept), through ``gateway``.

    Raises:
        ValueError: when ``endpoint`` is not an http(s) URL with a host.
    """
    origin = origin_of(endpoint)
    if origin is None:
        raise ValueError(f"not an http(s) endpoint: {endpoint!r}")
    scheme, _, authority = origin.partition("://")
    path = urlsplit(endpoint).path.rstrip("/")
    return f"{gateway.rstrip('/')}{PREFIX}{scheme}/{authority}{path}"


def parse_path(path: str, query: bytes = b"") -> Upstream | None:
    """The upstream a gateway path names, or None when it names none.

    Args:
        path (str): the request path, e.g. ``/up/https/api.openai.com:443/v1/responses``.
        query (bytes): the raw query string (kept as sent).
    """
    if not path.startswith(PREFIX):
        return None
    scheme, _, rest = path[len(PREFIX) :].partition("/")
    authority, slash, tail = rest.partition("/")
    if scheme not in DEFAULT_PORTS or not authority:
        return None
    origin = origin_of(f"{scheme}://{authority}")
    if origin is None:
        return None
    url = f"{origin}{slash}{tail}" + (f"?{query.decode('latin-1')}" if query else "")
    return Upstream(origin, url, _target(origin))


@functools.lru_cache(maxsize=1024)
def _target(origin: str) -> NetEntry:
    parts = urlsplit(origin)
    assert parts.hostname is not None and parts.port is not None  # origin_of wrote both
    return NetEntry(parts.hostname, parts.scheme, parts.port)


def key_headers(path: str, headers: dict[str, str], key: str) -> dict[str, str]:
    """The header that carries ``key`` to the provider the request speaks to.

    The Anthropic Messages API (a path ending ``/messages``, or any request that carries
    ``anthropic-version``) takes ``x-api-key``; the OpenAI APIs take
    ``Authorization: Bearer``. Pure.
    """
    if "anthropic-version" in headers or path.rstrip("/").endswith("/messages"):
        return {"x-api-key": key}
    return {"authorization": f"Bearer {key}"}
