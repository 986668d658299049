"""Compiling a policy: the Landlock grants it derives, and the refusals (E-CAP-003, E-SBX-001)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from murmur.assembly.checks import check_containment
from murmur.errors import DiagnosticError
from murmur.manifest.model import Capabilities, Containment
from murmur.sandbox import compiled, elf, landlock, policy
from murmur.sandbox.host import HOST_ENV, HostSupport


def _policy(tmp_path: Path, **kw: object) -> policy.Policy:
    return policy.Policy(klass=Containment.SCOPED, workdir=str(tmp_path), allow=("sh",),
                         search_path="/usr/bin:/bin", **kw)  # type: ignore[arg-type]


def test_rules_grant_execute_only_to_the_granted_binaries(tmp_path: Path) -> None:
    rules = {r.path: r.rights for r in policy.rules(_policy(tmp_path))}
    assert rules[str(tmp_path)] & landlock.EXECUTE == 0
    assert rules[str(tmp_path)] & landlock.WRITE_FILE
    assert rules[str(tmp_path)] & (landlock.MAKE_CHAR | landlock.MAKE_BLOCK | landlock.MAKE_SOCK) == 0
    sh = os.path.realpath(shutil.which("sh", path="/usr/bin:/bin") or "/bin/sh")
    assert rules[sh] & landlock.EXECUTE
    execs = [p for p, r in rules.items() if r & landlock.EXECUTE]
    assert set(execs) == set(elf.start_closure(sh).executables)
    assert rules["/dev/null"] & landlock.WRITE_FILE and not rules["/dev/zero"] & landlock.WRITE_FILE
    with_exec = {r.path: r.rights for r in policy.rules(_policy(tmp_path, workdir_exec=True))}
    assert with_exec[str(tmp_path)] & landlock.EXECUTE


def test_read_only_paths_are_carved_out(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "src").mkdir()
    rules = {r.path: r.rights for r in policy.rules(_policy(tmp_path, read_only=(str(tmp_path / "docs"),)))}
    assert rules[str(tmp_path / "docs")] & landlock.WRITE_FILE == 0
    assert rules[str(tmp_path / "src")] & landlock.WRITE_FILE
    assert rules[str(tmp_path)] & landlock.WRITE_FILE == 0  # else the grant would cover docs too


def test_start_closure_of_a_script_follows_its_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho hi\n")
    closure = elf.start_closure(str(script))
    assert str(script) in closure.executables
    assert os.path.realpath("/bin/sh") in closure.executables
    assert any("libc" in lib for lib in closure.libraries)
    assert elf.start_closure(str(tmp_path / "missing")).libraries == ()


def test_a_host_that_lacks_the_class_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(compiled.SandboxError) as err:
        compiled.compile(_policy(tmp_path), HostSupport(0, True, True, True))
    assert err.value.diagnostic.code == "E-CAP-003" and "Landlock" in err.value.diagnostic.message


def test_check_containment_refuses_with_e_cap_003(tmp_path: Path) -> None:
    from murmur.manifest.load import parse_manifest

    text = "name: x\nversion: 0.1.0\nplan: p.yaml\ncapabilities:\n  containment: scoped\n"
    manifest = parse_manifest(text, path="murmur.yaml")
    assert isinstance(manifest.capabilities, Capabilities)
    with pytest.raises(DiagnosticError) as err:
        check_containment(manifest, None, {HOST_ENV: "no-userns"})
    d = err.value.diagnostics[0]
    assert d.code == "E-CAP-003" and "user and network namespaces" in d.message
    plain = parse_manifest("name: x\nversion: 0.1.0\nplan: p.yaml\n", path="murmur.yaml")
    assert check_containment(plain, None, {HOST_ENV: "no-landlock"}) is Containment.ADVISORY
    with pytest.raises(DiagnosticError) as err:
        check_containment(plain, "scoped", {HOST_ENV: "no-landlock"})  # --containment raises it
    d = err.value.diagnostics[0]
    assert "the containment class is scoped (mur run --containment scoped), but this host" in d.message
    assert d.hint is not None and "drop `--containment scoped`" in d.hint
    with pytest.raises(DiagnosticError) as err:
        check_containment(plain, None, {HOST_ENV: "no-mountns", "MURMUR_SANDBOX_CLASS": "sealed"})
    d = err.value.diagnostics[0]
    assert "sealed (MURMUR_SANDBOX_CLASS=sealed)" in d.message and "a mount namespace" in d.message
    assert d.hint is not None and "unset MURMUR_SANDBOX_CLASS" in d.hint


def test_kernel_refusal_is_e_sbx_001(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **kw: object) -> None:
        raise OSError(1, "unshare: Operation not permitted")

    monkeypatch.setattr(compiled.namespaces, "build", refuse)
    with pytest.raises(compiled.SandboxError) as err:
        compiled.compile(_policy(tmp_path), HostSupport(landlock.abi() or 1, True, True, True))
    assert err.value.diagnostic.code == "E-SBX-001"
    assert "could not be made" in err.value.diagnostic.message


def test_advisory_compiles_to_nothing(tmp_path: Path) -> None:
    box = compiled.compile(policy.Policy(klass=Containment.ADVISORY, workdir=str(tmp_path)))
    assert box.confinement() is None and box.proxy_url is None
    box.close()
