"""The gateway's key table: one key per upstream endpoint, named only by its reference.

Specification: ``spec/gateway.md`` "Keys". The root resolves ``inference.api_key: ${VAR}``
from its own environment when the gateway starts, once per endpoint; the table never shows a
value (its ``repr`` and :meth:`KeyTable.describe` name references only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from murmur.gateway.route import origin_of

__all__ = ["KeyEntry", "KeyTable", "reference_name"]

_REF = re.compile(r"^\$\{([A-Z_][A-Z0-9_]*)\}$")


def reference_name(reference: str) -> str | None:
    """``${ANTHROPIC_API_KEY}`` -> ``ANTHROPIC_API_KEY``; None for anything else."""
    found = _REF.match(reference.strip())
    return found.group(1) if found else None


@attrs.frozen
class KeyEntry:
    """One endpoint's key: its reference (shown) and its value (never shown)."""

    reference: str
    value: str = attrs.field(repr=False)


@attrs.frozen
class KeyTable:
    """Origin (``scheme://host:port``) -> :class:`KeyEntry`. Immutable; :meth:`with_key` adds."""

    entries: Mapping[str, KeyEntry] = attrs.field(factory=dict, repr=lambda e: repr(sorted(e)))

    def with_key(self, endpoint: str, reference: str, environ: Mapping[str, str]) -> KeyTable:
        """This table plus ``endpoint``'s key, resolved from ``environ``.

        An endpoint already in the table keeps its first key. A reference that is not
        ``${VAR}``, or a variable ``environ`` lacks, adds nothing (the call then goes out
        without a key and the provider refuses it, as it would have without the gateway).

        Raises:
            ValueError: when ``endpoint`` is not an http(s) URL.
        """
        origin = origin_of(endpoint)
        if origin is None:
            raise ValueError(f"not an http(s) endpoint: {endpoint!r}")
        name = reference_name(reference)
        if origin in self.entries or name is None or not environ.get(name):
            return self
        return KeyTable({**self.entries, origin: KeyEntry(f"${{{name}}}", environ[name])})

    def key_for(self, origin: str) -> KeyEntry | None:
        """The key for an origin, or None."""
        return self.entries.get(origin)

    def describe(self) -> dict[str, str]:
        """Origin -> reference, for records (never a value)."""
        return {origin: entry.reference for origin, entry in sorted(self.entries.items())}
