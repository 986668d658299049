"""Routes in words: ``mur agent who``'s text and ``--json`` document, and the line of a
denied-binary message that says where to send the work.

Specification: ``spec/routing.md``, "``mur agent who``" (schema ``murmur.agent-who/1``,
``spec/agent-who.schema.json``) and "When a capsule is refused a binary". Pure: strings and
dicts in, out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from murmur.routing.catalog import Answer, Holder, Route, RouteKind, RouteState
from murmur.routing.index import skills_of

__all__ = ["SCHEMA", "delegate_line", "holder_json", "route_json", "to_json", "to_text"]

SCHEMA = "murmur.agent-who/1"
"""The ``schema`` value of ``mur agent who --json``."""


def _writes(h: Holder) -> str:
    fs = h.capsule.manifest.capabilities.filesystem
    scope = fs.scope if fs is not None else "."
    return scope + (" (workdir_exec)" if fs is not None and fs.workdir_exec else "")


def _flag(h: Holder, edited: Mapping[str, str]) -> str:
    return "  PROFILE EDITED SINCE START" if h.capsule.edited else ""


_CLASS_LINE = {
    "scoped": "the kernel holds exec, writes and net to these lines",
    "sealed": ("the kernel holds exec, writes and net to these lines, in a root of its own (the workdir, "
               "the runtime trees, a fixed /etc and /dev)"),
}
"""The ``class`` line of a row whose capsule declares scoped or sealed (spec/routing.md)."""


def _holder_lines(h: Holder, edited: Mapping[str, str]) -> list[str]:
    c = h.capsule
    m = c.manifest
    title = h.label if h.member is None else f"{h.label} ({c.ref}@{c.version})"
    lines = [f"  {title} [{c.state.value}]{_flag(h, edited)}"]
    if h.member is not None:
        lines.append(f"      role   {'entry member' if h.member.entry else 'member'}")
    if m.description:
        lines.append(f"      about  {m.description}")
    lines.append(f"      exec   {', '.join(m.shell_allow) or 'none'}")
    lines.append(f"      writes {_writes(h)}")
    lines.append(f"      net    {', '.join(m.network_allow) or 'none'}")
    klass = m.capabilities.containment
    if klass is not None and klass.value in _CLASS_LINE:
        lines.append(f"      class  {klass.value}: {_CLASS_LINE[klass.value]}")
    if m.spawn_allow:
        lines.append(f"      spawn  {', '.join(m.spawn_allow)}")
    skills = skills_of(c)
    if skills:
        lines.append(f"      skills {', '.join(skills)}")
    if m.inference is not None and m.inference.model:
        lines.append(f"      model  {m.inference.model}")
    from murmur.routing.indirect import codex_note

    note = codex_note(c)
    if note is not None:
        lines.append(f"      shell  {note}")
    for sid in c.edited:
        why = edited.get(sid)
        lines.append(f"      {sid}: {why}; restart it before relying on this row" if why else
                     f"      {sid}: restart it before relying on this row")
    return lines


def _route_name(r: Route) -> str:
    return f"{r.kind.value} {r.target}"


def _ceiling(r: Route) -> str:
    """``; ceiling 4 turns, 20000 tokens per task`` for a route to an agent capsule."""
    return f"; ceiling {r.ceiling.text()}" if r.ceiling is not None else ""


def _via(r: Route) -> str:
    return ", ".join(r.via)


def to_text(answer: Answer, *, can: str | None, skill: str | None,
            edited: Mapping[str, str] | None = None, show_blocked: bool = True) -> str:
    """The human output (ends with a newline).

    Args:
        answer (Answer): from :func:`murmur.routing.index.answer`.
        can (str | None), skill (str | None): the query, for the headings.
        edited (Mapping[str, str] | None): session id -> why its profile changed.
        show_blocked (bool): print blocked routes (the operator's view; never a capsule's).
    """
    edited = edited or {}
    if can:
        head = f"Capsules and members that explicitly hold `{can}`:"
    elif skill:
        head = f"Capsules and members matching `{skill}`:"
    else:
        head = "Capsules installed or running, and what they hold:"
    out = [head]
    for h in answer.holders:
        out += _holder_lines(h, edited)
    if not answer.holders:
        out.append("  (none)")
    if can and answer.indirect:
        out.append("")
        out.append(f"Capsules and members that can run `{can}` indirectly (advisory containment):")
        for ind in answer.indirect:
            out.append(f"  {ind.holder.label} ({ind.holder.capsule.name}@{ind.holder.capsule.version}) "
                       f"via {', '.join(ind.via)}")
            out.append(f"      why    {ind.why}")
            out.append(f"      exact  {ind.exact}")
    if answer.asking is not None and (can or skill):
        out.append("")
        out.append(f"Dispatch routes for '{answer.asking}', best first:")
        if answer.holds_itself:
            out.append(f"  ('{answer.asking}' holds it itself; routes below send it to a narrower target)")
        out.append("  ready:")
        width = max([len(_route_name(r)) for r in (*answer.ready, *answer.blocked)] + [20])
        vwidth = max([len(_via(r)) for r in (*answer.ready, *answer.blocked)] + [12])
        for r in answer.ready:
            out.append(f"    {_route_name(r).ljust(width)}  via {_via(r).ljust(vwidth)}  key {r.key.text()}"
                       f"{_ceiling(r)}")
        if not answer.ready:
            out.append("    (none)")
        if show_blocked and answer.blocked:
            out.append("  blocked (capable, but not usable right now):")
            for r in answer.blocked:
                out.append(f"    {_route_name(r).ljust(width)}  via {_via(r).ljust(vwidth)}  — {r.reason}")
                if r.ceiling is not None:
                    out.append(f"      ceiling:   {r.ceiling.text()}")
                out.append(f"      authorize: {r.authorize}")
    return "\n".join(out) + "\n"


def holder_json(h: Holder, edited: Mapping[str, str]) -> dict[str, Any]:
    """One ``holders[]`` object of the schema."""
    c = h.capsule
    m = c.manifest
    fs = m.capabilities.filesystem
    inf = m.inference
    return {
        "label": h.label,
        "capsule": c.ref,
        "version": c.version,
        "member": h.member.name if h.member else None,
        "entry": bool(h.member and h.member.entry),
        "state": c.state.value,
        "store": c.store,
        "sessions": list(c.sessions),
        "profile_edited": [{"session_id": s, "reason": edited.get(s, "")} for s in c.edited],
        "hard": {
            "exec": list(m.shell_allow),
            "filesystem": {"scope": fs.scope if fs else ".", "workdir_exec": bool(fs and fs.workdir_exec)},
            "network": list(m.network_allow),
            "env": list(m.env_allow),
            "spawn": list(m.spawn_allow),
            "containment": (m.capabilities.containment.value if m.capabilities.containment else "advisory"),
        },
        "soft": {
            "description": m.description,
            "skills": list(skills_of(c)),
            "model": inf.model if inf else None,
        },
        "workload": "agent" if inf is not None else "plan",
        "budget": {"max_turns": inf.max_turns, "budget_tokens": inf.budget_tokens} if inf else None,
    }


def route_json(r: Route) -> dict[str, Any]:
    """One ``routes.ready[]`` / ``routes.blocked[]`` object of the schema."""
    out: dict[str, Any] = {
        "kind": r.kind.value,
        "target": r.target,
        "via": list(r.via),
        "state": r.state.value,
        "call": r.call,
        "key": r.key.to_json(),
        "key_text": r.key.text(),
    }
    out["ceiling"] = r.ceiling.to_json() if r.ceiling is not None else None
    if r.reason is not None:
        out["reason"] = r.reason
        out["authorize"] = r.authorize
    return out


def to_json(answer: Answer, *, can: str | None, skill: str | None, asking: str | None,
            roster: str | None, edited: Mapping[str, str] | None = None,
            problems: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``--json`` document of ``mur agent who`` (spec/routing.md "`mur agent who`"; the
    schema is ``spec/agent-who.schema.json``).

    Args:
        answer (Answer): the index's answer to the query.
        can (str | None): ``--can BINARY``, as asked.
        skill (str | None): ``--skill WORD``, as asked.
        asking (str | None): ``--as CAPSULE``: whose routes ``routes`` lists (None: no routes).
        roster (str | None): ``--roster PATH``, as asked.
        edited (Mapping[str, str] | None): holder name → why its running session differs from
            its artifact on disk.
        problems (list[dict[str, Any]] | None): diagnostics (``Diagnostic.to_json``) met while
            gathering, reported rather than raised.

    Returns:
        dict[str, Any]: ``schema``, ``query`` (the four options), ``holders`` (one object per
        holder), ``routes`` (``as``, ``holds_itself``, ``ready``, ``blocked``; or null) and
        ``problems``.
    """
    edited = edited or {}
    routes = None
    if answer.asking is not None and (can or skill):
        routes = {
            "as": answer.asking,
            "holds_itself": answer.holds_itself,
            "ready": [route_json(r) for r in answer.ready],
            "blocked": [route_json(r) for r in answer.blocked],
        }
    return {
        "schema": SCHEMA,
        "query": {"can": can, "skill": skill, "as": asking, "roster": roster},
        "holders": [holder_json(h, edited) for h in answer.holders],
        "routes": routes,
        "indirect": [{"label": i.holder.label, "capsule": i.holder.capsule.name, "version": i.holder.capsule.version,
                      "via": list(i.via), "why": i.why, "exact": i.exact} for i in answer.indirect],
        "problems": problems or [],
    }


def delegate_line(routes: Sequence[Route]) -> str | None:
    """``DELEGATE it instead of asking the user: …`` for a denied-binary message
    (:func:`murmur.grants.denied_binary`), or None when no route is ready.

    Args:
        routes (Sequence[Route]): the refused capsule's routes, best first; anything not
            ready is dropped here, whatever the caller passes.
    """
    usable = [r for r in routes if r.state is RouteState.READY]
    if not usable:
        return None
    names = ", ".join(_named(r) for r in usable)
    return f"DELEGATE it instead of asking the user: {usable[0].call}. Best first: {names}."


def _named(route: Route) -> str:
    held = [v for v in route.via if v != route.target]
    how = "" if route.kind is RouteKind.CALL_MEMBER else " (delegate-task)"
    return f'"{route.target}"{how}' + (f" (via {', '.join(held)})" if held else "")
