"""Docstrings and comments under ``src/`` cite this repository's ``spec/`` pages, nothing else.

The design documents behind the spec ("seed 000", the "contract sheet", the Trio pitfall list
"trio-stack P1") and issue numbers are not in this repository: a reader cannot follow them.
Every file under ``src/`` is held to it; there is no list of exceptions.
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

OUTSIDE = re.compile(r"contract (sheet|§)|seeds? 0\d\d|trio-stack|\(P\d+\)|issues? #?\d+", re.IGNORECASE)

def citing() -> dict[str, list[str]]:
    """File under src/ -> its lines that cite an outside document."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        hits = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
                if OUTSIDE.search(line)]
        if hits:
            found[path.relative_to(SRC).as_posix()] = hits
    return found


def test_no_outside_citations() -> None:
    """No file under src/ cites a seed, the contract sheet, trio-stack or an issue."""
    assert citing() == {}, "cite the spec/ page and section instead"


def test_the_pattern_finds_each_kind() -> None:
    """The pattern matches the forms found in the code, and not ordinary words."""
    for text in ("(contract sheet section 1.2)", "(contract §9)", "Design: seed 000,", "seeds 000/004",
                 "(trio-stack.md, P1)", "trio-stack P7", "(trio-stack.md d, P10)", "never arrives (P10)",
                 "(issue 11)", "issue #18"):
        assert OUTSIDE.search(text), text
    for text in ("the seeds are the demo's children", "a seed no longer alive", "spec/tree.md \"Cascade\"",
                 "this issues a request", "a P10 key", "the trio stack"):
        assert not OUTSIDE.search(text), text
