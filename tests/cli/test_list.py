"""`mur list`: aligned columns, scope flags, and reported (never hidden) store problems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from murmur.cli.cmd_list import table
from murmur.cli.mur import main
from murmur.registry import install
from registry.helpers import capsule_dir


@pytest.fixture
def project(tmp_path: Path, murmur_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project (the cwd) with local/demo in its store and local/hello-world globally."""
    p = tmp_path / "project"
    p.mkdir()
    monkeypatch.chdir(p)
    install(capsule_dir(tmp_path / "src"), global_=False, project_dir=p)
    install(capsule_dir(tmp_path / "src", name="hello-world", version="10.20.30"), global_=True,
            project_dir=p)
    return p


def listed(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["list", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


class TestColumns:
    def test_table_pads_every_column_but_the_last(self) -> None:
        """Each column starts at the same offset on every line."""
        assert table([("A", "BB", "C"), ("aaa", "b", "cc")]) == ["A   BB C", "aaa b  cc"]

    def test_listing_aligned(self, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Header and rows share column offsets; project entries come first."""
        code, lines, err = listed(capsys)
        assert code == 0 and err == ""
        assert [ln.split()[:3] for ln in lines] == [
            ["SCOPE", "NAME", "VERSION"], ["project", "local/demo", "0.1.0"],
            ["global", "local/hello-world", "10.20.30"]]
        for word in ("NAME", "VERSION", "SHA256"):
            col = lines[0].index(word)
            assert all(ln[col - 1] == " " and ln[col] != " " for ln in lines[1:]), lines


class TestScopes:
    def test_global_only(self, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """-g lists only the global store."""
        code, lines, _ = listed(capsys, "-g")
        assert code == 0 and [ln.split()[0] for ln in lines[1:]] == ["global"]

    def test_project_only_json(self, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--project --json lists only the project store."""
        code, lines, _ = listed(capsys, "--project", "--json")
        assert code == 0 and [i["scope"] for i in json.loads(lines[0])] == ["project"]

    def test_flags_exclusive(self, project: Path) -> None:
        """-g with --project is a usage error (exit 2)."""
        assert main(["list", "-g", "--project"]) == 2


class TestProblems:
    def test_corrupt_record_reported(self, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A corrupt installed.json is E-REG-002 on stderr (exit 1); the rest is still listed."""
        record = project / ".murmur/artifacts/local/demo/0.1.0/installed.json"
        record.write_text("{not json")
        code, lines, err = listed(capsys)
        assert code == 1
        assert [ln.split()[1] for ln in lines[1:]] == ["local/hello-world"]
        assert err.startswith("error[E-REG-002]: ") and str(record.parent) in err

    def test_home_is_a_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """MURMUR_HOME naming a regular file is E-IO-003, not "no installed artifacts"."""
        home = tmp_path / "home-file"
        home.write_text("")
        monkeypatch.setenv("MURMUR_HOME", str(home))
        monkeypatch.chdir(tmp_path)
        code, lines, err = listed(capsys)
        assert code == 1 and lines == []
        assert err.startswith("error[E-IO-003]: the global store ")
        assert f"{home} is not a directory" in err and "MURMUR_HOME" in err

    def test_empty_stores(self, tmp_path: Path, murmur_home: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
        """Nothing installed and nothing wrong: `no installed artifacts`, exit 0."""
        monkeypatch.chdir(tmp_path)
        assert listed(capsys) == (0, ["no installed artifacts"], "")
