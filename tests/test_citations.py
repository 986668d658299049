"""Docstrings, comments and spec pages cite this repository's ``spec/`` pages, nothing else.

The design documents behind the spec ("seed 000", "design document 003", ``design/routing.md``,
the "contract sheet", the Trio pitfall list "trio-stack P1") and issue numbers are not in this
repository: a reader cannot follow them. Every file under ``src/`` and ``spec/`` and the README
are held to it; there is no list of exceptions. Upstream murmur is public: "upstream murmur"
is a fine thing to name. ``CHANGELOG.md`` is not checked: it is history, and an entry may name
the issue it came from.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SPEC = ROOT / "spec"

OUTSIDE = re.compile(
    r"contract (sheet|§)|seeds? 0\d\d|the seed's|design documents? \d+|\bdesign/[\w-]+\.md|shared/"
    r"|DESIGN\.md|trio-stack|\(P\d+\)|issues? #?\d+",
    re.IGNORECASE,
)


def checked() -> list[Path]:
    """Every file held to the rule: the sources, the spec pages (and their schemas), the README."""
    return [*sorted(SRC.rglob("*.py")), *sorted(p for p in SPEC.rglob("*") if p.is_file()), ROOT / "README.md"]


def citing() -> dict[str, list[str]]:
    """File (relative to the repository) -> its lines that cite an outside document."""
    found: dict[str, list[str]] = {}
    for path in checked():
        hits = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
                if OUTSIDE.search(line)]
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    return found


def test_no_outside_citations() -> None:
    """No source, spec page or README line cites a seed, a design document, the contract sheet,
    trio-stack or an issue."""
    assert citing() == {}, "cite the spec/ page and section instead (or name upstream murmur)"


def test_the_checked_files_include_spec_and_readme() -> None:
    """The rule reaches the spec pages and the README, not only the sources."""
    names = {p.relative_to(ROOT).as_posix() for p in checked()}
    assert {"spec/roost.md", "spec/delegation.md", "README.md", "src/murmur/__init__.py"} <= names
    assert "CHANGELOG.md" not in names


def test_the_pattern_finds_each_kind() -> None:
    """The pattern matches the forms found in the code, and not ordinary words."""
    for text in ("(contract sheet section 1.2)", "(contract §9)", "Design: seed 000,", "seeds 000/004",
                 "(trio-stack.md, P1)", "trio-stack P7", "(trio-stack.md d, P10)", "never arrives (P10)",
                 "(issue 11)", "issue #18",
                 "Design document: seed 004 (\"Roster Schema\")", "Design document 003", "design documents 002",
                 "`design/process-tree.md`", "(the seed's advice)", "The map `../shared/DESIGN.md` draws"):
        assert OUTSIDE.search(text), text
    for text in ("the seeds are the demo's children", "a seed no longer alive", "spec/tree.md \"Cascade\"",
                 "this issues a request", "a P10 key", "the trio stack",
                 "upstream murmur v0.2.0", "the design of the door", "spec/roster.md", "redesign/x.md"):
        assert not OUTSIDE.search(text), text
