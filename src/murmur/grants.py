"""The words for a missing grant: the manifest line that allows a name, and what a capsule
is told when it asks for a binary it does not hold (pure).

``spec/routing.md``, "When a capsule is refused a binary". A shell step or the agent's shell
tool asking for a binary outside ``capabilities.shell.allow`` is told that the refusal is
fixed at start (there is no approval prompt), where to send the work instead (the ready
routes, best first, as the tool call to make; :func:`murmur.routing.delegate_line` words
them) and the grant line that would allow the binary here. Blocked routes are never named:
a capsule sees only routes it may already use.

The shell (:func:`murmur.shell.check_allowed`), the plan checker (``E-PLN-006``), the agent's
tool dispatcher and the routing index all word their refusals from here, so this module
imports nothing of murmur's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["denied_binary", "denied_reason", "grant_entry", "grant_line", "is_binary_name", "plan_hint"]

_FLOW_SPECIAL = frozenset(",[]{}:#&*!|>'\"%@`")


def _flow_item(name: str) -> str:
    """``name`` as an item of a YAML flow sequence (JSON-quoted when it needs quoting)."""
    plain = name and name.strip() == name and not (set(name) & _FLOW_SPECIAL) and name[0] not in "-?"
    return name if plain else json.dumps(name)


def grant_entry(key: str, granted: Sequence[str], name: str) -> str:
    """The whole grant line to write so that ``name`` is allowed and nothing granted is lost.

    Args:
        key (str): the manifest key, e.g. ``capabilities.shell.allow``.
        granted (Sequence[str]): what the manifest grants under ``key`` today.
        name (str): the entry to add.

    Returns:
        str: e.g. ``capabilities.shell.allow: [echo, tr]`` (existing grants first, in order,
        then ``name`` unless it is already there).
    """
    items = list(dict.fromkeys([*granted, name]))
    return f"{key}: [{', '.join(_flow_item(i) for i in items)}]"


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
    line = grant_entry("capabilities.shell.allow", allow, binary)
    return (
        f"To grant it here instead, add `{binary}` to capabilities.shell.allow in {capsule}'s "
        f"murmur.yaml (`{line}`), reinstall, and restart the session."
    )


def denied_binary(binary: str, capsule: str, allow: Sequence[str], delegate: str | None = None,
                  *, kernel: bool = False) -> str:
    """The whole message for a refused binary.

    Args:
        binary (str): the binary asked for.
        capsule (str): the refused capsule's name (a member's name inside a formation).
        allow (Sequence[str]): its ``capabilities.shell.allow`` today.
        delegate (str | None): the line naming its ready routes
            (:func:`murmur.routing.delegate_line`); None when it has none.
        kernel (bool): the sandbox (scoped, sealed) refused the ``exec``: the first line is
            ``[sandbox] … so the kernel refused to exec it.``; else the runtime
            refused it before it started (``[capsule] … so the runtime refused to run it.``).

    Returns:
        str: four lines; the first is the refusal, the third the ready routes (or that no
        capsule or member it may call holds the binary), the last the grant line.
    """
    first = (f"[sandbox] `{binary}` is not in capsule '{capsule}''s capabilities.shell.allow, so the "
             "kernel refused to exec it.") if kernel else (
             f"[capsule] `{binary}` is not in capsule '{capsule}''s capabilities.shell.allow, so the "
             "runtime refused to run it.")
    lines = [
        first,
        "This is decided when the capsule starts — there is no approval prompt for it.",
        delegate if delegate is not None else f"No capsule or member that '{capsule}' may call holds `{binary}`.",
        grant_line(capsule, binary, allow),
    ]
    return "\n".join(lines)
