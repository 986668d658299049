"""Upstream manifests, taken unchanged, get the answer the key policy and the component
check give them: build and pass ``mur doctor`` (with warnings), or a coded refusal."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from manifest.upstream_corpus import CORPUS, Expect
from murmur.cli.mur import main

CORPUS_DIR = Path(__file__).parent / "upstream"


def test_corpus_lists_every_fixture() -> None:
    """Every file in the corpus directory has an expected answer, and every answer a file."""
    on_disk = {p.name for p in CORPUS_DIR.glob("*.yaml")}
    assert on_disk == {e.file for e in CORPUS}
    assert len(CORPUS) == len(on_disk) == 89  # spec/components.md "Upstream's examples here"


@pytest.fixture
def agent_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a user running these capsules has: the provider keys and the `claude` and `codex`
    CLIs on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cli in ("claude", "codex"):
        stub = bin_dir / cli
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(key, "test-key-not-a-secret")


def page_file(case: Expect, name: str) -> bytes:
    """A file the page (or fixture) has beside the manifest: a ``capsule.wasm`` is the page's
    bare module header, or the stand-in component for a compiled one; anything else is text."""
    if name.endswith(".wasm"):
        if case.stand_in is None:
            return b"\0asm\x01\0\0\0"
        from components.wat import component

        return component(case.stand_in)
    return f"{name}: written as the page says\n".encode()


def _companions(capsule: Path, case: Expect) -> list[str]:
    """Create the files the manifest declares (as its author has them); return their names,
    in the order declared. A ``.wasm`` is a real tool component (``components.wat``'s echo)
    standing in for the author's build; ``case.absent`` files are left out (the fixture is
    about their absence)."""
    from murmur.errors import DiagnosticError
    from murmur.manifest.artifact import is_artifact_text, parse_artifact_manifest
    from murmur.manifest.load import load_manifest

    text = (capsule / "murmur.yaml").read_text(encoding="utf-8")
    try:
        if is_artifact_text(text, path="murmur.yaml"):
            names = list(parse_artifact_manifest(text, path="murmur.yaml").requires_files)
        else:
            names = list(load_manifest(capsule / "murmur.yaml").requires_files or ())
    except DiagnosticError:
        return []
    for name in names:
        if name in case.absent:
            continue
        (capsule / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".wasm") and case.stage == "artifact":
            from components.wat import component

            (capsule / name).write_bytes(component("echo"))
        else:
            (capsule / name).write_bytes(b"\0asm\x01\0\0\0")
    return [n for n in names if n not in case.absent]


def _doctor(capsule: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    monkeypatch.chdir(capsule)
    capsys.readouterr()
    rc = main(["doctor", "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("case", CORPUS, ids=lambda e: e.file.removesuffix(".yaml"))
def test_answer(case: Expect, tmp_path: Path, agent_env: None, monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str]) -> None:
    """Build and doctor each upstream manifest as a user would; assert the table's answer."""
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    shutil.copyfile(CORPUS_DIR / case.file, capsule / "murmur.yaml")
    (capsule / "credentials.txt").write_text("stray file a build must not pack\n")
    for name in case.page_files:  # what the page has its reader write beside the manifest
        (capsule / name).write_bytes(page_file(case, name))
    declared = _companions(capsule, case)
    for art_file in case.installs:  # the artifacts the capsule uses, as its user installs them
        art = tmp_path / art_file.removesuffix(".yaml")
        art.mkdir()
        shutil.copyfile(CORPUS_DIR / art_file, art / "murmur.yaml")
        art_case = next(e for e in CORPUS if e.file == art_file)
        _companions(art, art_case)
        monkeypatch.chdir(capsule)
        assert main(["install", str(art)]) == 0

    if case.host is not None:
        monkeypatch.setenv("MURMUR_SANDBOX_HOST", case.host)
    capsys.readouterr()
    built = main(["build", str(capsule)])
    build_err = capsys.readouterr().err
    rc, report = _doctor(capsule, monkeypatch, capsys)
    doc = report["capsule"]
    assert isinstance(doc, dict)
    refusals = {d["code"] for d in doc["diagnostics"]}
    warnings = {d["code"] for d in doc.get("warnings", [])}

    if case.stage == "artifact":  # an artifact manifest: packed as upstream packs it
        assert built == 0, build_err
        with zipfile.ZipFile(next(capsule.glob("*.mur.zip"))) as zf:
            assert zf.namelist() == ["murmur.yaml", *declared]  # manifest first, then in order
        assert (rc, report["ok"], refusals) == (0, True, set()), doc
        assert warnings == case.codes
        return
    if case.stage is None:
        assert built == 0, build_err
        with zipfile.ZipFile(next(capsule.glob("*.mur.zip"))) as zf:
            assert zf.namelist() == ["murmur.yaml"]  # nothing undeclared, no credentials.txt
        assert (rc, report["ok"], refusals) == (0, True, set())
        assert warnings == case.codes
    elif case.stage == "load":
        assert built == 1 and not list(capsule.glob("*.mur.zip"))
        assert all(f"error[{code}]" in build_err for code in case.codes)
        assert rc == 1 and refusals == case.codes
    else:
        assert built == 0, build_err
        with zipfile.ZipFile(next(capsule.glob("*.mur.zip"))) as zf:
            packed = [f for f in case.page_files if not f.endswith(".wasm")]  # an unlisted capsule.wasm is not
            assert zf.namelist() == sorted(["murmur.yaml", *declared, *packed])  # a prompt file is
        assert rc == 1 and refusals == case.codes
    if case.component and case.stage != "artifact" and not case.codes & {"E-BLD-003", "E-IO-003"}:
        messages = [d["message"] for d in doc["diagnostics"] if d["code"] in ("E-MAN-005", "E-RUN-006", "E-CMP-002")]
        assert messages and all(w in m for m in messages
                                if (w := next((w for w in ("does not run", "does not support", "packs none",
                                                           "not a WebAssembly component") if w in m), "?")))


