"""`mur new --roster NAME`: the scaffold writer (atomic, refusing) and what it writes."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from murmur.errors import DiagnosticError
from murmur.formation.roster.admission import admit_file
from murmur.formation.roster.roster_scaffold import roster_files, write_roster_scaffold
from murmur.manifest import scaffold as writer  # the one new-directory writer
from murmur.manifest.load import load_manifest
from murmur.manifest.model import AfterTask, Manifest, TaskAcceptance
from murmur.plan.planfile import load_plan
from murmur.plan.steps import MemberAction, ShellAction


@attrs.frozen
class Resolved:
    sha256: str
    archive: Path
    manifest: Manifest


class TestWrite:
    def test_writes_the_tree(self, tmp_path: Path) -> None:
        """NAME/roster.yaml, lead/ and worker/ sources, README; no temporary left."""
        write_roster_scaffold("demo", tmp_path)
        root = tmp_path / "demo"
        got = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        assert got == sorted(roster_files("demo"))
        assert [p.name for p in tmp_path.iterdir()] == ["demo"]

    def test_members_as_documented(self, tmp_path: Path) -> None:
        """lead: entry, single+exit, localhost, bearer; worker: queue+sleep, serves peers, bearer."""
        write_roster_scaffold("demo", tmp_path)
        lead = load_manifest(tmp_path / "demo" / "lead")
        worker = load_manifest(tmp_path / "demo" / "worker")
        assert (lead.name, lead.version) == ("demo-lead", "0.1.0")
        assert lead.lifecycle.task_acceptance is TaskAcceptance.SINGLE
        assert lead.lifecycle.after_task is AfterTask.EXIT
        assert lead.network_allow == ("localhost",)
        assert lead.authentication is not None and lead.authentication.scheme == "bearer"
        assert worker.name == "demo-worker" and worker.accepts_peer_tasks
        assert worker.lifecycle.task_acceptance is TaskAcceptance.QUEUE
        assert worker.lifecycle.after_task is AfterTask.SLEEP
        assert worker.authentication is not None
        lead_plan = load_plan(tmp_path / "demo" / "lead", lead)
        assert isinstance(lead_plan.steps[0].action, MemberAction)
        assert lead_plan.steps[0].action.member == "worker"
        worker_plan = load_plan(tmp_path / "demo" / "worker", worker)
        assert isinstance(worker_plan.steps[0].action, ShellAction)

    def test_admitted_as_written(self, tmp_path: Path) -> None:
        """Admission accepts the roster with each member's own manifest: edge lead -> worker."""
        write_roster_scaffold("demo", tmp_path)
        root = tmp_path / "demo"

        def resolve(capsule: str, version: str) -> Resolved:
            member = {"local/demo-lead": "lead", "local/demo-worker": "worker"}[capsule]
            assert version == "0.1.0"
            return Resolved("0" * 64, root / member, load_manifest(root / member))

        admitted = admit_file(root / "roster.yaml", resolve=resolve)
        assert admitted.entry.name == "lead"
        assert [(e.caller, e.callee) for e in admitted.edges] == [("lead", "worker")]
        assert admitted.warnings == ()

    @pytest.mark.parametrize("name", ["Demo", "-demo", "demo-", "de mo", "", "a/b", "x" * 94])
    def test_bad_name(self, tmp_path: Path, name: str) -> None:
        """A name that is not a capsule name is E-NEW-002; nothing is written."""
        with pytest.raises(DiagnosticError) as info:
            write_roster_scaffold(name, tmp_path)
        assert info.value.code == "E-NEW-002"
        assert list(tmp_path.iterdir()) == []

    def test_longest_name(self, tmp_path: Path) -> None:
        """93 characters is the longest name (its worker capsule name is 100)."""
        write_roster_scaffold("x" * 93, tmp_path)
        assert (tmp_path / ("x" * 93) / "roster.yaml").is_file()

    @pytest.mark.parametrize("kind", ["dir", "file", "symlink"])
    def test_existing_path(self, tmp_path: Path, kind: str) -> None:
        """An existing NAME (any kind) is E-NEW-003 and is left untouched."""
        target = tmp_path / "demo"
        if kind == "dir":
            target.mkdir()
            (target / "keep").write_text("mine")
        elif kind == "file":
            target.write_text("mine")
        else:
            target.symlink_to(tmp_path / "elsewhere")
        with pytest.raises(DiagnosticError) as info:
            write_roster_scaffold("demo", tmp_path)
        assert info.value.code == "E-NEW-003"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
        if kind == "dir":
            assert (target / "keep").read_text() == "mine"

    def test_failed_rename_leaves_nothing(self, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
        """An I/O failure at the final rename is E-IO-003 and removes the temporary."""
        def broken(src: object, dst: object) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(writer.os, "rename", broken)
        with pytest.raises(DiagnosticError) as info:
            write_roster_scaffold("demo", tmp_path)
        assert info.value.code == "E-IO-003"
        assert list(tmp_path.iterdir()) == []

    def test_target_appears_before_rename(self, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
        """If NAME appears while writing, E-NEW-003 and the other writer's files are kept."""
        real_rename = os.rename

        def racing(src: str, dst: str) -> None:
            Path(dst).mkdir()
            (Path(dst) / "theirs").write_text("x")
            real_rename(src, dst)

        monkeypatch.setattr(writer.os, "rename", racing)
        with pytest.raises(DiagnosticError) as info:
            write_roster_scaffold("demo", tmp_path)
        assert info.value.code == "E-NEW-003"
        assert [p.name for p in tmp_path.iterdir()] == ["demo"]
        assert [p.name for p in (tmp_path / "demo").iterdir()] == ["theirs"]
