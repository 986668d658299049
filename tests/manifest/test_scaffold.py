"""Tests of the `mur new` capsule scaffold."""

from __future__ import annotations

from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.manifest.load import load_manifest
from murmur.manifest.scaffold import capsule_files, write_capsule_scaffold
from murmur.plan.planfile import load_plan


class TestScaffold:
    def test_writes_valid_plan_capsule(self, tmp_path: Path) -> None:
        """The scaffold's manifest and plan load as written."""
        root = write_capsule_scaffold("demo", tmp_path)
        m = load_manifest(root)
        assert (m.name, m.version, m.plan, m.shell_allow) == ("demo", "0.1.0", "plan.yaml", ("echo",))
        plan = load_plan(root, m)
        assert [s.id for s in plan.steps] == ["answer"]
        assert sorted(p.name for p in root.iterdir()) == sorted(capsule_files("demo"))

    def test_refuses_bad_name(self, tmp_path: Path) -> None:
        """A bad name is E-NEW-002 and writes nothing."""
        with pytest.raises(DiagnosticError) as info:
            write_capsule_scaffold("Bad_Name", tmp_path)
        assert info.value.code == "E-NEW-002"
        assert list(tmp_path.iterdir()) == []

    def test_refuses_existing_path(self, tmp_path: Path) -> None:
        """An existing path is E-NEW-003 and is left untouched, with no temp dir behind."""
        (tmp_path / "demo").write_text("mine")
        with pytest.raises(DiagnosticError) as info:
            write_capsule_scaffold("demo", tmp_path)
        assert info.value.code == "E-NEW-003"
        assert (tmp_path / "demo").read_text() == "mine"
        assert [p.name for p in tmp_path.iterdir()] == ["demo"]
