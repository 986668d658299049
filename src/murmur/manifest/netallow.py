"""``network.allow`` / ``peer_fetch.allow`` entries: the one home of their forms and coverage.

Specification: ``spec/manifest.md``, "``capabilities``" (the entry forms, E-CAP-001), and
``spec/roost.md``, "Spawn envelope" (coverage). The manifest rules, the spawn-envelope referee
and the formation call engine's door check all ask this module.

An entry is a bare host (``h``), a host and port (``h:p``) or a URL (``http[s]://h[:p]``, no
path, query, fragment or user information); IPv6 literals are bracketed. Coverage: a bare host
covers every scheme and every port; ``h:p`` covers both schemes on that port; a scheme form
covers only itself (its port is the scheme's default unless written). Hosts compare
case-insensitively.

Everything here is pure.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import attrs

__all__ = [
    "DEFAULT_PORTS",
    "NetEntry",
    "allow_entry_problem",
    "covers",
    "entry_covers",
    "host_ok",
    "is_loopback_host",
    "parse_net_entry",
    "url_target",
]

DEFAULT_PORTS = {"http": 80, "https": 443}
"""The port a URL entry (or a URL) means when it writes none, by scheme."""

_HOST_LABEL_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


@attrs.frozen
class NetEntry:
    """A parsed network entry, or the target of a URL.

    Attributes:
        host (str): lower-cased host; an IPv6 literal without its brackets.
        scheme (str | None): ``http`` / ``https``; None means "every scheme".
        port (int | None): the port; None means "every port".
    """

    host: str
    scheme: str | None = None
    port: int | None = None


def host_ok(host: str) -> bool:
    """True for a DNS name, an IPv4 literal, or a bracketed IPv6 literal."""
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    if len(host) > 253 or not host:
        return False
    return all(_HOST_LABEL_RE.fullmatch(label) for label in host.rstrip(".").split("."))


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` (any case) or a loopback IP literal (``127.0.0.0/8``, ``::1``).

    Args:
        host (str): a URL's host as ``urlsplit(...).hostname`` gives it (IPv6 unbracketed).
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _port_ok(text: str) -> bool:
    return text.isdigit() and 1 <= int(text) <= 65535


def allow_entry_problem(entry: str) -> str | None:
    """Why a ``network.allow`` / ``peer_fetch.allow`` entry is unparseable, or None (E-CAP-001).

    Forms: ``https://host[:port]`` or ``http://host[:port]`` (no path, query or fragment),
    a bare ``host``, or ``host:port``. IPv6 literals are bracketed.

    Args:
        entry (str): the entry exactly as written (surrounding spaces are a problem).

    Returns:
        str | None: the rest of a sentence that starts with the entry
        (e.g. ``"has an invalid port (1-65535)"``), or None when the entry is well formed.
    """
    if not entry.strip() or entry != entry.strip():
        return "is blank or has surrounding spaces"
    if "://" in entry:
        scheme = entry.split("://", 1)[0]
        if scheme not in DEFAULT_PORTS:
            return f"uses scheme `{scheme}`; only http and https are allowed"
        try:
            parts = urlsplit(entry)
            port = parts.port
        except ValueError:
            return "has an invalid port"
        if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in entry or "#" in entry:
            return "has a path, query or fragment; give only scheme, host and port"
        if parts.username is not None or parts.password is not None:
            return "carries user information"
        netloc = parts.netloc
        host = netloc.rsplit(":", 1)[0] if port is not None or netloc.endswith(":") else netloc
        if netloc.endswith(":"):
            return "has an empty port"
        if not host_ok(host):
            return f"has an invalid host `{host}`"
        return None
    if entry.startswith("["):
        host, closed, rest = entry.partition("]")
        if not closed:
            return "has an unclosed `[`"
        host += "]"
        if rest and not (rest.startswith(":") and _port_ok(rest[1:])):
            return "has an invalid port"
        return None if host_ok(host) else f"has an invalid host `{host}`"
    host, sep, port_text = entry.partition(":")
    if sep and not _port_ok(port_text):
        return "has an invalid port (1-65535)"
    if not host_ok(host):
        return f"has an invalid host `{host}`"
    return None


def parse_net_entry(entry: str) -> NetEntry | None:
    """Parse an allow entry (surrounding spaces ignored).

    Args:
        entry (str): a ``network.allow`` / ``peer_fetch.allow`` entry.

    Returns:
        NetEntry | None: None exactly when :func:`allow_entry_problem` refuses the stripped
        entry; a URL entry gets its scheme's default port when it writes none.
    """
    text = entry.strip()
    if allow_entry_problem(text) is not None:
        return None
    if "://" in text:
        target = url_target(text)
        return target if target is not None and target.scheme in DEFAULT_PORTS else None
    host, port_text = text, ""
    if text.startswith("["):  # bracketed IPv6 literal, optionally with a port
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:]
    elif ":" in text:
        host, _, port_text = text.partition(":")
    return NetEntry(host.lower(), None, int(port_text) if port_text else None)


def url_target(url: str) -> NetEntry | None:
    """Scheme, host and port a concrete URL reaches (its path is ignored), or None if unusable.

    Args:
        url (str): e.g. a member door's ``http://127.0.0.1:41234``.

    Returns:
        NetEntry | None: ``port`` is the written port, else the scheme's default, else 0 for
        a scheme without one; None for an invalid port or a URL without a host.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return NetEntry(parts.hostname.lower(), scheme, port or DEFAULT_PORTS.get(scheme, 0))


def entry_covers(parent: NetEntry, child: NetEntry) -> bool:
    """Whether a parsed entry covers another parsed entry or a :func:`url_target` (section 1.2)."""
    if parent.host != child.host:
        return False
    if parent.scheme is not None and parent.scheme != child.scheme:
        return False
    return parent.port is None or parent.port == child.port


def covers(parent_entry: str, child_entry: str) -> bool:
    """Whether one parent allow entry covers one child entry (spec/roost.md, "Spawn envelope").

    Args:
        parent_entry (str): the entry held (e.g. by the spawning capsule).
        child_entry (str): the entry asked for.

    Returns:
        bool: by :func:`entry_covers` when both parse; otherwise only an identical string
        (spaces around it ignored) covers an unparseable entry.
    """
    parent, child = parse_net_entry(parent_entry), parse_net_entry(child_entry)
    if parent is None or child is None:
        return parent_entry.strip() == child_entry.strip()
    return entry_covers(parent, child)
