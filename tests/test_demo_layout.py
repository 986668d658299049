"""Tests of the demo's directories and target: --home rules, the default target, the copy."""

from __future__ import annotations

from pathlib import Path

import pytest

import murmur
from murmur.demo.layout import (
    MARKER,
    DemoOutcome,
    Layout,
    copy_example,
    default_target,
    examples_dir,
    prepare_layout,
    resolve_target,
)
from murmur.errors import DiagnosticError


class TestTarget:
    def test_default_is_the_installed_package_source(self) -> None:
        """Without PATH the demo audits the murmur package it runs from."""
        assert default_target() == Path(murmur.__file__).resolve().parent
        assert resolve_target(None) == default_target()

    def test_relative_path_becomes_absolute(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A relative PATH is resolved, so members (with other workdirs) find it."""
        (tmp_path / "src").mkdir()
        monkeypatch.chdir(tmp_path)
        assert resolve_target(Path("src")) == (tmp_path / "src").resolve()

    def test_not_a_directory_is_refused(self, tmp_path: Path) -> None:
        """A file or a missing path is E-IO-001, naming it, before anything starts."""
        (tmp_path / "f").write_text("x")
        for bad in (tmp_path / "f", tmp_path / "missing"):
            with pytest.raises(DiagnosticError) as info:
                resolve_target(bad)
            (d,) = info.value.diagnostics
            assert d.code == "E-IO-001" and str(bad) in d.message


class TestLayout:
    def test_temporary_directory_is_marked(self) -> None:
        """Without --home the demo makes a fresh marked temporary directory."""
        layout, temporary = prepare_layout(None)
        try:
            assert temporary and (layout.base / MARKER).is_file()
            assert layout.home == layout.base / "home" and layout.project == layout.base / "audit"
            assert layout.artifacts == layout.base / "home" / "artifacts"
        finally:
            for p in layout.base.iterdir():
                p.unlink()
            layout.base.rmdir()

    def test_home_new_empty_or_earlier_demo(self, tmp_path: Path) -> None:
        """--home takes a new directory, an empty one, or one an earlier demo used."""
        _layout, temporary = prepare_layout(tmp_path / "new")
        assert not temporary and (tmp_path / "new" / MARKER).is_file()
        (tmp_path / "new" / "home").mkdir()
        assert prepare_layout(tmp_path / "new")[0].base == tmp_path / "new"
        (tmp_path / "empty").mkdir()
        assert prepare_layout(tmp_path / "empty")[0].base == tmp_path / "empty"

    def test_home_holding_other_things_is_refused(self, tmp_path: Path) -> None:
        """A non-empty directory the demo did not make is E-DMO-001 and is left untouched."""
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "thesis.tex").write_text("precious")
        (tmp_path / "file").write_text("x")
        for bad in (tmp_path / "mine", tmp_path / "file"):
            with pytest.raises(DiagnosticError) as info:
                prepare_layout(bad)
            assert info.value.diagnostics[0].code == "E-DMO-001"
        assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["thesis.tex"]

    def test_records_dir_follows_the_session_layout(self, tmp_path: Path) -> None:
        """A session's records are <home>/records/<workdir without its leading />/<ses>."""
        layout, _ = prepare_layout(tmp_path / "d")
        assert layout.records_dir(tmp_path / "w", "ses_1") == (
            layout.home / "records" / str(tmp_path / "w").lstrip("/") / "ses_1")


class TestCopy:
    def test_copy_replaces_an_earlier_copy(self, tmp_path: Path) -> None:
        """The example is copied fresh (a stale file from an earlier run is gone)."""
        layout, _ = prepare_layout(tmp_path / "d")
        copy_example(layout)
        (layout.project / "stale.txt").write_text("x")
        copy_example(layout)
        shipped = sorted(p.relative_to(examples_dir()).as_posix() for p in examples_dir().rglob("*") if p.is_file())
        copied = sorted(p.relative_to(layout.project).as_posix() for p in layout.project.rglob("*") if p.is_file())
        assert copied == shipped and "roster.yaml" in copied
        assert layout.desk_workdir.is_dir()


@pytest.mark.parametrize("kept", [True, False])
def test_json_summary_names_only_paths_that_remain(tmp_path: Path, kept: bool) -> None:
    """--json always carries the report's text; its paths are null once the directory is gone."""
    layout = Layout(tmp_path / "demo")
    outcome = DemoOutcome(0, layout, kept=kept, report="# Audit\n", report_path=layout.base / "result.txt",
                          formation_id="frm_x", child_dir=layout.desk_workdir / "children" / "c")
    summary = outcome.summary()
    assert summary["report_text"] == "# Audit\n" and summary["kept"] is kept
    paths = [summary[k] for k in ("report", "child_dir", "home", "base")]
    if kept:
        assert paths == [str(layout.base / "result.txt"), str(layout.desk_workdir / "children" / "c"),
                         str(layout.home), str(layout.base)]
    else:
        assert paths == [None, None, None, None]
