"""The routing index: who holds what, and the routes from one capsule or member (pure).

``spec/routing.md``. Three layers, kept apart:

* **hard** — what a capsule's manifest grants and the runtime enforces
  (``capabilities.shell.allow`` decides who *can* run a binary);
* **soft** — ``description``, skill artifacts, ``inference.model``, a member's name and
  entry role: they match ``--skill`` and explain a row, and never decide a route;
* **authorization** — the roster's edges (``call-member`` routes) and the asking capsule's
  ``capabilities.spawn.allow`` with the spawn envelope and, when known, mur-roost's
  ``--spawn-allow`` (delegation routes). Nothing is inferred.

Every function here reads only its arguments.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Any

from murmur.grants import grant_entry
from murmur.roost import Envelope, lower, referee
from murmur.routing.catalog import (
    Answer,
    Capsule,
    Catalog,
    Formation,
    Holder,
    Member,
    RankKey,
    Route,
    RouteKind,
    RouteState,
)
from murmur.routing.ceiling import block, ceiling_of

__all__ = [
    "Asker",
    "answer",
    "holds",
    "matches_label",
    "rank_key",
    "resolve_asker",
    "routes_for",
    "skills_of",
]

Job = Callable[[Capsule, Member | None], bool]
"""Whether a capsule (as a member, when it is one) can do the job asked about."""


def spawn_allow_flags(names: Sequence[str]) -> str:
    """mur-roost's allow list as it accepts it: one ``--spawn-allow NAME`` per name, never a
    comma list (which mur-roost refuses with ``E-RST-001``; spec/roost.md) (pure)."""
    return " ".join(f"--spawn-allow {n}" for n in dict.fromkeys(names))


def holds(binary: str) -> Job:
    """The hard test: ``binary`` is in ``capabilities.shell.allow``."""

    def test(capsule: Capsule, member: Member | None) -> bool:
        return binary in capsule.manifest.shell_allow

    return test


def skills_of(capsule: Capsule) -> tuple[str, ...]:
    """The names of the capsule's skill artifacts (``artifacts[].runtime: skill``)."""
    return tuple(a.name for a in capsule.manifest.artifacts if a.runtime == "skill")


def matches_label(label: str) -> Job:
    """The soft test: ``label`` (case-insensitive) is part of a skill artifact's name, the
    capsule's name, its member's name, a word of its description, or its model."""
    want = label.strip().lower()

    def test(capsule: Capsule, member: Member | None) -> bool:
        m = capsule.manifest
        words = (m.description or "").lower().replace(",", " ").replace(".", " ").split()
        names = [*skills_of(capsule), capsule.name, member.name if member else ""]
        model = (m.inference.model or "") if m.inference else ""
        return bool(want) and (
            any(want in n.lower() for n in names if n) or want in words or want == model.lower()
        )

    return test


def _scope_depth(capsule: Capsule) -> int:
    fs = capsule.manifest.capabilities.filesystem
    if fs is None:
        return 0
    norm = posixpath.normpath(fs.scope.strip() or ".")
    return 0 if norm == "." else len([p for p in norm.split("/") if p])


def rank_key(capsule: Capsule, *, name: str, binary: str | None) -> RankKey:
    """The least-privileged key of a target (see :class:`RankKey`).

    Args:
        capsule (Capsule): the target's capsule.
        name (str): the route's target name (the last tie-breaker).
        binary (str | None): the binary asked for (not counted as "other").
    """
    fs = capsule.manifest.capabilities.filesystem
    return RankKey(
        other_binaries=len([b for b in capsule.manifest.shell_allow if b != binary]),
        scope_breadth=-_scope_depth(capsule),
        workdir_exec=bool(fs and fs.workdir_exec),
        network_hosts=len(capsule.manifest.network_allow),
        spawns=bool(capsule.manifest.spawn_allow),
        name=name,
    )


# --- the asking capsule ------------------------------------------------------------------


