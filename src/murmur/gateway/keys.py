"""The gateway's keys: one per upstream endpoint, named only by its reference.

Specification: ``spec/gateway.md`` "Keys". Pure. Two sources, one rule:

* the **table** (:class:`KeyTable`): the root's ``inference.api_key: ${VAR}``, resolved from
  the root's own environment when the gateway starts, once per endpoint origin (a formation
  launcher's: each member's);
* a session's **claim** (:class:`KeyClaim`): what its manifest names for its own provider
  (the endpoint's origin and the ``${VAR}`` reference), handed to the gateway in its
  registration, with ``VAR``'s value when the session's own environment holds it (granted
  through ``capabilities.env.allow``). mur-roost never resolves a reference (spec/roost.md).

A call to an origin takes the key of the nearest holder up the caller's chain (the caller,
its parent, ..., then the table) whose reference is the one the caller's manifest names for
that origin; a caller that names none for it takes the nearest holder's. No holder: no key
(the provider refuses the call, as it would have without the gateway). Nothing here shows a
value: the ``repr`` of every class and :meth:`KeyTable.describe` name references only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from murmur.gateway.route import origin_of

__all__ = ["KeyClaim", "KeyEntry", "KeyHolder", "KeyTable", "claim_of", "parse_claim", "reference_name"]

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
class KeyClaim:
    """What one session names for its own provider.

    Attributes:
        origin (str): the endpoint's ``scheme://host:port``.
        reference (str): ``${VAR}``, as its manifest writes it.
        value (str | None): ``VAR``'s value from the session's own environment; None when it
            holds none (the tree's key for the same origin and reference is used). Never shown.
    """

    origin: str
    reference: str
    value: str | None = attrs.field(default=None, repr=False)

    def wire(self) -> dict[str, str]:
        """The registration's ``key`` field (the value only when held)."""
        out = {"endpoint": self.origin, "reference": self.reference}
        if self.value is not None:
            out["value"] = self.value
        return out


class KeyHolder(Protocol):
    """A node of the caller's chain (:class:`murmur.gateway.nodes.Node`): its claim, if any."""

    @property
    def key(self) -> KeyClaim | None: ...


def claim_of(endpoint: str | None, reference: str | None, environ: Mapping[str, str]) -> KeyClaim | None:
    """A session's claim from its manifest's ``inference.endpoint`` and ``inference.api_key``
    and its own environment; None when either is missing, the endpoint is not http(s) or the
    reference is not ``${VAR}``. An empty value counts as none held."""
    origin = origin_of(endpoint) if endpoint else None
    name = reference_name(reference) if reference else None
    if origin is None or name is None:
        return None
    return KeyClaim(origin, f"${{{name}}}", environ.get(name) or None)


def parse_claim(field: object) -> KeyClaim | None:
    """A registration's ``key`` field (``{"endpoint", "reference", "value"?}`` or null).

    Raises:
        ValueError: when the field is not that shape (the message never quotes a value).
    """
    if field is None:
        return None
    if not isinstance(field, dict) or not set(field) <= {"endpoint", "reference", "value"}:
        raise ValueError("key is not {endpoint, reference, value?}")
    endpoint, reference, value = field.get("endpoint"), field.get("reference"), field.get("value")
    origin = origin_of(endpoint) if isinstance(endpoint, str) else None
    name = reference_name(reference) if isinstance(reference, str) else None
    if origin is None or name is None:
        raise ValueError("key names no http(s) endpoint or no ${VAR} reference")
    if value is not None and (not isinstance(value, str) or not value or not value.isprintable()):
        raise ValueError("key's value is not a non-empty printable string")
    return KeyClaim(origin, f"${{{name}}}", value)


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

    def key_for(self, origin: str, chain: Sequence[KeyHolder] = ()) -> KeyEntry | None:
        """The key a call to ``origin`` carries, or None.

        ``chain``: the calling node and its ancestors, nearest first (:meth:`Tree.chain
        <murmur.gateway.nodes.Tree.chain>`); empty: the table's key. The nearest claim with
        a value for ``origin`` wins, then the table's, each only when its reference is the
        one the caller names for ``origin`` (a caller naming none takes the nearest).
        """
        mine = chain[0].key if chain else None
        wanted = mine.reference if mine is not None and mine.origin == origin else None
        for holder in chain:
            claim = holder.key
            if (claim is not None and claim.value is not None and claim.origin == origin
                    and (wanted is None or claim.reference == wanted)):
                return KeyEntry(claim.reference, claim.value)
        entry = self.entries.get(origin)
        if entry is not None and (wanted is None or entry.reference == wanted):
            return entry
        return None

    def describe(self) -> dict[str, str]:
        """Origin -> reference, for records (never a value)."""
        return {origin: entry.reference for origin, entry in sorted(self.entries.items())}
