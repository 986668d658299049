"""Tests of located YAML parsing."""

from __future__ import annotations

import pytest

from murmur.errors import DiagnosticError
from murmur.manifest.yamltext import YMap, YSeq, YStr, lift, parse_located, to_plain


class TestParseLocated:
    def test_positions_and_plainness(self) -> None:
        """Scalars keep text, 1-based positions and whether they were quoted."""
        root = parse_located("a: 1.10\nb: '2'\nc:\n  - x\n", path="f")
        assert isinstance(root, YMap)
        a, b = root["a"], root["b"]
        assert isinstance(a, YStr) and (str(a), a.line, a.col, a.plain) == ("1.10", 1, 4, True)
        assert isinstance(b, YStr) and not b.plain
        seq = root["c"]
        assert isinstance(seq, YSeq) and seq.item_pos == [(4, 5)]
        assert root.key_pos["c"] == (3, 1)

    def test_empty_value_is_absent_but_remembered(self) -> None:
        """`k:` is absent from the mapping and listed in empty_keys."""
        root = parse_located("k:\nm: ''\n", path="f")
        assert isinstance(root, YMap)
        assert "k" not in root and root.empty_keys == ("k",) and root["m"] == ""

    def test_custom_code(self) -> None:
        """Callers choose the code for malformed documents."""
        with pytest.raises(DiagnosticError) as info:
            parse_located("a: [", path="f", code="E-REG-008")
        assert info.value.code == "E-REG-008"

    def test_complex_key_refused(self) -> None:
        """A non-scalar key is refused at its line."""
        with pytest.raises(DiagnosticError) as info:
            parse_located("ok: 1\n? [a]\n: 1\n", path="f")
        loc = info.value.diagnostics[0].location
        assert loc is not None and loc.line == 2


class TestPlain:
    def test_to_plain_core_schema(self) -> None:
        """Free-form blocks get YAML 1.2 core typing."""
        root = parse_located("[1, 0o7, 1.5, .inf, true, yes, null, '3', x]", path="f")
        assert to_plain(root) == [1, 7, 1.5, float("inf"), True, "yes", None, "3", "x"]

    def test_lift_round_trip(self) -> None:
        """Plain data lifts to located values that lower back to the same data."""
        data = {"a": [1, True, "t"], "b": {"c": 2.5}}
        assert to_plain(lift(data)) == data
