"""Tests of ${VAR} references: which fields, when they resolve, E-MAN-003 naming the variable."""

from __future__ import annotations

import pytest

from murmur.errors import DiagnosticError
from murmur.manifest.load import parse_manifest
from murmur.manifest.refs import references, resolve_refs, substitute

AGENT = """\
name: agent
version: 0.1.0
inference:
  endpoint: https://${API_HOST}/v1
  model: ${MODEL}
  api_key: ${SECRET_KEY}
  system_prompt: cost is ${NOT_A_FIELD} here
"""


class TestSyntax:
    def test_only_upper_snake_case(self) -> None:
        """Only ${UPPER_SNAKE_CASE} is a reference; anything else is literal."""
        assert references("${A} ${lower} ${B_2} $C ${3X} ${}") == ["A", "B_2"]

    def test_substitute_reports_missing(self) -> None:
        """Unset variables are reported by name and left in place."""
        assert substitute("${A}-${B}", {"A": "x"}) == ("x-${B}", ["B"])


class TestResolve:
    def test_load_leaves_references(self) -> None:
        """Loading without an environment keeps references as written."""
        m = parse_manifest(AGENT, path="m")
        assert m.inference is not None and m.inference.api_key == "${SECRET_KEY}"

    def test_resolve_skips_api_key_by_default(self) -> None:
        """resolve_refs resolves endpoint and model but not api_key unless asked."""
        env = {"API_HOST": "api.example.com", "MODEL": "m1", "SECRET_KEY": "s3cr3t"}
        m = resolve_refs(parse_manifest(AGENT, path="m"), env)
        assert m.inference is not None
        assert m.inference.endpoint == "https://api.example.com/v1" and m.inference.model == "m1"
        assert m.inference.api_key == "${SECRET_KEY}"
        assert m.inference.system_prompt == "cost is ${NOT_A_FIELD} here"
        full = resolve_refs(parse_manifest(AGENT, path="m"), env, skip=())
        assert full.inference is not None and full.inference.api_key == "s3cr3t"

    def test_unset_variable_named_never_valued(self) -> None:
        """An unset variable is E-MAN-003 naming field and variable, never any value."""
        env = {"API_HOST": "api.example.com", "MODEL": "hidden-model-value"}
        with pytest.raises(DiagnosticError) as info:
            resolve_refs(parse_manifest(AGENT, path="m"), env, skip=())
        text = str(info.value)
        assert info.value.code == "E-MAN-003"
        assert "SECRET_KEY" in text and "inference.api_key" in text
        assert "hidden-model-value" not in text and "api.example.com" not in text

    def test_resolution_during_load_is_located(self) -> None:
        """Resolving while loading points the diagnostic at the field's line."""
        with pytest.raises(DiagnosticError) as info:
            parse_manifest(AGENT, path="m.yaml", env={"MODEL": "x", "SECRET_KEY": "k"})
        d = info.value.diagnostics[0]
        assert d.code == "E-MAN-003" and "API_HOST" in d.message
        assert d.location is not None and d.location.line == 4

    def test_resolved_endpoint_checked(self) -> None:
        """An endpoint that resolves to plain http off loopback is refused."""
        text = "name: a\nversion: '1'\ninference:\n  endpoint: ${URL}\n"
        with pytest.raises(DiagnosticError) as info:
            parse_manifest(text, path="m", env={"URL": "http://example.com"})
        assert info.value.code == "E-MAN-003" and "http://example.com" not in str(info.value)

    def test_no_inference_nothing_to_do(self) -> None:
        """A manifest without inference resolves to itself."""
        m = parse_manifest("name: a\nversion: '1'\n", path="m")
        assert resolve_refs(m, {}) is m