class Asker:
    """Who the routes are for: a roster member, or a capsule outside any formation."""

    def __init__(self, label: str, capsule: Capsule, member: Member | None) -> None:
        self.label = label
        self.capsule = capsule
        self.member = member


def resolve_asker(catalog: Catalog, name: str) -> Asker | None:
    """``--as NAME``: a member of the catalog's formation first, then a capsule by name.

    A capsule name that exactly one member runs is that member. None when unknown.
    """
    f = catalog.formation
    if f is not None:
        m = f.member(name)
        if m is not None:
            return Asker(m.name, m.capsule, m)
        running = [m for m in f.members if m.capsule.name == name]
        if len(running) == 1:
            return Asker(running[0].name, running[0].capsule, running[0])
    found = [c for c in catalog.capsules if c.name == name]
    if not found:
        return None
    return Asker(name, _newest(found), None)


def _newest(capsules: Sequence[Capsule]) -> Capsule:
    running = [c for c in capsules if c.sessions]
    pool = running or list(capsules)
    return max(pool, key=lambda c: _version_key(c.version))


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    parts: list[tuple[int, int | str]] = []
    for piece in version.replace("-", ".").replace("+", ".").split("."):
        parts.append((0, int(piece)) if piece.isdigit() else (1, piece))
    return tuple(parts)


# --- holders -----------------------------------------------------------------------------


def holders(catalog: Catalog, job: Job | None) -> tuple[Holder, ...]:
    """Rows for the query: formation members (roster order), then every other capsule
    (by name, newest version first) — only those ``job`` accepts when given."""
    out: list[Holder] = []
    in_formation: set[tuple[str, str]] = set()
    if catalog.formation is not None:
        for m in catalog.formation.members:
            in_formation.add((m.capsule.name, m.capsule.version))
            if job is None or job(m.capsule, m):
                out.append(Holder(m.name, m.capsule, m))
    rest = sorted((c for c in catalog.capsules if (c.name, c.version) not in in_formation),
                  key=lambda c: _version_key(c.version), reverse=True)
    rest.sort(key=lambda c: c.name)
    for c in rest:
        if job is None or job(c, None):
            out.append(Holder(c.name, c))
    return tuple(out)


# --- routes ------------------------------------------------------------------------------


def _reach(formation: Formation, start: Member, asker: str, job: Job) -> tuple[str, ...]:
    """Members that can do the job reachable from ``start`` over roster edges (``start``
    itself first when it can), never passing through the asker; roster order after it."""
    if job(start.capsule, start):
        return (start.name,)
    seen = {start.name, asker}
    frontier = [start]
    found: list[str] = []
    while frontier:
        nxt: list[Member] = []
        for m in frontier:
            for name in m.callees:
                callee = formation.member(name)
                if callee is None or name in seen:
                    continue
                seen.add(name)
                if job(callee.capsule, callee):
                    found.append(name)
                else:
                    nxt.append(callee)
        frontier = nxt
    order = {m.name: i for i, m in enumerate(formation.members)}
    return tuple(sorted(found, key=order.__getitem__))


def _budget_block(asker: Asker, target: Capsule, label: str, where: str) -> tuple[str, str] | None:
    """An agent may route to an agent capsule only under a spending ceiling (the decision is
    :func:`murmur.routing.ceiling.block`, which the call sites refuse by)."""
    return block(asker.capsule.manifest, target.manifest, label, where)