@pytest.mark.parametrize("case", [e for e in CORPUS if e.host and e.page_files == ("capsule.wasm",)],
                         ids=lambda e: e.file.removesuffix(".yaml"))
def test_manual_checks_on_this_host(case: Expect, tmp_path: Path, agent_env: None, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The containment manual checks (given ``E-CAP-003`` above on a host made to lack the
    class) on the host as it is: where it backs the floor they get past containment to the
    page's bare capsule.wasm, which is no component (``E-CMP-002``; upstream's ``E-RUN-001``,
    which the page counts as the gate passed); where it does not, ``E-CAP-003``."""
    from murmur.manifest.load import load_manifest
    from murmur.sandbox.host import probe

    capsule = tmp_path / "capsule"
    capsule.mkdir()
    shutil.copyfile(CORPUS_DIR / case.file, capsule / "murmur.yaml")
    (capsule / "capsule.wasm").write_bytes(page_file(case, "capsule.wasm"))
    monkeypatch.delenv("MURMUR_SANDBOX_HOST", raising=False)
    floor = load_manifest(capsule / "murmur.yaml").capabilities.containment  # type: ignore[union-attr]
    backed = floor is not None and not probe(fresh=True).lacks(floor)
    rc, report = _doctor(capsule, monkeypatch, capsys)
    doc = report["capsule"]
    assert isinstance(doc, dict)
    assert (rc, {d["code"] for d in doc["diagnostics"]}) == (1, {"E-CMP-002"} if backed else {"E-CAP-003"})


def test_passing_capsules_warn_only_about_inert_keys() -> None:
    """The corpus holds capsules that pass and capsules refused for components (both kinds)."""
    assert any(e.stage is None for e in CORPUS)
    assert any(e.component and e.stage == "run" for e in CORPUS)
    assert any(e.component and e.stage == "load" for e in CORPUS)
