"""Tests of deterministic builds."""

from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.registry import build
from registry.helpers import capsule_dir


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


class TestBuild:
    def test_same_sources_same_bytes(self, tmp_path: Path) -> None:
        """Two builds, and a copy with other mtimes and modes elsewhere, hash the same."""
        src = capsule_dir(tmp_path / "a")
        first = _sha(build(src))
        assert _sha(build(src)) == first
        copy = tmp_path / "b" / "demo"
        shutil.copytree(src, copy)
        os.utime(copy / "plan.yaml", (1, 1))
        os.chmod(copy / "plan.yaml", 0o600)
        assert _sha(build(copy)) == first

    def test_contents_change_hash(self, tmp_path: Path) -> None:
        """Changing a packed file changes the hash."""
        src = capsule_dir(tmp_path)
        first = _sha(build(src))
        (src / "notes.md").write_text("more")
        assert _sha(build(src)) != first

    def test_exclusions(self, tmp_path: Path) -> None:
        """Workdirs, stores, archives, caches, the lock and .env are never packed."""
        src = capsule_dir(tmp_path)
        for rel in ("workdir/ses_1/trace.jsonl", ".murmur/artifacts/x", "__pycache__/m.pyc",
                    "old-0.0.1.mur.zip", "murmur.lock", ".env", "lib/helper.py",
                    "lib/__pycache__/h.pyc", ".git/HEAD", "lib/workdir/kept.txt"):
            p = src / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("x")
        with zipfile.ZipFile(build(src)) as zf:
            names = zf.namelist()
        assert names == ["lib/helper.py", "lib/workdir/kept.txt", "murmur.yaml", "plan.yaml"]

    def test_output_directory_and_file(self, tmp_path: Path) -> None:
        """--output may be a directory (standard name inside) or a file path."""
        src = capsule_dir(tmp_path)
        out_dir = tmp_path / "dist"
        out_dir.mkdir()
        assert build(src, output=out_dir) == out_dir / "demo-0.1.0.mur.zip"
        assert build(src, output=tmp_path / "x.zip") == tmp_path / "x.zip"
        assert (tmp_path / "x.zip").read_bytes() == (out_dir / "demo-0.1.0.mur.zip").read_bytes()

    def test_missing_plan_file(self, tmp_path: Path) -> None:
        """A plan the manifest names but the directory lacks is E-BLD-002."""
        src = capsule_dir(tmp_path)
        (src / "plan.yaml").unlink()
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code == "E-BLD-002"

    def test_plan_in_excluded_path(self, tmp_path: Path) -> None:
        """A plan inside an excluded directory would not be packed: E-BLD-002."""
        src = capsule_dir(tmp_path)
        (src / "workdir").mkdir()
        (src / "workdir" / "p.yaml").write_text("steps: []\n")
        text = (src / "murmur.yaml").read_text().replace("plan: plan.yaml", "plan: workdir/p.yaml")
        (src / "murmur.yaml").write_text(text)
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code == "E-BLD-002"

    def test_symlink_in_sources(self, tmp_path: Path) -> None:
        """A symlink among the sources is E-BLD-005."""
        src = capsule_dir(tmp_path)
        os.symlink("/etc/hostname", src / "link")
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code == "E-BLD-005"

    def test_not_a_directory(self, tmp_path: Path) -> None:
        """A missing source directory is E-IO-001."""
        with pytest.raises(DiagnosticError) as info:
            build(tmp_path / "nope")
        assert info.value.code == "E-IO-001"

    def test_invalid_manifest(self, tmp_path: Path) -> None:
        """A bad manifest stops the build with its own code and writes no archive."""
        src = capsule_dir(tmp_path)
        (src / "murmur.yaml").write_text("name: demo\nversion: edge\n")
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code == "E-REG-004"
        assert not list(src.glob("*.mur.zip"))


_TR_PLAN = "steps:\n  - id: a\n    shell: [tr, a, b]\noutput: \"{{ steps.a.stdout }}\"\n"
_DUP_PLAN = (
    "steps:\n  - id: a\n    shell: [echo, x]\n  - id: a\n    shell: [echo, y]\n"
    "output: \"{{ steps.a.stdout }}\"\n"
)
_CYCLE_PLAN = (
    "steps:\n  - id: a\n    shell: [echo, x]\n    depends_on: [b]\n"
    "  - id: b\n    shell: [echo, y]\n    depends_on: [a]\noutput: \"{{ steps.a.stdout }}\"\n"
)


class TestBuildChecksPlan:
    @pytest.mark.parametrize(
        ("plan", "code"),
        [
            (_TR_PLAN, "E-PLN-006"),
            ("steps: [\n", "E-PLN-002"),
            ("", "E-PLN-002"),
            (_DUP_PLAN, None),
            (_CYCLE_PLAN, None),
        ],
        ids=["ungranted-binary", "invalid-yaml", "empty", "duplicate-ids", "cycle"],
    )
    def test_plan_run_refuses_is_refused(self, tmp_path: Path, plan: str, code: str | None) -> None:
        """A plan `mur run` would refuse stops the build with its E-PLN code; no archive."""
        src = capsule_dir(tmp_path)
        (src / "plan.yaml").write_text(plan)
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code.startswith("E-PLN-")
        if code is not None:
            assert info.value.code == code
        assert not list(src.glob("*.mur.zip"))

    def test_capsule_without_plan_is_not_plan_checked(self, tmp_path: Path) -> None:
        """An inference capsule (no `plan:`) builds without any plan check."""
        src = tmp_path / "agent"
        src.mkdir()
        (src / "murmur.yaml").write_text(
            "name: agent\nversion: 0.1.0\ninference:\n  model: m\n"
        )
        assert build(src).is_file()
