"""The import graph of ``src/murmur/`` keeps to the tiers of ``spec/architecture.md``.

Every ``import`` and ``from … import`` of every module counts (top-level, inside functions,
under ``TYPE_CHECKING``). A module may import its own unit and units of lower tiers only; the
crossings the code has today are in :data:`ALLOWED`, each with its reason.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "murmur"
SPEC = ROOT / "spec" / "architecture.md"

# (importing file under src/murmur/, imported unit) -> why it crosses upward today.
ALLOWED: dict[tuple[str, str], str] = {}


def tiers() -> dict[str, int]:
    """Unit name -> tier, read from the table of spec/architecture.md."""
    found: dict[str, int] = {}
    for line in SPEC.read_text().splitlines():
        row = re.match(r"^\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|", line)
        if row:
            for unit in re.findall(r"`([a-z][a-z0-9_]*)`", row.group(2)):
                assert unit not in found, f"{unit} is in two tiers of {SPEC.name}"
                found[unit] = int(row.group(1))
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """``murmur.session.door`` -> ``session``; ``murmur.timing`` -> ``timing``; ``murmur`` -> ``murmur``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imported(path: Path) -> Iterator[str]:
    """Every murmur module the file ``path`` imports, anywhere in it, as absolute names."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    yield from imports_in(path.read_text(), package)


def imports_in(text: str, package: str) -> Iterator[str]:
    """Every murmur module ``text`` (a module of ``package``) imports, as absolute names."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "murmur")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "murmur":  # from murmur import timing
                yield from (f"murmur.{a.name}" for a in node.names)
            elif target.split(".")[0] == "murmur":
                yield target


def crossings() -> set[tuple[str, str]]:
    """(importing file, imported unit) for every import that is not downward."""
    tier = tiers()
    out: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        source = unit_of(module_name(path))
        for target in imported(path):
            dest = unit_of(target)
            if dest == "__version__":
                dest = "murmur"
            if dest != source and tier[dest] >= tier[source]:
                out.add((path.relative_to(SRC).as_posix(), dest))
    return out


def test_every_unit_has_a_tier() -> None:
    """Each package and top-level module of src/murmur/ is in the table (add a new one there)."""
    tier = tiers()
    units = {unit_of(module_name(p)) for p in SRC.rglob("*.py")}
    assert sorted(units - set(tier)) == []
    assert sorted(set(tier) - units) == []


def test_no_import_climbs_a_tier() -> None:
    """No module imports a unit of its own tier or a higher one, except the listed ones."""
    new = sorted(crossings() - set(ALLOWED))
    assert new == [], "upward imports (fix them, or list them with a reason in ALLOWED): " + repr(new)


def test_allowlist_has_no_fixed_entries() -> None:
    """An allowed crossing that no longer happens leaves the list."""
    stale = sorted(set(ALLOWED) - crossings())
    assert stale == [], "remove these fixed entries from ALLOWED: " + repr(stale)


# Sub-tiers inside a unit: (importing sub-package, sub-package it may not import) -> why.
SUB_TIER_RULES: dict[tuple[str, str], str] = {
    ("murmur.formation.member", "murmur.formation.launch"):
        "member code runs inside a member's session; launch code runs in the launcher (spec/architecture.md)",
}


def sub_tier_breaks() -> list[tuple[str, str]]:
    """(importing file, imported module) for every import a sub-tier rule forbids."""
    out: list[tuple[str, str]] = []
    for path in sorted(SRC.rglob("*.py")):
        here = module_name(path)
        for source, banned in SUB_TIER_RULES:
            if here == source or here.startswith(source + "."):
                out += [(path.relative_to(SRC).as_posix(), t) for t in imported(path)
                        if t == banned or t.startswith(banned + ".")]
    return out


def test_member_code_does_not_import_launch_code() -> None:
    """The sub-tier rules of :data:`SUB_TIER_RULES` hold (formation's member side is apart)."""
    for source, banned in SUB_TIER_RULES:
        assert (SRC.parent / source.replace(".", "/")).is_dir() and (SRC.parent / banned.replace(".", "/")).is_dir()
    assert sub_tier_breaks() == []


def test_a_sub_tier_break_is_found() -> None:
    """The rule reads the same imports as the tiers (a lazy import counts)."""
    text = "def f():\n    from murmur.formation.launch.supervise import Timers\n"
    assert [t for t in imports_in(text, "murmur.formation.member") if t.startswith("murmur.formation.launch")] == [
        "murmur.formation.launch.supervise"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from murmur import timing\n", ["murmur.timing"]),
        ("def f():\n    from murmur.session.door import x\n", ["murmur.session.door"]),
        ("import murmur.plan.planfile, os\n", ["murmur.plan.planfile"]),
        ("from . import door\n", ["murmur.session"]),
        ("from ..plan import load\n", ["murmur.plan"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from murmur.agent import A\n", ["murmur.agent"]),
    ],
)
def test_imports_are_all_found(source: str, expected: list[str]) -> None:
    """The parser sees lazy, relative, ``from murmur import`` and ``TYPE_CHECKING`` imports."""
    assert list(imports_in(source, "murmur.session")) == expected
