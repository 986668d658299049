"""``capabilities.limits`` for WebAssembly components: memory, tables, instances, deadline.

Upstream's fields and defaults (``docs/content/reference/resource-limits.md``)::

    memory_bytes      536870912 (512 MiB)   linear-memory growth past it is refused
    table_elements    100000                table growth past it is refused
    instances         1000                  instances one call may create
    deadline_seconds  600 per capsule/tool/driver call, 30 per hook call, unless set

Every value must be a whole number greater than 0 (``E-MAN-003``). A limit reached stops the
call with ``E-RUN-001`` naming the limit (:mod:`murmur.components.host`). Pure; the block is
read from the manifest's located tree here (its command-limit siblings are another module's).
Specification: ``spec/components.md`` ("Limits").
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

DEFAULT_MEMORY = 536_870_912
DEFAULT_TABLE = 100_000
DEFAULT_INSTANCES = 1000
DEFAULT_DEADLINE = 600
HOOK_DEADLINE = 30
FIELDS = ("memory_bytes", "table_elements", "instances", "deadline_seconds")


@attrs.frozen
class Limits:
    """Per-call component limits (bytes, elements, instances, seconds; None = the role's default)."""

    memory_bytes: int = DEFAULT_MEMORY
    table_elements: int = DEFAULT_TABLE
    instances: int = DEFAULT_INSTANCES
    deadline_seconds: int | None = None

    def deadline_for(self, role: str) -> int:
        """The deadline a call of ``role`` gets: the explicit value, else 30 s (hook) / 600 s."""
        if self.deadline_seconds is not None:
            return self.deadline_seconds
        return HOOK_DEADLINE if role == "hook" else DEFAULT_DEADLINE


def parse_limits(block: Mapping[str, object] | None, *, where: str = "murmur.yaml") -> Limits:
    """:class:`Limits` from a plain ``capabilities.limits`` mapping (None: the defaults).

    Keys other than :data:`FIELDS` are left alone (command limits may share the block).

    Raises:
        DiagnosticError: ``E-MAN-003`` for a value that is not a whole number > 0.
    """
    if not block:
        return Limits()
    values: dict[str, int] = {}
    for key in FIELDS:
        if key not in block:
            continue
        raw = block[key]
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        if isinstance(raw, str) and raw.strip().isdigit():
            value = int(raw)
        if value is None or value <= 0:
            raise DiagnosticError(error(
                "E-MAN-003", f"`capabilities.limits.{key}` must be a whole number greater than 0, found `{raw}`",
                path=where, hint=f"remove it for the default, or give e.g. `{key}: {_example(key)}`"))
        values[key] = value
    return Limits(**values)


def _example(key: str) -> int:
    return {"memory_bytes": DEFAULT_MEMORY, "table_elements": DEFAULT_TABLE,
            "instances": DEFAULT_INSTANCES, "deadline_seconds": 60}[key]


def limits_of(capsule_root: object) -> Limits:
    """The capsule's ``capabilities.limits`` (component fields), read from its murmur.yaml.

    The key policy drops the block before the model is built (its command-limit siblings
    belong to containment), so it is read here from the located tree. A block that cannot
    be read gives the defaults (the manifest was validated at launch).
    """
    from pathlib import Path

    from murmur.manifest.yamltext import YMap, parse_located, to_plain

    path = Path(str(capsule_root)) / "murmur.yaml"
    try:
        root = parse_located(path.read_text(encoding="utf-8-sig"), path=str(path))
    except (OSError, UnicodeDecodeError, DiagnosticError):
        return Limits()
    caps = root.get("capabilities") if isinstance(root, YMap) else None
    block = caps.get("limits") if isinstance(caps, YMap) else None
    plain = to_plain(block) if isinstance(block, YMap) else None
    return parse_limits(plain if isinstance(plain, dict) else None, where=str(path))