def _member_routes(catalog: Catalog, asker: Asker, job: Job, binary: str | None) -> list[Route]:
    f = catalog.formation
    assert f is not None and asker.member is not None
    routes: list[Route] = []
    me = asker.member
    for t in f.members:
        if t.name == me.name:
            continue
        via = (t.name,) if t.entry and job(t.capsule, t) else () if t.entry else _reach(f, t, me.name, job)
        if not via:
            continue  # (the entry member is a target only when it holds the job itself)
        key = rank_key(t.capsule, name=t.name, binary=binary)
        blocked = _member_block(f, asker, t)
        if blocked is None:
            blocked = _budget_block(asker, t.capsule, t.name, "relaunch the formation")
        if blocked is None:
            routes.append(Route(RouteKind.CALL_MEMBER, t.name, via, RouteState.READY, key,
                                ceiling=ceiling_of(t.capsule.manifest)))
        else:
            routes.append(Route(RouteKind.CALL_MEMBER, t.name, via, RouteState.BLOCKED, key,
                                reason=blocked[0], authorize=blocked[1], ceiling=ceiling_of(t.capsule.manifest)))
    return routes


def _member_block(f: Formation, asker: Asker, t: Member) -> tuple[str, str] | None:
    me = asker.member
    assert me is not None
    if t.name in me.callees:
        return None
    if t.entry:
        return (
            f"'{t.name}' is the entry member, and no member may call the entry member",
            "none: a roster never lets a member call its entry member; give the work to a peer",
        )
    if not t.capsule.manifest.accepts_peer_tasks:
        return (
            f"'{t.name}' does not serve peers (exports.peer_tasks.accept is not true)",
            f"set `exports.peer_tasks.accept: true` in {t.capsule.name}'s murmur.yaml, reinstall "
            f"it, add `- {{from: {me.name}, to: [{t.name}]}}` to reachability in {f.roster}, "
            "and relaunch the formation",
        )
    if f.reachability_all:
        return (
            f"'{me.name}' does not serve peers, so `reachability: all` gives it no edges",
            f"replace `reachability: all` in {f.roster} with rules that include "
            f"`- {{from: {me.name}, to: [{t.name}]}}`, and relaunch the formation",
        )
    return (
        f"{f.roster} has no reachability edge from '{me.name}' to '{t.name}'",
        f"add `- {{from: {me.name}, to: [{t.name}]}}` to reachability in {f.roster}, and "
        "relaunch the formation",
    )


def _delegate_routes(catalog: Catalog, asker: Asker, job: Job, binary: str | None) -> list[Route]:
    routes: list[Route] = []
    by_name: dict[str, list[Capsule]] = {}
    for c in catalog.capsules:
        by_name.setdefault(c.name, []).append(c)
    parent = lower(asker.capsule.manifest)
    allow = asker.capsule.manifest.spawn_allow
    for name in sorted(by_name):
        if name == asker.capsule.name:
            continue
        target = _newest(by_name[name])
        if not job(target, None):
            continue
        key = rank_key(target, name=name, binary=binary)
        blocked = _delegate_block(catalog, asker, target, parent, allow, binary)
        if blocked is None:
            routes.append(Route(RouteKind.DELEGATE, name, (name,), RouteState.READY, key,
                                ceiling=ceiling_of(target.manifest)))
        else:
            routes.append(Route(RouteKind.DELEGATE, name, (name,), RouteState.BLOCKED, key,
                                reason=blocked[0], authorize=blocked[1], ceiling=ceiling_of(target.manifest)))
    return routes


