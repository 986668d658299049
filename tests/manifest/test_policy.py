"""The key policy: the spec table mirrors the code table, and every row answers as it says."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest

from murmur.diagnostics import Diagnostic
from murmur.errors import DiagnosticError
from murmur.manifest import model
from murmur.manifest.load import parse_manifest
from murmur.manifest.upstream_keys import KEYS, OWN_KEYS, VALUE_REFUSALS, Answer, KeyRule

SPEC = Path(__file__).resolve().parents[2] / "spec" / "manifest.md"
ROWS = (*KEYS, *OWN_KEYS)


def _spec_rows() -> list[tuple[str, str, str]]:
    text = SPEC.read_text(encoding="utf-8").split("## Upstream keys", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in text.splitlines():
        m = re.fullmatch(r"\| `([^`]+)` \| (honoured|inert|refused) \| (.*) \|", line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3).replace("\\|", "|")))
    return rows


def test_spec_table_is_the_code_table() -> None:
    """spec/manifest.md "Upstream keys" lists exactly the rows of policy.KEYS, in order."""
    expected = [(r.path, r.answer.value, r.why + (f"; instead: {r.instead}" if r.instead else ""))
                for r in ROWS]
    assert _spec_rows() == expected


def test_paths_unique_and_refusals_say_what_instead() -> None:
    """Each key has one row; each refused row says what to do instead; only honoured rows
    are free-form."""
    assert len({r.path for r in ROWS}) == len(ROWS)
    assert all(r.instead for r in ROWS if r.answer is Answer.REFUSED)
    assert all(r.answer is Answer.HONOURED for r in ROWS if r.free)


def _field_type(cl: type[Any], name: str) -> object:
    return attrs.fields_dict(attrs.resolve_types(cl))[name].type


def _attrs_class(tp: object) -> type[Any] | None:
    """The attrs class inside ``X | None`` or ``tuple[X, ...]``, else None."""
    if isinstance(tp, type) and attrs.has(tp):
        return tp
    for arg in typing.get_args(tp):
        found = _attrs_class(arg)
        if found is not None:
            return found
    return None


def _model_paths(cl: type[Any] = model.Manifest, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for f in attrs.fields(attrs.resolve_types(cl)):
        path = f"{prefix}.{f.name}" if prefix else f.name
        out.add(path)
        inner = _attrs_class(f.type)
        if inner is not None and inner not in (model.DoorCredential,):
            seq = typing.get_origin(f.type) is tuple or any(
                typing.get_origin(a) is tuple for a in typing.get_args(f.type))
            out |= _model_paths(inner, path + ("[]" if seq else ""))
    return out


def test_honoured_rows_are_the_model() -> None:
    """Every honoured row is a model field, and every model field is an honoured row."""
    honoured = {r.path for r in ROWS if r.answer is Answer.HONOURED}
    paths = _model_paths()
    # credentials are a free-form mapping of names in the YAML (a tuple in the model)
    paths = {p for p in paths if not p.startswith("network.authentication.credentials.")}
    assert honoured == paths


def _doc(path: str, leaf: object) -> dict[str, Any]:
    """A minimal manifest mapping with ``leaf`` at the dotted ``path`` (``[]`` = one item)."""
    doc: dict[str, Any] = {"name": "t", "version": "0.1.0"}
    node: dict[str, Any] = doc
    parts = path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        key, is_list = part.removesuffix("[]"), part.endswith("[]")
        if last:
            node[key] = leaf
        elif is_list:
            item: dict[str, Any] = {"name": "murmur-driver-openai", "version": "1.0.0", "runtime": "driver"}
            node[key] = [item]
            node = item
        else:
            node = node.setdefault(key, {})
    shell = doc.get("capabilities", {}).get("shell")
    if isinstance(shell, dict):
        shell.setdefault("allow", ["bash"])  # a shell block must allow something
    return doc


def _load(doc: dict[str, Any]) -> tuple[model.Manifest | None, list[Diagnostic], DiagnosticError | None]:
    warnings: list[Diagnostic] = []
    try:
        return parse_manifest(json.dumps(doc, indent=2), path="m.yaml", warnings=warnings), warnings, None
    except DiagnosticError as exc:
        return None, warnings, exc


@pytest.mark.parametrize("rule", [r for r in ROWS if r.answer is Answer.INERT], ids=lambda r: r.path)
def test_inert_rows_load_with_one_warning(rule: KeyRule) -> None:
    """An inert key loads, with one W-SEC-019 naming it at its line and saying why."""
    manifest, warnings, exc = _load(_doc(rule.path, {"anything": 1}))
    assert exc is None and manifest is not None
    assert [w.code for w in warnings] == ["W-SEC-019"]
    w = warnings[0]
    assert f"`{rule.path}` has no effect here: {rule.why}" == w.message
    assert w.location is not None and w.location.line is not None


@pytest.mark.parametrize("rule", [r for r in ROWS if r.answer is Answer.REFUSED], ids=lambda r: r.path)
def test_refused_rows_are_e_man_005(rule: KeyRule) -> None:
    """A refused key is E-MAN-005 naming it, with the row's instead as the hint, reported once."""
    _, _, exc = _load(_doc(rule.path, "x"))
    assert exc is not None
    assert [d.code for d in exc.diagnostics] == ["E-MAN-005"]
    d = exc.diagnostics[0]
    assert f"`{rule.path}` is an upstream murmur feature this runtime does not support" in d.message
    assert d.hint == rule.instead


