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
        """Changing a packed file changes the hash; changing an undeclared one does not."""
        src = capsule_dir(tmp_path)
        first = _sha(build(src))
        (src / "notes.md").write_text("more")
        assert _sha(build(src)) == first
        (src / "plan.yaml").write_text((src / "plan.yaml").read_text() + "\n# more\n")
        assert _sha(build(src)) != first

    def test_packs_only_what_is_declared(self, tmp_path: Path) -> None:
        """Only murmur.yaml, the plan and requires_files are packed: a stray credentials.txt,
        workdirs, stores, archives, caches, the lock and .env stay out."""
        src = capsule_dir(tmp_path, extra="requires_files:\n  - lib/helper.py\n  - ./lib/workdir/kept.txt\n")
        for rel in ("workdir/ses_1/trace.jsonl", ".murmur/artifacts/x", "__pycache__/m.pyc",
                    "old-0.0.1.mur.zip", "murmur.lock", ".env", "lib/helper.py", "credentials.txt",
                    "lib/__pycache__/h.pyc", ".git/HEAD", "lib/workdir/kept.txt", "notes.md"):
            p = src / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("x")
        with zipfile.ZipFile(build(src)) as zf:
            names = zf.namelist()
        assert names == ["lib/helper.py", "lib/workdir/kept.txt", "murmur.yaml", "plan.yaml"]

    def test_plan_only_capsule_packs_two_files(self, tmp_path: Path) -> None:
        """Without requires_files a plan capsule is murmur.yaml and its plan, nothing else."""
        src = capsule_dir(tmp_path)
        (src / "README.md").write_text("x")
        with zipfile.ZipFile(build(src)) as zf:
            assert zf.namelist() == ["murmur.yaml", "plan.yaml"]

    @pytest.mark.parametrize("entry, code", [
        ("missing.txt", "E-BLD-002"), (".env", "E-BLD-002"), ("workdir/a.txt", "E-BLD-002"),
        ("lib", "E-BLD-002"), ("link.txt", "E-BLD-005"), ("../outside.txt", "E-MAN-003"),
        ("/etc/hostname", "E-MAN-003"),
    ])
    def test_bad_requires_files_entry(self, tmp_path: Path, entry: str, code: str) -> None:
        """A declared file that is missing, never packed, a directory, a symlink or outside
        the capsule refuses the build and writes no archive."""
        src = capsule_dir(tmp_path, extra=f"requires_files: ['{entry}']\n")
        (src / "lib").mkdir()
        (src / ".env").write_text("K=v\n")
        (src / "workdir").mkdir()
        (src / "workdir" / "a.txt").write_text("x")
        os.symlink("/etc/hostname", src / "link.txt")
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code == code
        assert not list(src.glob("*.mur.zip"))

    def test_output_parent_must_exist(self, tmp_path: Path) -> None:
        """--output in a directory that does not exist is refused; nothing is created."""
        src = capsule_dir(tmp_path)
        with pytest.raises(DiagnosticError) as info:
            build(src, output=tmp_path / "nonexistent" / "dir" / "x.zip")
        assert info.value.code == "E-IO-001"
        assert not (tmp_path / "nonexistent").exists()

    def test_literal_secret_warns(self, tmp_path: Path) -> None:
        """A literal api_key warns W-SEC-004 without showing the value; a reference does not."""
        from murmur.diagnostics import Diagnostic

        body = ("name: agent\nversion: 0.1.0\ninference:\n  endpoint: https://api.example.com/v1\n"
                "  model: m\n  api_key: {key}\n  driver: {{artifact: murmur-driver-openai}}\n")
        for key, expected in (("sk-live-123456", ["W-SEC-004"]), ("${PROVIDER_KEY}", [])):
            src = tmp_path / ("lit" if expected else "ref")
            src.mkdir()
            (src / "murmur.yaml").write_text(body.format(key=key))
            warnings: list[Diagnostic] = []
            build(src, warnings=warnings)
            assert [w.code for w in warnings] == expected
            assert all("sk-live" not in w.render() for w in warnings)

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
        """A declared file reached through a symlinked directory is E-BLD-005; an undeclared
        symlink is not packed and not looked at."""
        src = capsule_dir(tmp_path, extra="requires_files: [lib/x.txt]\n")
        (tmp_path / "real").mkdir()
        (tmp_path / "real" / "x.txt").write_text("x")
        os.symlink(tmp_path / "real", src / "lib")
        os.symlink("/etc/hostname", src / "link")
        with pytest.raises(DiagnosticError) as info:
            build(src)
        assert info.value.code == "E-BLD-005"
        (src / "lib").unlink()
        (src / "murmur.yaml").write_text((src / "murmur.yaml").read_text().replace("requires_files: [lib/x.txt]\n", ""))
        with zipfile.ZipFile(build(src)) as zf:
            assert "link" not in zf.namelist()

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
