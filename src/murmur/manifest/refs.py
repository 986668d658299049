"""``${VAR}`` references in ``murmur.yaml``: which fields hold them and how they resolve.

Only the fields in :data:`REF_FIELDS` are scanned; anywhere else ``${…}`` is ordinary text.
A reference is ``${NAME}`` with ``NAME`` in UPPER_SNAKE_CASE (``[A-Z][A-Z0-9_]*``); any other
``${…}`` is left as written. A field may hold several references and text around them
(``https://${HOST}/v1``). A variable that is unset is ``E-MAN-003`` naming the field and the
variable (never any value). ``inference.api_key`` is resolved only in the process that runs
inference: every other loader (``mur build``, roost, roster admission) skips it.
Specification: ``spec/manifest.md`` (References).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import model
from murmur.manifest.endpoint import endpoint_problem
from murmur.manifest.faults import Fault

REF_FIELDS: tuple[str, ...] = ("inference.api_key", "inference.endpoint", "inference.model")
"""Dotted manifest fields that may hold ``${VAR}`` references."""

DEFAULT_SKIP: tuple[str, ...] = ("inference.api_key",)
"""Fields left unresolved unless a caller that runs inference asks for them."""

REF_RE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")


def has_reference(text: str) -> bool:
    """True when ``text`` holds at least one ``${VAR}`` reference."""
    return REF_RE.search(text) is not None


def references(text: str) -> list[str]:
    """The variable names ``text`` references, in order (duplicates kept)."""
    return REF_RE.findall(text)


def substitute(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Replace each reference with its value; return the text and the unset names."""
    missing: list[str] = []

    def repl(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in env:
            missing.append(name)
            return m.group(0)
        return env[name]

    return REF_RE.sub(repl, text), missing


def resolve_faults(
    manifest: model.Manifest, env: Mapping[str, str], *, skip: Sequence[str] = DEFAULT_SKIP
) -> tuple[model.Manifest, list[Fault]]:
    """Resolve references; return the new manifest and a fault per unset variable.

    Faults carry field paths (``("inference", "api_key")``) so a loader can locate them.
    An endpoint that stops being a valid endpoint once resolved is also a fault.
    """
    inference = manifest.inference
    if inference is None:
        return manifest, []
    faults: list[Fault] = []
    changes: dict[str, Any] = {}
    for dotted in REF_FIELDS:
        if dotted in skip:
            continue
        field = dotted.split(".", 1)[1]
        value = getattr(inference, field)
        if not isinstance(value, str) or not has_reference(value):
            continue
        resolved, missing = substitute(value, env)
        for name in dict.fromkeys(missing):
            faults.append(Fault(
                "E-MAN-003", f"`{dotted}` references ${{{name}}}, which is not set",
                hint=f"set {name} in the environment of the process that loads this manifest",
                path=("inference", field)))
        if not missing:
            if field == "endpoint":
                problem = endpoint_problem(resolved)
                if problem is not None:
                    faults.append(Fault(
                        "E-MAN-003", f"inference.endpoint (after resolving references) {problem}",
                        path=("inference", field)))
            changes[field] = resolved
    if faults:
        return manifest, faults
    return attrs.evolve(manifest, inference=attrs.evolve(inference, **changes)), []


def resolve_refs(
    manifest: model.Manifest,
    env: Mapping[str, str],
    *,
    skip: Sequence[str] = DEFAULT_SKIP,
    source: str | None = None,
) -> model.Manifest:
    """A copy of ``manifest`` with ``${VAR}`` references resolved from ``env``.

    Args:
        manifest (Manifest): a loaded manifest (references still as written).
        env (Mapping[str, str]): the variables, usually ``os.environ``.
        skip (Sequence[str]): dotted fields to leave as written (default
            ``("inference.api_key",)``; pass ``()`` where inference runs).
        source (str | None): a file name for the diagnostics' location.

    Returns:
        Manifest: the resolved manifest (the same object when nothing changed).

    Raises:
        DiagnosticError: ``E-MAN-003`` for each unset variable, naming the field and the
        variable, never a value.
    """
    resolved, faults = resolve_faults(manifest, env, skip=skip)
    if faults:
        raise DiagnosticError(
            [error(f.code, f.message, hint=f.hint, path=source) for f in faults]
        )
    return resolved
