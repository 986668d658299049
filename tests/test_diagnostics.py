"""Tests of the diagnostics catalogue and rendering."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from murmur.diagnostics import CATALOGUE, FALLBACK_HINTS, RESERVED, Diagnostic, Location, error

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec" / "diagnostics.md"
_CODE = re.compile(r"[EW]-[A-Z]{2,3}-\d{3}")


def _code_literals(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Codes in the string literals of every ``.py`` under ``root`` (docstrings left out), with
    the files they occur in: a code named only in prose is neither emitted nor asserted."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name in skip:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docstrings.add(id(first.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                for code in _CODE.findall(node.value):
                    found.setdefault(code, []).append(str(path.relative_to(ROOT)))
    return found


class TestRender:
    def test_error_with_location_and_hint(self) -> None:
        """An error renders code, location and hint on separate lines."""
        d = error("E-MAN-001", "`version` is required", hint="add `version: 0.1.0`", path="m.yaml", line=3, col=1)
        assert d.render().splitlines() == [
            "error[E-MAN-001]: `version` is required",
            "  --> m.yaml:3:1",
            "  hint: add `version: 0.1.0`",
        ]

    def test_warning_prefix(self) -> None:
        """W- codes render as warnings."""
        assert Diagnostic("W-ROS-001", "x").render() == "warning[W-ROS-001]: x"

    def test_unknown_code_refused(self) -> None:
        """A code outside the catalogue cannot be built."""
        with pytest.raises(ValueError, match="unknown diagnostic code"):
            Diagnostic("E-XXX-999", "nope")

    def test_location_without_col(self) -> None:
        """A location may omit the column."""
        assert Location("a", 2).render() == "a:2"


class TestCatalogue:
    def test_codes_well_formed(self) -> None:
        """Every code has the family-number shape."""
        for code in CATALOGUE:
            assert re.fullmatch(r"[EW]-[A-Z]{2,3}-\d{3}", code), code

    def test_spec_lists_every_code(self) -> None:
        """spec/diagnostics.md documents exactly the catalogue's codes."""
        documented = set(re.findall(r"^\| `([EW]-[A-Z]{2,3}-\d{3})` \|", SPEC.read_text(), re.M))
        assert documented == set(CATALOGUE)

    def test_every_code_is_emitted_and_asserted_or_reserved(self) -> None:
        """Each catalogued code is emitted in src/ and asserted by a test, or reserved with why."""
        emitted = _code_literals(ROOT / "src" / "murmur", skip=("diagnostics.py",))
        asserted = _code_literals(ROOT / "tests", skip=("test_diagnostics.py",))
        live = set(CATALOGUE) - set(RESERVED)
        assert sorted(live - set(emitted)) == [], "emitted nowhere: reserve them with a reason, or emit them"
        assert sorted(live - set(asserted)) == [], "asserted by no test"
        assert sorted(set(RESERVED) & set(emitted)) == [], "reserved but emitted: remove from RESERVED"
        assert set(RESERVED) <= set(CATALOGUE)
        assert sorted(set(emitted) - set(CATALOGUE)) == [], "emitted but not catalogued"

    def test_spec_marks_exactly_the_reserved_codes(self) -> None:
        """spec/diagnostics.md says *reserved* with the catalogue's reason on exactly those rows."""
        rows = dict(re.findall(r"^\| `([EW]-[A-Z]{2,3}-\d{3})` \| (.*) \|$", SPEC.read_text(), re.M))
        marked = {code: row.split(" — *reserved*: ", 1)[1] for code, row in rows.items() if "*reserved*" in row}
        assert marked == RESERVED
        for code, row in rows.items():
            assert row.split(" — *reserved*: ", 1)[0] == CATALOGUE[code], code


class TestHints:
    def test_every_refusal_code_has_a_hint(self) -> None:
        """Issue 32: a refusal says what to change. Every live ``E-`` code has a fallback hint
        (used when its call gives none); the reserved ones are emitted nowhere."""
        live = {c for c in CATALOGUE if c.startswith("E-") and c not in RESERVED}
        assert sorted(live - set(FALLBACK_HINTS)) == [], "give these codes a FALLBACK_HINTS entry"
        assert sorted(set(FALLBACK_HINTS) - set(CATALOGUE)) == []
        assert all(h.strip() and not h.endswith(".") for h in FALLBACK_HINTS.values())

    def test_a_call_without_a_hint_gets_its_codes(self) -> None:
        d = error("E-IO-003", "the disk is full")
        assert d.hint == FALLBACK_HINTS["E-IO-003"]
        assert error("E-IO-003", "x", hint="free space").hint == "free space"  # the call's wins
        assert error("W-ROS-001", "x").hint is None  # warnings only inform
