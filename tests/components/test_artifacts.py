"""Artifact manifests, `mur build` packing and `mur install` of artifacts (spec/components.md)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from components.wat import component
from murmur.cli.mur import main
from murmur.components.check import version_refusals
from murmur.diagnostics import Diagnostic
from murmur.errors import DiagnosticError
from murmur.manifest.artifact import derive_execution, parse_artifact_manifest
from murmur.registry.artifacts import resolve_artifact


def _parse(text: str) -> tuple[object, list[Diagnostic]]:
    warnings: list[Diagnostic] = []
    return parse_artifact_manifest(text, path="murmur.yaml", warnings=warnings), warnings


@pytest.mark.parametrize("runtime, implementation, execution, expected", [
    ("skill", None, None, "static"), ("tool", "native", None, "native"), ("tool", None, None, "wasm"),
    ("hook", None, None, "wasm"), ("driver", None, None, "wasm"), ("native", None, None, "wasm"),
    ("tool", "native", "WASM", "wasm"), ("skill", None, "Static", "static"),
])
def test_execution_derivation(runtime: str, implementation: str | None, execution: str | None,
                              expected: str) -> None:
    """`execution` (any case) wins; otherwise skill → static, native tool → native, else wasm."""
    text = f"name: a\nversion: 0.1.0\nruntime: {runtime}\n"
    text += f"implementation: {implementation}\n" if implementation else ""
    text += f"execution: {execution}\n" if execution else ""
    if runtime == "skill" and expected == "static":
        pass
    art, _ = _parse(text)
    assert art.execution == expected  # type: ignore[attr-defined]
    assert derive_execution(runtime, implementation) == (expected if execution is None else derive_execution(runtime, implementation))


def test_bad_execution_is_a_parse_error() -> None:
    """An unrecognised `execution` is refused naming the three values."""
    with pytest.raises(DiagnosticError) as info:
        _parse("name: a\nversion: 0.1.0\nruntime: tool\nexecution: bytecode\n")
    assert "one of: wasm, native, static" in info.value.diagnostics[0].message


def test_input_schema_map_or_json_string() -> None:
    """input_schema as a YAML map and as a JSON string give the same parameters; bad JSON is coded."""
    a, _ = _parse("name: a\nversion: 0.1.0\nruntime: tool\ninput_schema:\n  type: object\n"
                  "  properties:\n    text: {type: string}\n")
    b, _ = _parse("name: a\nversion: 0.1.0\nruntime: tool\ninput_schema: "
                  "'{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}}}'\n")
    assert a.parameters == b.parameters == {"type": "object", "properties": {"text": {"type": "string"}}}  # type: ignore[attr-defined]
    none, _ = _parse("name: a\nversion: 0.1.0\nruntime: tool\n")
    assert none.parameters == {"type": "object", "properties": {}}  # type: ignore[attr-defined]
    with pytest.raises(DiagnosticError) as info:
        _parse("name: a\nversion: 0.1.0\nruntime: tool\ninput_schema: '{not json'\n")
    assert info.value.diagnostics[0].code == "E-MAN-003" and info.value.diagnostics[0].location.line == 4  # type: ignore[union-attr]


@pytest.mark.parametrize("binding, mode, policy, ok", [
    ("on-compaction", "blocking", "replace-context", True), ("on-task-end", "blocking", "reopen-task", True),
    ("on-task-end", "blocking", "replace-context", False), ("on-inference", "blocking", "reopen-task", False),
    (None, "async", "none", True), (None, "async", "replace-context", False), ("on-stage", "async", "none", False),
    (None, "blocking", "write-manifests", True),
])
def test_hook_contract(binding: str | None, mode: str, policy: str, ok: bool) -> None:
    """A commit_policy its binding cannot honour, or async with a committing policy, is refused."""
    text = "name: h\nversion: 0.1.0\nruntime: hook\n" + (f"binding: {binding}\n" if binding else "")
    text += f"execution_mode: {mode}\ncommit_policy: {policy}\n"
    if ok:
        art, _ = _parse(text)
        assert art.hook.commit_policy == policy  # type: ignore[attr-defined]
    else:
        with pytest.raises(DiagnosticError) as info:
            _parse(text)
        assert info.value.diagnostics[0].code == "E-MAN-003"


def _artifact_dir(tmp_path: Path, manifest: str, files: dict[str, bytes]) -> Path:
    d = tmp_path / "art"
    d.mkdir()
    (d / "murmur.yaml").write_text(manifest)
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    return d


def test_build_packs_manifest_then_requires_files_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """murmur.yaml first, then requires_files in the order written; nothing else."""
    d = _artifact_dir(tmp_path, "name: t\nversion: 0.1.0\nruntime: tool\nrequires_files: [z.txt, tool.wasm, a/b.txt]\n",
                      {"z.txt": b"z", "tool.wasm": component("echo"), "a/b.txt": b"b", "stray.txt": b"s"})
    assert main(["build", str(d), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["runtime"], out["execution"]) == ("tool", "wasm")
    with zipfile.ZipFile(out["path"]) as zf:
        assert zf.namelist() == ["murmur.yaml", "z.txt", "tool.wasm", "a/b.txt"]


def test_skill_defaults_to_skill_md(tmp_path: Path) -> None:
    """A skill with no requires_files packs skill.md."""
    d = _artifact_dir(tmp_path, "name: s\nversion: 0.1.0\nruntime: skill\n", {"skill.md": b"# Be kind\n"})
    assert main(["build", str(d)]) == 0
    with zipfile.ZipFile(d / "s-0.1.0.mur.zip") as zf:
        assert zf.namelist() == ["murmur.yaml", "skill.md"]


@pytest.mark.parametrize("files, needle", [
    (["README.md"], "no root .wasm"), (["a.wasm", "b.wasm"], "several root .wasm"),
])
def test_wasm_payload_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str], files: list[str], needle: str) -> None:
    """A wasm artifact must pack capsule.wasm or exactly one root *.wasm (E-BLD-003)."""
    d = _artifact_dir(tmp_path, f"name: t\nversion: 0.1.0\nruntime: tool\nrequires_files: {json.dumps(files)}\n",
                      {f: b"x" for f in files})
    assert main(["build", str(d)]) == 1
    err = capsys.readouterr().err
    assert "error[E-BLD-003]" in err and needle in err
    assert not list(d.glob("*.mur.zip"))


def test_capsule_wasm_shadowing_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """capsule.wasm beside another root .wasm builds, with W-BLD-002 naming the other."""
    d = _artifact_dir(tmp_path, "name: t\nversion: 0.1.0\nruntime: tool\nrequires_files: [capsule.wasm, x.wasm]\n",
                      {"capsule.wasm": b"x", "x.wasm": b"x"})
    assert main(["build", str(d)]) == 0
    err = capsys.readouterr().err
    assert "warning[W-BLD-002]" in err and "x.wasm" in err


def test_missing_file_names_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """E-IO-003 names the first missing entry."""
    d = _artifact_dir(tmp_path, "name: t\nversion: 0.1.0\nruntime: skill\nrequires_files: [one.md, two.md]\n", {})
    assert main(["build", str(d)]) == 1
    err = capsys.readouterr().err
    assert "error[E-IO-003]" in err and "one.md" in err and "two.md" not in err


@pytest.mark.parametrize("entry", ["../up.txt", "/etc/passwd"])
def test_unsafe_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str) -> None:
    """Absolute and `..` entries are E-BLD-002."""
    d = _artifact_dir(tmp_path, f"name: t\nversion: 0.1.0\nruntime: skill\nrequires_files: ['{entry}']\n", {})
    assert main(["build", str(d)]) == 1
    assert "error[E-BLD-002]" in capsys.readouterr().err


def test_install_puts_the_artifact_in_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`mur install <dir>` builds and installs; resolve finds it by exact version; -g too."""
    d = _artifact_dir(tmp_path, "name: echo\nversion: 0.2.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
                      {"echo.wasm": component("echo")})
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["install", str(d), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert (rec["name"], rec["runtime"], rec["scope"]) == ("echo", "tool", "project")
    found = resolve_artifact("echo", "0.2.0", project_dir=project)
    assert (found.root / "echo.wasm").read_bytes() == component("echo")
    assert main(["list"]) == 0  # a capsule listing is not confused by the artifact
    capsys.readouterr()
    with pytest.raises(DiagnosticError) as info:
        resolve_artifact("echo", "9.9.9", project_dir=project)
    assert info.value.diagnostics[0].code == "E-REG-001"


def test_doctor_reports_interfaces_and_refuses_other_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`mur doctor` names a component's interface versions, and refuses one built for tool 0.2.0."""
    d = _artifact_dir(tmp_path, "name: t\nversion: 0.1.0\nruntime: tool\nrequires_files: [t.wasm]\n",
                      {"t.wasm": component("echo")})
    monkeypatch.chdir(d)
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["capsule"]["interfaces"]["exports"] == ["murmur:tool/run@0.1.0"]
    (d / "t.wasm").write_bytes(component("echo", tool="0.2.0"))
    assert main(["doctor"]) == 1
    captured = capsys.readouterr()
    assert "murmur:tool/run@0.2.0" in captured.out and "error[E-CMP-001]" in captured.err


def test_world_refuses_imports_it_does_not_offer() -> None:
    """A driver may not import murmur:task/task (only tools may): E-CMP-004."""
    codes = [d.code for d in version_refusals(component("asking"), "driver", name="d")]
    assert codes == ["E-CMP-004"]
    assert version_refusals(component("asking"), "tool", name="t") == []


def test_narrowing_keeps_covered_entries_and_warns_for_the_rest() -> None:
    """A tool's network.allow narrows below the ceiling; an uncovered entry is W-SEC-007;
    `allow: []` is a real narrowing to nothing; a hook has only its own grant."""
    from murmur.components.netpolicy import entry_allow, narrowing_warnings
    from murmur.manifest.load import parse_manifest

    m = parse_manifest(
        "name: c\nversion: 0.1.0\nplan: p.yaml\ncapabilities:\n  network:\n    allow: [https://api.example.com, other.example.com]\n"
        "artifacts:\n  - {name: a, version: 0.1.0, capabilities: {network: {allow: [https://api.example.com, api.example.com, evil.example]}}}\n"
        "  - {name: b, version: 0.1.0, capabilities: {network: {allow: []}}}\n"
        "  - {name: c, version: 0.1.0}\n  - {name: h, version: 0.1.0, runtime: hook}\n", path="m.yaml")
    a, b, c, h = m.artifacts
    assert entry_allow(m, a) == (("https://api.example.com",), ("api.example.com", "evil.example"))
    assert entry_allow(m, b) == ((), ()) and entry_allow(m, c)[0] == m.network_allow
    assert entry_allow(m, h) == ((), ())
    warns = narrowing_warnings(m)
    assert [w.code for w in warns] == ["W-SEC-007", "W-SEC-007"] and "`evil.example`" in warns[1].message