@pytest.mark.parametrize("key, value", list(VALUE_REFUSALS), ids=lambda v: str(v))
def test_refused_values(key: str, value: str) -> None:
    """A refused value of an honoured key is one E-MAN-005 (no second type error)."""
    _, _, exc = _load(_doc(key, value))
    assert exc is not None and [d.code for d in exc.diagnostics] == ["E-MAN-005"]
    assert f"`{key}: {value}`" in exc.diagnostics[0].message


def test_unknown_keys_keep_did_you_mean() -> None:
    """A key upstream never had stays E-MAN-003; a close typo gets a hint, a far one does not
    get a wrong one."""
    _, _, exc = _load({"name": "t", "version": "0.1.0", "descripton": "x", "colour": "red"})
    assert exc is not None
    by_key = {d.message: d.hint for d in exc.diagnostics}
    assert all(d.code == "E-MAN-003" for d in exc.diagnostics)
    assert by_key["unknown key `descripton` in the manifest"] == "did you mean `description`?"
    assert "did you mean" not in (by_key["unknown key `colour` in the manifest"] or "")


def test_capsule_runtime_and_execution() -> None:
    """`runtime: capsule` with `execution: static` is a capsule manifest; an artifact role or a
    bad `execution` is E-MAN-003 saying what it is (not hinted as `description`)."""
    ok, _, exc = _load({"name": "t", "version": "0.1.0", "runtime": "capsule", "execution": "Static",
                        "plan": "plan.yaml"})
    assert exc is None and ok is not None and (ok.runtime, ok.execution) == ("capsule", "Static")
    _, _, exc = _load({"name": "t", "version": "0.1.0", "runtime": "tool"})
    assert exc is not None and [d.code for d in exc.diagnostics] == ["E-MAN-003"]
    assert "artifact manifest" in exc.diagnostics[0].message
    _, _, exc = _load({"name": "t", "version": "0.1.0", "execution": "bytecode"})
    assert exc is not None and "one of: wasm, native, static" in exc.diagnostics[0].message
    assert "description" not in (exc.diagnostics[0].hint or "")


def test_inert_keys_never_reach_the_model() -> None:
    """A manifest full of inert keys equals the same manifest without them."""
    text = ("name: t\nversion: 0.1.0\nplan: plan.yaml\ncontext: {seed_budget: 0.1}\n"
            "observability: {eval: {scorers: []}}\ntrace: {capture: content}\n"
            "lifecycle: {shell_grace_secs: 0}\n")
    warnings: list[Diagnostic] = []
    with_keys = parse_manifest(text, path="m.yaml", warnings=warnings)
    bare = parse_manifest("name: t\nversion: 0.1.0\nplan: plan.yaml\ncontext: {}\nobservability: {}\ntrace: {}\nlifecycle: {}\n",
                          path="m.yaml")
    assert with_keys == bare
    assert [w.location.line for w in warnings if w.location] == [4, 5, 6, 7]


def test_otel_endpoint_is_honoured() -> None:
    """`observability.otel_endpoint` reaches the model (spec/trace.md "OpenTelemetry export"), with no
    warning; a value that is not an http(s) URL is E-TRC-008."""
    warnings: list[Diagnostic] = []
    m = parse_manifest("name: t\nversion: 0.1.0\nplan: plan.yaml\nobservability: {otel_endpoint: 'http://127.0.0.1:4318'}\n",
                       path="m.yaml", warnings=warnings)
    assert m.observability is not None and m.observability.otel_endpoint == "http://127.0.0.1:4318"
    assert warnings == []
    for bad in ("localhost:4318", "ftp://h/x", "http://", "http://h:port"):
        with pytest.raises(DiagnosticError) as info:
            parse_manifest(f"name: t\nversion: 0.1.0\nplan: plan.yaml\nobservability: {{otel_endpoint: '{bad}'}}\n",
                           path="m.yaml")
        assert info.value.diagnostics[0].code == "E-TRC-008", bad
