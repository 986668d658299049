"""The denied-binary message: a refusal that says where to send the work (pure).

``spec/routing.md``, "When a capsule is refused a binary". A shell step or the agent's shell
tool asking for a binary outside ``capabilities.shell.allow`` is told that the refusal is
fixed at start (there is no approval prompt), the **ready** routes best first as the tool
call to make, and the grant line that would allow the binary here instead. Blocked routes
are never named: a capsule sees only routes it may already use.
"""

from __future__ import annotations

from collections.abc import Sequence

from murmur.routing.model import Route, RouteKind, RouteState

__all__ = ["denied_binary", "denied_reason", "grant_line", "is_binary_name", "plan_hint"]


def denied_reason(binary: str) -> str:
    """The one-sentence refusal :func:`murmur.shell.check_allowed` raises (and the plan
    checker reports as ``E-PLN-006``) for a binary outside ``capabilities.shell.allow``."""
    return (f"`{binary}` is not in capabilities.shell.allow; this is fixed when the capsule "
            "starts, and there is no approval prompt for it")


def plan_hint(binary: str, grant: str | None) -> str:
    """The plan checker's hint: the grant line, and where to find who holds the binary."""
    where = f"send the work to a member or capsule that holds it (`mur agent who --can {binary}`)"
    return f"add it to murmur.yaml: `{grant}`, or {where}" if grant else where


def is_binary_name(name: str) -> bool:
    """Whether a tool name an agent used reads as a bare binary name."""
    return bool(name) and "/" not in name and name not in (".", "..") and not any(
        c.isspace() for c in name)


def grant_line(capsule: str, binary: str, allow: Sequence[str]) -> str:
    """``To grant it here instead, …`` — the edit that allows ``binary`` in ``capsule``."""
    from murmur.shell import grant_entry

    line = grant_entry("capabilities.shell.allow", allow, binary)
    return (
        f"To grant it here instead, add `{binary}` to capabilities.shell.allow in {capsule}'s "
        f"murmur.yaml (`{line}`), reinstall, and restart the session."
    )


def denied_binary(binary: str, capsule: str, allow: Sequence[str], ready: Sequence[Route]) -> str:
    """The whole message for a refused binary.

    Args:
        binary (str): the binary asked for.
        capsule (str): the refused capsule's name (a member's name inside a formation).
        allow (Sequence[str]): its ``capabilities.shell.allow`` today.
        ready (Sequence[Route]): its routes, best first; anything not ready is dropped here,
            whatever the caller passes.

    Returns:
        str: several lines; the first is the refusal, the last the grant line.
    """
    usable = [r for r in ready if r.state is RouteState.READY]
    lines = [
        f"[capsule] `{binary}` is not in capsule '{capsule}''s capabilities.shell.allow, so the "
        "runtime refused to run it.",
        "This is fixed when the capsule starts; there is no approval prompt for it.",
    ]
    if usable:
        best = usable[0]
        names = ", ".join(_named(r) for r in usable)
        lines.append(f"DELEGATE it instead of asking the user: {best.call}. Best first: {names}.")
    else:
        lines.append(f"No capsule or member '{capsule}' may call holds `{binary}`.")
    lines.append(grant_line(capsule, binary, allow))
    return "\n".join(lines)


def _named(route: Route) -> str:
    held = [v for v in route.via if v != route.target]
    how = "" if route.kind is RouteKind.CALL_MEMBER else " (delegate-task)"
    return f'"{route.target}"{how}' + (f" (via {', '.join(held)})" if held else "")
