"""Tests of the diagnostics catalogue and rendering."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from murmur.diagnostics import CATALOGUE, Diagnostic, Location, error

SPEC = Path(__file__).resolve().parents[1] / "spec" / "diagnostics.md"


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
