"""Tests of the stores: install, resolve (project then global), tampering, lock checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.registry import build, install, list_installed, rehash, resolve, resolve_in_store
from murmur.registry.lock import Pin, lock_path, write_pin
from murmur.registry.store import sha256_bytes
from registry.helpers import MANIFEST, capsule_dir, make_zip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project directory."""
    p = tmp_path / "project"
    p.mkdir()
    return p


def _zip(tmp_path: Path, *, version: str = "0.1.0", extra: str = "") -> Path:
    src = capsule_dir(tmp_path / f"src-{version}-{len(extra)}", version=version, extra=extra)
    return build(src)


class TestInstall:
    def test_install_and_resolve(self, tmp_path: Path, project: Path) -> None:
        """An installed zip resolves as local/<name> with its bytes, root and manifest."""
        z = _zip(tmp_path)
        inst = install(z, global_=False, project_dir=project)
        assert (inst.scope, inst.ref, inst.name, inst.version) == ("project", "local/demo", "demo", "0.1.0")
        assert inst.sha256 == sha256_bytes(z.read_bytes()) == rehash(inst)
        assert inst.archive.read_bytes() == z.read_bytes()
        assert (inst.root / "murmur.yaml").is_file() and (inst.root / "plan.yaml").is_file()
        again = resolve("local/demo", "0.1.0", project_dir=project)
        assert again == inst

    def test_unwritable_global_store_is_a_diagnostic(
        self, tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A MURMUR_HOME that is a file gives E-IO-003 naming the store, not a traceback."""
        home_file = tmp_path / "home-is-a-file"
        home_file.write_text("")
        monkeypatch.setenv("MURMUR_HOME", str(home_file))
        with pytest.raises(DiagnosticError) as info:
            install(_zip(tmp_path), global_=True, project_dir=project)
        assert info.value.code == "E-IO-003"
        assert "global store" in str(info.value) and str(home_file) in str(info.value)
        assert home_file.read_text() == ""

    def test_install_directory_builds_first(self, tmp_path: Path, project: Path) -> None:
        """Installing a directory builds it, then installs the archive."""
        src = capsule_dir(tmp_path)
        inst = install(src, global_=True, project_dir=project)
        assert inst.scope == "global" and (src / "demo-0.1.0.mur.zip").is_file()

    def test_project_before_global(self, tmp_path: Path, project: Path) -> None:
        """Resolution looks in the project store first, then the global store."""
        g = install(_zip(tmp_path, extra="description: global\n"), global_=True, project_dir=project)
        assert resolve("local/demo", "0.1.0", project_dir=project).scope == "global"
        p = install(_zip(tmp_path, extra="description: proj\n"), global_=False, project_dir=project)
        got = resolve("local/demo", "0.1.0", project_dir=project)
        assert got.scope == "project" and got.sha256 == p.sha256 != g.sha256
        assert [(i.scope, i.ref) for i in list_installed(project_dir=project)] == [
            ("project", "local/demo"), ("global", "local/demo")]

    def test_reinstall_replaces_cleanly(self, tmp_path: Path, project: Path) -> None:
        """Installing the same version again replaces it and leaves no temporary directories."""
        install(_zip(tmp_path, extra="description: one\n"), global_=False, project_dir=project)
        second = install(_zip(tmp_path, extra="description: two\n"), global_=False, project_dir=project)
        assert resolve("local/demo", "0.1.0", project_dir=project).sha256 == second.sha256
        store = project / ".murmur" / "artifacts"
        assert [p.name for p in store.iterdir()] == ["local"]

    def test_failed_install_keeps_previous(self, tmp_path: Path, project: Path) -> None:
        """A failed reinstall leaves the previous entry resolvable and byte-identical."""
        from registry.helpers import corrupt_second_entry

        first = install(_zip(tmp_path), global_=False, project_dir=project)
        bad = tmp_path / "bad.mur.zip"
        bad.write_bytes(corrupt_second_entry())
        with pytest.raises(DiagnosticError):
            install(bad, global_=False, project_dir=project)
        assert resolve("local/demo", "0.1.0", project_dir=project).sha256 == first.sha256
        assert [p.name for p in (project / ".murmur" / "artifacts").iterdir()] == ["local"]

    def test_symlink_in_destination_refused(self, tmp_path: Path, project: Path) -> None:
        """A symlink already in the store path is E-BLD-005 and nothing is written through it."""
        outside = tmp_path / "outside"
        outside.mkdir()
        store = project / ".murmur" / "artifacts"
        store.mkdir(parents=True)
        os.symlink(outside, store / "local")
        with pytest.raises(DiagnosticError) as info:
            install(_zip(tmp_path), global_=False, project_dir=project)
        assert info.value.code == "E-BLD-005"
        assert list(outside.iterdir()) == []

    def test_symlinked_store_root_refused(self, tmp_path: Path, project: Path) -> None:
        """A project whose .murmur is a symlink is refused."""
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        os.symlink(outside, project / ".murmur")
        with pytest.raises(DiagnosticError) as info:
            install(_zip(tmp_path), global_=False, project_dir=project)
        assert info.value.code == "E-BLD-005" and list(outside.iterdir()) == []

    def test_missing_source(self, tmp_path: Path) -> None:
        """A missing file is E-IO-001."""
        with pytest.raises(DiagnosticError) as info:
            install(tmp_path / "nope.mur.zip", global_=False, project_dir=tmp_path)
        assert info.value.code == "E-IO-001"

    @pytest.mark.parametrize("kind", ["fifo", "device"])
    def test_a_source_that_is_not_a_regular_file_is_refused_unread(self, tmp_path: Path, kind: str) -> None:
        """A FIFO with no writer (which would block the read for ever) or ``/dev/zero`` (which
        would be read without end) given as the archive is E-IO-003, naming what it is."""
        if kind == "fifo":
            source = tmp_path / "pipe.mur.zip"
            os.mkfifo(source)
        else:
            source = tmp_path / "zero.mur.zip"
            source.symlink_to("/dev/zero")
        with pytest.raises(DiagnosticError) as info:
            install(source, global_=False, project_dir=tmp_path)
        assert info.value.code == "E-IO-003"
        assert "not a regular file" in str(info.value), str(info.value)


class TestInstallChecksPlan:
    def test_zip_with_ungranted_binary_refused(self, tmp_path: Path, project: Path) -> None:
        """A hand-made zip whose plan uses an ungranted binary is E-PLN-006; nothing installed."""
        plan = "steps:\n  - id: a\n    shell: [tr, a, b]\noutput: \"{{ steps.a.stdout }}\"\n"
        z = tmp_path / "demo-0.1.0.mur.zip"
        z.write_bytes(make_zip([("murmur.yaml", MANIFEST.encode()), ("plan.yaml", plan.encode())]))
        with pytest.raises(DiagnosticError) as info:
            install(z, global_=False, project_dir=project)
        assert info.value.code == "E-PLN-006"
        assert "plan.yaml" in str(info.value)
        assert list_installed(project_dir=project) == []

    def test_zip_without_its_plan_refused(self, tmp_path: Path, project: Path) -> None:
        """A zip that lacks the plan its manifest names is E-PLN-001."""
        z = tmp_path / "demo-0.1.0.mur.zip"
        z.write_bytes(make_zip([("murmur.yaml", MANIFEST.encode())]))
        with pytest.raises(DiagnosticError) as info:
            install(z, global_=False, project_dir=project)
        assert info.value.code == "E-PLN-001"


class TestResolve:
    def test_bare_name_refused_with_hint(self, project: Path) -> None:
        """A bare name is E-REG-007 with a hint naming local/<name>."""
        with pytest.raises(DiagnosticError) as info:
            resolve("demo", "0.1.0", project_dir=project)
        assert info.value.code == "E-REG-007"
        assert "local/demo" in (info.value.diagnostics[0].hint or "")

    @pytest.mark.parametrize("ref", ["local/../x", "local/Demo", "a/b/c", "/demo", "local/"])
    def test_invalid_names(self, ref: str, project: Path) -> None:
        """Names that are not <scope>/<name> are E-REG-007 (no path tricks reach the disk)."""
        with pytest.raises(DiagnosticError) as info:
            resolve(ref, "0.1.0", project_dir=project)
        assert info.value.code == "E-REG-007"

    @pytest.mark.parametrize("version", ["", "  ", "latest", "stable", "edge", "LATEST"])
    def test_reserved_versions_resolve_to_nothing(self, tmp_path: Path, project: Path,
                                                  version: str) -> None:
        """Blank and reserved words resolve to nothing and say so (E-REG-004)."""
        install(_zip(tmp_path), global_=False, project_dir=project)
        with pytest.raises(DiagnosticError) as info:
            resolve("local/demo", version, project_dir=project)
        assert info.value.code == "E-REG-004"
        assert "resolves to nothing" in info.value.diagnostics[0].message

    def test_not_installed_lists_versions(self, tmp_path: Path, project: Path) -> None:
        """A missing version is E-REG-001 and the hint lists installed versions."""
        install(_zip(tmp_path), global_=False, project_dir=project)
        with pytest.raises(DiagnosticError) as info:
            resolve("local/demo", "0.2.0", project_dir=project)
        assert info.value.code == "E-REG-001" and "0.1.0" in (info.value.diagnostics[0].hint or "")

    def test_tampered_archive_refused(self, tmp_path: Path, project: Path) -> None:
        """Changed archive bytes are E-REG-002; rehash shows the new hash."""
        inst = install(_zip(tmp_path), global_=False, project_dir=project)
        inst.archive.write_bytes(inst.archive.read_bytes() + b"\0")
        assert rehash(inst) != inst.sha256
        with pytest.raises(DiagnosticError) as info:
            resolve("local/demo", "0.1.0", project_dir=project)
        assert info.value.code == "E-REG-002"
        assert list_installed(project_dir=project) == []

    def test_rehash_missing_archive(self, tmp_path: Path, project: Path) -> None:
        """rehash of a vanished archive is the empty string."""
        inst = install(_zip(tmp_path), global_=False, project_dir=project)
        inst.archive.unlink()
        assert rehash(inst) == ""

    def test_resolve_in_store(self, tmp_path: Path, project: Path, murmur_home: Path) -> None:
        """resolve_in_store takes bare or scoped names and looks in one store only."""
        install(_zip(tmp_path), global_=True, project_dir=project)
        store = murmur_home / "artifacts"
        for name in ("demo", "local/demo"):
            got = resolve_in_store(store, name, "0.1.0")
            assert got is not None and got.scope == "registry" and got.ref == "local/demo"
        assert resolve_in_store(store, "demo", "9.9.9") is None
        assert resolve_in_store(store, "demo", "latest") is None
        assert resolve_in_store(project / ".murmur" / "artifacts", "demo", "0.1.0") is None


class TestLockChecks:
    def test_matching_pin_passes(self, tmp_path: Path, project: Path) -> None:
        """A pin that agrees lets resolution through."""
        inst = install(_zip(tmp_path), global_=False, project_dir=project)
        write_pin(lock_path(project), Pin("local/demo", "0.1.0", inst.sha256))
        assert resolve("local/demo", "0.1.0", project_dir=project).sha256 == inst.sha256

    def test_hash_disagreement(self, tmp_path: Path, project: Path) -> None:
        """A pinned hash that differs is E-REG-005; check_lock=False skips the check."""
        install(_zip(tmp_path), global_=False, project_dir=project)
        write_pin(lock_path(project), Pin("local/demo", "0.1.0", "0" * 64))
        with pytest.raises(DiagnosticError) as info:
            resolve("local/demo", "0.1.0", project_dir=project)
        assert info.value.code == "E-REG-005"
        assert resolve("local/demo", "0.1.0", project_dir=project, check_lock=False)

    def test_version_disagreement(self, tmp_path: Path, project: Path) -> None:
        """Resolving another version than the pinned one is E-REG-005."""
        inst = install(_zip(tmp_path, version="0.2.0"), global_=False, project_dir=project)
        write_pin(lock_path(project), Pin("local/demo", "0.1.0", inst.sha256))
        with pytest.raises(DiagnosticError) as info:
            resolve("local/demo", "0.2.0", project_dir=project)
        assert info.value.code == "E-REG-005" and "0.1.0" in info.value.diagnostics[0].message

    def test_resolving_never_writes_the_lock(self, tmp_path: Path, project: Path) -> None:
        """No lock appears, and an existing one is byte-identical after resolving."""
        inst = install(_zip(tmp_path), global_=False, project_dir=project)
        resolve("local/demo", "0.1.0", project_dir=project)
        assert not lock_path(project).exists()
        write_pin(lock_path(project), Pin("local/demo", "0.1.0", inst.sha256))
        before = lock_path(project).read_bytes(), lock_path(project).stat().st_mtime_ns
        resolve("local/demo", "0.1.0", project_dir=project)
        assert (lock_path(project).read_bytes(), lock_path(project).stat().st_mtime_ns) == before

    def test_malformed_lock(self, tmp_path: Path, project: Path) -> None:
        """An unparseable lock is E-REG-008 at its line."""
        install(_zip(tmp_path), global_=False, project_dir=project)
        lock_path(project).write_text("lock_version: 1\npins:\n  local/demo: 0.1.0\n")
        with pytest.raises(DiagnosticError) as info:
            resolve("local/demo", "0.1.0", project_dir=project)
        d = info.value.diagnostics[0]
        assert d.code == "E-REG-008" and d.location is not None and d.location.line == 3
