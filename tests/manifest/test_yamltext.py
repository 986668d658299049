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


    @pytest.mark.parametrize(("text", "line"), [
        ("a: 1\nb: " + "[" * 20_000 + "\n", 2),
        ("a: " + "{x: " * 101 + "\n", 1),
        ("a: '" + "[" * 101 + "'\n", 1),  # quoting cannot hide nesting from the check
    ])
    def test_deep_flow_nesting_refused_before_parsing(self, text: str, line: int) -> None:
        """Over 100 levels of [ or { is refused at its line, before ruamel (whose scanner takes
        seconds on a line of 20,000 [); the message names the limit, not a Python error."""
        with pytest.raises(DiagnosticError) as info:
            parse_located(text, path="f")
        d = info.value.diagnostics[0]
        assert d.code == "E-MAN-002" and d.message == "the document nests more than 100 levels of [ and {"
        assert d.location is not None and d.location.line == line

    def test_block_nesting_too_deep_is_named(self) -> None:
        """A deep block sequence (no brackets) is still refused with words, not 'RecursionError'."""
        with pytest.raises(DiagnosticError) as info:
            parse_located("- " * 20_000 + "x\n", path="f")
        assert info.value.diagnostics[0].message == "the document nests too deeply"

    def test_many_balanced_brackets_pass(self) -> None:
        """Many brackets that never nest deep are ordinary YAML."""
        root = parse_located("a: [" + ", ".join("[1]" for _ in range(300)) + "]\n", path="f")
        assert isinstance(root, YMap) and len(root["a"]) == 300


class TestPlain:
    def test_to_plain_core_schema(self) -> None:
        """Free-form blocks get YAML 1.2 core typing."""
        root = parse_located("[1, 0o7, 1.5, .inf, true, yes, null, '3', x]", path="f")
        assert to_plain(root) == [1, 7, 1.5, float("inf"), True, "yes", None, "3", "x"]

    def test_lift_round_trip(self) -> None:
        """Plain data lifts to located values that lower back to the same data."""
        data = {"a": [1, True, "t"], "b": {"c": 2.5}}
        assert to_plain(lift(data)) == data
