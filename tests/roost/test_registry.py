"""Tests of the store-backed registry seam and the lowering of resolved artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest

from murmur import paths
from murmur.errors import DiagnosticError
from murmur.manifest.model import Inference, Manifest
from murmur.registry import install
from murmur.roost.registry import Lowerer, ResolvedArtifact, StoreRegistry

from .conftest import capsule


def write_capsule(root: Path, name: str, body: str = "") -> Path:
    """A capsule source directory holding one murmur.yaml."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\n{body}", encoding="utf-8")
    return d


class TestStoreRegistry:
    def test_resolves_installed_capsule(self, tmp_path: Path) -> None:
        """An installed capsule resolves by bare or local/ name with its sha256 and manifest."""
        installed = install(write_capsule(tmp_path, "worker", "capabilities:\n  shell:\n    allow: [git]\n"), global_=True)
        reg = StoreRegistry(paths.global_store())
        for name in ("worker", "local/worker"):
            got = reg.resolve(name, "0.1.0")
            assert got is not None
            assert (got.name, got.version, got.sha256) == ("worker", "0.1.0", installed.sha256)
            assert got.manifest.shell_allow == ("git",)
        assert reg.resolve("worker", "9.9.9") is None
        assert reg.resolve("ghost", "0.1.0") is None

    def test_cache_hit_and_reinstall_miss(self, tmp_path: Path) -> None:
        """A second resolve is a cache hit; reinstalling other bytes is seen at once."""
        calls: list[str] = []
        from murmur.registry import resolve_in_store

        def counting(store: Path, name: str, version: str):  # type: ignore[no-untyped-def]
            calls.append(name)
            return resolve_in_store(store, name, version)

        src = write_capsule(tmp_path, "worker")
        first = install(src, global_=True)
        reg = StoreRegistry(paths.global_store(), counting)
        a = reg.resolve("worker", "0.1.0")
        b = reg.resolve("worker", "0.1.0")
        assert a is b and len(calls) == 1
        write_capsule(tmp_path, "worker", "description: rebuilt\n")
        (src / "worker-0.1.0.mur.zip").unlink()
        second = install(src, global_=True)
        assert second.sha256 != first.sha256
        c = reg.resolve("worker", "0.1.0")
        assert c is not None and c.sha256 == second.sha256 and len(calls) == 2

    def test_a_removed_entry_is_gone_at_once(self, tmp_path: Path) -> None:
        """An entry removed after a cached resolve resolves to nothing (its files are gone)."""
        import shutil

        install(write_capsule(tmp_path, "worker"), global_=True)
        reg = StoreRegistry(paths.global_store())
        assert reg.resolve("worker", "0.1.0") is not None
        shutil.rmtree(paths.global_store() / "local" / "worker" / "0.1.0")
        assert reg.resolve("worker", "0.1.0") is None

    def test_remembered_paths_are_bounded(self, tmp_path: Path) -> None:
        """Coordinates come from clients: the paths remembered for them are bounded, and a
        NUL in them makes no stat error (the lookup judges the name)."""
        from murmur.roost import registry as registry_module

        reg = StoreRegistry(tmp_path)
        for i in range(registry_module._PATHS_KEPT + 10):
            assert reg.resolve(f"ghost{i}", "0.1.0") is None
        assert len(reg._paths) <= registry_module._PATHS_KEPT
        assert reg._files("a\0b", "0.1.0") is not None and registry_module._file_id("a\0b") is None

    def test_bad_names_resolve_to_nothing_or_refuse(self, tmp_path: Path) -> None:
        """Path-like names never escape the store."""
        reg = StoreRegistry(tmp_path)
        assert reg.resolve("worker", "../x") is None
        with pytest.raises(DiagnosticError):
            reg.resolve("../../etc", "0.1.0")


class TestLowerer:
    def test_unset_reference_is_e_man_003(self) -> None:
        """A ${VAR} the daemon lacks fails with E-MAN-003 naming the variable."""
        m = Manifest("refs", "0.1.0", inference=Inference(endpoint="https://${NOPE_HOST}/v1", model="m"))
        with pytest.raises(DiagnosticError) as info:
            Lowerer({})(ResolvedArtifact("refs", "0.1.0", "aa", m))
        assert info.value.code == "E-MAN-003" and "NOPE_HOST" in str(info.value)
        art = Lowerer({"NOPE_HOST": "h"})(ResolvedArtifact("refs", "0.1.0", "aa", m))
        assert art.sha256 == "aa" and art.envelope.capsule == "refs"

    def test_api_key_left_alone(self) -> None:
        """inference.api_key is never resolved by the daemon."""
        m = Manifest("k", "0.1.0", inference=Inference(endpoint="https://h/v1", model="m", api_key="${OPENAI_API_KEY}"))
        art = Lowerer({})(ResolvedArtifact("k", "0.1.0", "bb", m))
        assert art.name == "k"

    def test_memoised_by_content_hash(self) -> None:
        """The same artifact bytes are lowered once."""
        low = Lowerer({})
        r = ResolvedArtifact("a", "1", "cc", capsule("a", "1"))
        assert low(r) is low(r)
