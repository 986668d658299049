"""The I/O edge of routing: read the stores, the running records and a roster into a
:class:`~murmur.routing.catalog.Catalog` (``spec/routing.md``).

Nothing is cached: every question reads the files again. Entries that fail verification
and unreadable running records are reported as diagnostics beside the catalog, never
raised, so one bad entry does not hide the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from murmur.diagnostics import Diagnostic, error
from murmur.grants import denied_binary
from murmur.manifest import Manifest, load_manifest
from murmur.routing.catalog import Capsule, Catalog, Formation, Member, State
from murmur.routing.ceiling import Ceiling
from murmur.routing.index import Asker, holds, routes_for
from murmur.routing.profile import edited
from murmur.routing.render import delegate_line

__all__ = ["Gathered", "gather_catalog", "member_refusal", "session_capsules"]


@attrs.frozen
class Gathered:
    """A catalog and what could not be read while building it."""

    catalog: Catalog
    problems: tuple[Diagnostic, ...] = ()
    edited_why: dict[str, str] = attrs.field(factory=dict)  # session id -> reason


def gather_catalog(*, project_dir: Path, formation: Formation | None = None) -> Gathered:
    """Build the catalog from the project and global stores, running records, and a roster.

    Args:
        project_dir (Path): whose project store (and ``murmur.lock``) to read.
        formation (Formation | None): an admitted roster's members and edges to include (the
            caller admits it, as ``mur run --roster`` would); a member whose capsule name and
            version are installed or running gets that catalog entry (and so its state).
    """
    from murmur.registry import scan_installed
    from murmur.session import list_running

    listing = scan_installed(project_dir=project_dir)
    problems: list[Diagnostic] = list(listing.problems)
    census = list_running(prune=False)
    for path, why in census.unreadable:
        problems.append(error("E-RUN-028", f"the running record {path} cannot be read: {why}",
                              path=str(path)))
    live: dict[tuple[str, str], list[str]] = {}
    flagged: dict[str, str] = {}
    source_only: dict[tuple[str, str], Manifest] = {}
    for rec in census.live:
        live.setdefault((rec.name, rec.version), []).append(rec.session_id)
        changed = edited(rec.to_json())
        if changed is not None:
            flagged[rec.session_id] = changed
        if rec.artifact is None and rec.manifest_path:
            manifest = _started_manifest(rec.manifest_path)
            if manifest is not None:
                source_only.setdefault((rec.name, rec.version), manifest)
    capsules: list[Capsule] = []
    seen: set[tuple[str, str]] = set()
    for item in listing.items:
        key = (item.name, item.version)
        if key in seen:
            continue  # the project store shadows the global one
        seen.add(key)
        capsules.append(_capsule(item.name, item.version, item.manifest, item.scope, live, flagged))
    for key, manifest in source_only.items():
        if key not in seen:
            seen.add(key)
            capsules.append(_capsule(key[0], key[1], manifest, None, live, flagged))
    known = _known_members(formation, capsules) if formation is not None else None
    in_global = frozenset((i.name, i.version) for i in listing.items if i.scope == "global")
    return Gathered(Catalog(tuple(capsules), known, global_store=in_global,
                            effective_spawn=_effective_spawn(census.live)),
                    tuple(problems), flagged)


def _effective_spawn(live: Iterable[Any]) -> dict[str, tuple[str, ...]]:
    """Capsule name -> the spawn set its live sessions may use (the intersection of their
    lineage's ``spawn``, spec/tree.md): a route is ready only when it works from each."""
    out: dict[str, tuple[str, ...]] = {}
    for rec in live:
        lineage = rec.lineage if isinstance(rec.lineage, dict) else None
        spawn = lineage.get("spawn") if lineage is not None else None
        if not isinstance(spawn, list):
            continue
        names = tuple(str(n) for n in spawn)
        out[rec.name] = tuple(n for n in out[rec.name] if n in names) if rec.name in out else names
    return out


def _capsule(name: str, version: str, manifest: Manifest, store: str | None,
             live: dict[tuple[str, str], list[str]], flagged: dict[str, str]) -> Capsule:
    sessions = tuple(live.get((name, version), ()))
    return Capsule(name, version, manifest, State.RUNNING if sessions else State.INSTALLED,
                   store, sessions, tuple(s for s in sessions if s in flagged))


def _started_manifest(path: str) -> Manifest | None:
    try:
        return load_manifest(Path(path))
    except Exception:  # a source manifest edited into something invalid is just not shown
        return None


def _known_members(formation: Formation, capsules: Sequence[Capsule]) -> Formation:
    """``formation`` with each member's capsule swapped for the catalog's entry, if any."""
    by_key = {(c.name, c.version): c for c in capsules}
    members = tuple(attrs.evolve(m, capsule=by_key.get((m.capsule.name, m.capsule.version), m.capsule))
                    for m in formation.members)
    return attrs.evolve(formation, members=members)


# --- inside a running member ------------------------------------------------------------


def session_capsules(formation_id: str, names: Sequence[str]) -> dict[str, tuple[Capsule, tuple[str, ...]]]:
    """The running members ``names`` of one formation: member -> (capsule, its callees).

    Reads the running records; the capsule's manifest is the one each session loaded.
    """
    from murmur.session import list_running

    wanted = set(names)
    out: dict[str, tuple[Capsule, tuple[str, ...]]] = {}
    for rec in list_running(prune=False).live:
        if rec.formation_id != formation_id or rec.member is None:
            continue
        if rec.member not in wanted and wanted:
            continue
        manifest = _started_manifest(rec.manifest_path) if rec.manifest_path else None
        if manifest is None:
            continue
        cap = Capsule(rec.name, rec.version, manifest, State.RUNNING, sessions=(rec.session_id,))
        out[rec.member] = (cap, tuple(rec.callees or ()))
    return out


def member_refusal(member: str, callees: Sequence[str], formation_id: str,
                   manifest: Manifest) -> Callable[..., str]:
    """The denied-binary message maker for a running formation member.

    The routes are those the member may already use: its own callees (and what they reach
    through theirs), read from the formation's running records when the binary is asked
    for. Delegation is never a ready route here: the spawn envelope refuses a child that
    holds a binary its parent lacks.
    """

    def refuse(binary: str, *, kernel: bool = False) -> str:
        running = session_capsules(formation_id, ())
        me = Member(member, Capsule(manifest.name, "", manifest), False, tuple(callees))
        others = [Member(name, cap, False, tuple(calls)) for name, (cap, calls) in running.items()
                  if name != member]
        formation = Formation("roster.yaml", (me, *others))
        catalog = Catalog((), formation)
        ready, _blocked = routes_for(catalog, Asker(member, me.capsule, me), holds(binary), binary=binary)
        return denied_binary(binary, member, manifest.shell_allow, delegate_line(ready), kernel=kernel)

    return refuse


def member_call_refusal(
    formation_id: str, asker: Manifest, member: str,
    known: Mapping[str, tuple[str, Ceiling | None]] | None = None,
) -> str | None:
    """Why an agent member's ``call-member`` to ``member`` is refused for want of a spending
    ceiling (spec/routing.md "Spending ceilings"), or None. The callee is judged by the
    manifest its running session loaded (its running record); a callee with no readable
    record yet, by ``known`` (member -> its capsule name and ceiling, None for no agent: what
    the formation's launcher read from its admitted manifest, the channel's callees line). A
    callee neither names is not judged here. Blocking (reads the running records): call it in
    a worker thread."""
    from murmur.routing.ceiling import ceiling_refusal, refusal_for_ceiling

    if asker.inference is None:
        return None
    found = session_capsules(formation_id, (member,)).get(member)
    if found is not None:
        return ceiling_refusal("call-member", asker, found[0].manifest, member, "relaunch the formation")
    if known is not None and member in known:
        capsule, ceiling = known[member]
        return refusal_for_ceiling("call-member", asker, ceiling, capsule, member, "relaunch the formation")
    return None
