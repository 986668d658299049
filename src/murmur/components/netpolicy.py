"""A component's effective ``network.allow``: narrowing below the capsule's ceiling (pure).

A tool's or driver's ``artifacts[].capabilities.network.allow`` replaces the ceiling for that
artifact, clamped by it: an entry the ceiling does not cover (:func:`murmur.manifest.covers`)
is dropped with ``W-SEC-007`` naming the artifact and the entry; ``allow: []`` narrows to
nothing; no block keeps the ceiling. A hook has only its own grant (none: deny all).
Specification: ``spec/components.md`` ("Outgoing HTTP").
"""

from __future__ import annotations

from collections.abc import Sequence

from murmur.diagnostics import Diagnostic, error
from murmur.manifest import Manifest, covers
from murmur.manifest.model import ArtifactRef


def effective_allow(ceiling: Sequence[str], declared: Sequence[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(kept, dropped)``: the artifact's rules (or the ceiling when it declares none)."""
    if declared is None:
        return tuple(ceiling), ()
    kept = tuple(d for d in declared if any(covers(c, d) for c in ceiling))
    return kept, tuple(d for d in declared if d not in kept)


def entry_allow(manifest: Manifest, entry: ArtifactRef) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """:func:`effective_allow` for one ``artifacts[]`` entry (a hook: its own grant only)."""
    net = entry.capabilities.network if entry.capabilities else None
    declared = net.allow if net is not None else None
    if entry.runtime == "hook":
        return tuple(declared or ()), ()
    return effective_allow(manifest.network_allow, declared)


def narrowing_warnings(manifest: Manifest, *, path: str | None = None) -> list[Diagnostic]:
    """One ``W-SEC-007`` per dropped narrowing entry, naming the artifact and the entry."""
    out: list[Diagnostic] = []
    for entry in manifest.artifacts:
        for dropped in entry_allow(manifest, entry)[1]:
            out.append(error(
                "W-SEC-007", f"artifact `{entry.name}`: network.allow entry `{dropped}` is not covered "
                "by the capsule's capabilities.network.allow and was dropped", path=path,
                hint="write the narrowing at least as specific as a ceiling entry, or widen the ceiling"))
    return out
