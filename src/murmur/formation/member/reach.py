"""Whether a member's ``capabilities.network.allow`` reaches another member's door (pure).

Specification: ``spec/formation.md`` "`call-member`". Member doors listen on loopback
``http`` at a port chosen at launch, so a caller reaches one only through an entry that covers
``127.0.0.1`` at any port; ``localhost`` and ``127.0.0.1`` name the same loopback host.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from murmur.manifest import NetEntry, entry_covers, parse_net_entry, url_target

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1"})
"""Bare ``network.allow`` hosts that reach a member door (doors bind 127.0.0.1)."""


def _loopback_as_one(entry: NetEntry) -> NetEntry:
    """``entry`` with ``localhost`` spelled ``127.0.0.1``: both name the one loopback host."""
    return attrs.evolve(entry, host="127.0.0.1") if entry.host in LOOPBACK_HOSTS else entry


def reaches_door(allow: Iterable[str], url: str) -> bool:
    """Whether one of ``allow`` (``capabilities.network.allow``) reaches the door ``url``.

    Coverage is :func:`murmur.manifest.netallow.entry_covers` (a bare host covers every
    scheme and port; ``host:port`` that port; a URL entry only its own scheme, host and
    port), except that ``localhost`` and ``127.0.0.1`` name the same loopback host.
    Unparseable entries reach nothing.
    """
    target = url_target(url)
    if target is None:
        return False
    target = _loopback_as_one(target)
    for entry in allow:
        parsed = parse_net_entry(entry)
        if parsed is not None and entry_covers(_loopback_as_one(parsed), target):
            return True
    return False


def reaches_member_doors(allow: Iterable[str]) -> bool:
    """Whether ``allow`` can reach a member door at all: a bare loopback host (W-RUN-008).

    Doors listen on loopback ``http`` at a port chosen at launch, so only an entry without a
    port reaches them whatever the port is.
    """
    for entry in allow:
        parsed = parse_net_entry(entry)
        if parsed is not None and parsed.host in LOOPBACK_HOSTS and parsed.port is None and parsed.scheme in (None, "http"):
            return True
    return False