def _delegate_block(catalog: Catalog, asker: Asker, target: Capsule, parent: Envelope,
                    allow: tuple[str, ...], binary: str | None) -> tuple[str, str] | None:
    if binary is not None and binary not in parent.shell_allow:
        text = f"the spawn envelope refuses it: the child holds `{binary}`, which its parent does not"
        return text, f"none: {text}; a child never holds more than its parent"
    refusal = referee(parent, lower(target.manifest))
    if refusal is not None:
        what = f"`{refusal.entry}`" if refusal.key == "capabilities.shell.allow" else \
            f"`{refusal.entry}` under {refusal.key}"
        text = f"the spawn envelope refuses it: the child holds {what}, which its parent does not"
        return text, f"none: {text}; a child never holds more than its parent"
    me = asker.capsule.name
    if target.name not in allow and target.ref not in allow:
        return (
            f"'{target.name}' is not in {me}'s capabilities.spawn.allow",
            f"add `{target.name}` to capabilities.spawn.allow in {me}'s murmur.yaml "
            f"(`{grant_entry('capabilities.spawn.allow', allow, target.name)}`), reinstall, "
            "and restart the session",
        )
    effective = (catalog.effective_spawn or {}).get(me)
    if effective is not None and target.name not in effective and target.ref not in effective:
        return (
            f"'{target.name}' is narrowed out of {me}'s effective spawn set (--spawn, MURMUR_SPAWN or its parent's set)",
            f"restart {me}'s session without that narrowing, or with `--spawn` naming `{target.name}`",
        )
    if catalog.global_store is not None and (target.name, target.version) not in catalog.global_store:
        return (
            f"'{target.name}' {target.version} is not in the global store, where a delegated child resolves from",
            f"install it there: `mur install -g <{target.name}'s capsule directory>`",
        )
    roost = catalog.roost_spawn_allow
    if roost is not None and target.name not in roost and target.ref not in roost:
        return (
            f"mur-roost's --spawn-allow does not list '{target.name}'",
            f"restart mur-roost with `{spawn_allow_flags([*roost, target.name])}`",
        )
    return _budget_block(asker, target, target.name, "restart the session")


def routes_for(catalog: Catalog, asker: Asker, job: Job, *, binary: str | None) -> tuple[
        tuple[Route, ...], tuple[Route, ...]]:
    """The routes from ``asker`` to every target that can do the job.

    Returns:
        tuple: ``(ready, blocked)``. ``ready`` is ordered by :class:`RankKey` (least
        privileged first), ``call-member`` before ``delegate-task`` on a tie of the whole key;
        ``blocked`` is in discovery order (formation members in roster order, then capsules
        by name).
    """
    routes: list[Route] = []
    if asker.member is not None and catalog.formation is not None:
        routes += _member_routes(catalog, asker, job, binary)
    routes += _delegate_routes(catalog, asker, job, binary)
    ready = sorted((r for r in routes if r.state is RouteState.READY),
                   key=lambda r: (r.key, r.kind is RouteKind.DELEGATE))
    blocked = [r for r in routes if r.state is RouteState.BLOCKED]
    return tuple(ready), tuple(blocked)


def answer(catalog: Catalog, *, can: str | None = None, skill: str | None = None,
           asking: str | None = None) -> Answer:
    """The whole ``mur agent who`` answer.

    Args:
        catalog (Catalog): what is installed, running, and the formation.
        can (str | None): ``--can BINARY`` (hard).
        skill (str | None): ``--skill LABEL`` (soft; used when ``can`` is None).
        asking (str | None): ``--as``: the member or capsule routes are computed for;
            with a formation and no ``--as``, its entry member.

    Raises:
        KeyError: ``asking`` names neither a member nor a known capsule.
    """
    job = holds(can) if can else matches_label(skill) if skill else None
    rows = holders(catalog, job)
    indirect = _indirect(catalog, can)
    if asking is None and catalog.formation is not None and job is not None:
        asking = next((m.name for m in catalog.formation.members if m.entry), None)
    if asking is None or job is None:
        if asking is not None and resolve_asker(catalog, asking) is None:
            raise KeyError(asking)
        return Answer(rows, asking, indirect=indirect)
    asker = resolve_asker(catalog, asking)
    if asker is None:
        raise KeyError(asking)
    ready, blocked = routes_for(catalog, asker, job, binary=can)
    return Answer(rows, asker.label, ready, blocked, job(asker.capsule, asker.member), indirect)


def _indirect(catalog: Catalog, binary: str | None) -> tuple[Any, ...]:
    """The indirect holders of ``binary`` (spec/routing.md "Indirect grants")."""
    if not binary:
        return ()
    from murmur.routing.indirect import indirect_holders

    return indirect_holders(holders(catalog, None), binary)
