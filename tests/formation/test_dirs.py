"""Tests of formation directories and the ownership marker."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from murmur import ids
from murmur.formation.launch import dirs


def _layout(tmp_path: Path, murmur_home: Path) -> dirs.FormationLayout:
    project = tmp_path / "work" / "audit"
    project.mkdir(parents=True)
    return dirs.FormationLayout(project, ids.new_id("frm"))


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


class TestLayout:
    def test_paths(self, tmp_path: Path, murmur_home: Path) -> None:
        """Peers work in $MURMUR_HOME/formations/<project>/<frm>/<member>."""
        layout = _layout(tmp_path, murmur_home)
        assert layout.formation_dir == murmur_home / "formations" / "audit" / layout.formation_id
        assert layout.peer_dir("coder") == layout.formation_dir / "coder"
        assert layout.marker_path.name == "formation.json"

    def test_records_dir(self, murmur_home: Path) -> None:
        """A work folder's records live under records/ + its path without the leading /."""
        assert dirs.records_dir_for(Path("/a/b")) == murmur_home / "records" / "a" / "b"

    def test_root_project(self) -> None:
        """The filesystem root gets a name of its own."""
        assert dirs.project_key(Path("/")) == "root"


class TestPrepare:
    def test_marker_then_peers(self, tmp_path: Path, murmur_home: Path) -> None:
        """formation.json is 0600 and names the launcher; dirs are owner-only."""
        layout = _layout(tmp_path, murmur_home)
        marker = dirs.Marker(str(layout.project_dir), 4242, "123456")
        made = dirs.prepare_dirs(layout, marker, ["coder", "reviewer"])
        assert made.refusals == () and made.marker_warning is None
        assert made.peer_dirs == {n: layout.peer_dir(n) for n in ("coder", "reviewer")}
        assert json.loads(layout.marker_path.read_text()) == {
            "project_dir": str(layout.project_dir), "launcher_pid": 4242, "launcher_start": "123456",
        }
        assert _mode(layout.marker_path) == 0o600
        for d in (layout.root, layout.project_formations, layout.formation_dir,
                  *made.peer_dirs.values()):
            assert _mode(d) == 0o700
        # the marker is older than (or as old as) every peer dir
        assert all(layout.marker_path.stat().st_mtime_ns <= d.stat().st_mtime_ns
                   for d in made.peer_dirs.values())

    def test_loose_parent_tightened(self, tmp_path: Path, murmur_home: Path) -> None:
        """Existing formations/ and formations/<project>/ are made owner-only."""
        layout = _layout(tmp_path, murmur_home)
        layout.project_formations.mkdir(parents=True)
        os.chmod(layout.root, 0o755)
        os.chmod(layout.project_formations, 0o777)
        dirs.prepare_dirs(layout, dirs.Marker("/p", 1, ""), ["a"])
        assert _mode(layout.root) == 0o700 and _mode(layout.project_formations) == 0o700

    def test_no_peers_makes_nothing(self, tmp_path: Path, murmur_home: Path) -> None:
        """A roster with no peers makes no formation directory and no marker."""
        layout = _layout(tmp_path, murmur_home)
        made = dirs.prepare_dirs(layout, dirs.Marker("/p", 1, ""), [])
        assert made.peer_dirs == {} and not layout.root.exists()

    def test_existing_peer_dir_refused(self, tmp_path: Path, murmur_home: Path) -> None:
        """A path already there is never reused: the peer is refused, naming it."""
        layout = _layout(tmp_path, murmur_home)
        os.makedirs(layout.formation_dir)
        made = dirs.prepare_dirs(layout, dirs.Marker("/p", 1, ""), ["a"])
        assert [r.member for r in made.refusals] == ["a"]
        assert str(layout.formation_dir) in made.refusals[0].reason
        assert "already exists" in made.refusals[0].reason

    def test_marker_unwritable_warns(self, tmp_path: Path, murmur_home: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """A marker that cannot be written is a warning; the launch goes on."""
        layout = _layout(tmp_path, murmur_home)

        def boom(*a: object, **k: object) -> None:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(dirs, "_write_marker", boom)
        made = dirs.prepare_dirs(layout, dirs.Marker("/p", 1, ""), ["a"])
        assert made.refusals == () and "Permission denied" in (made.marker_warning or "")
        line = dirs.marker_warning_line(made.marker_warning or "")
        assert line.startswith("[mur run] warning: formation has no ownership marker (")
        assert line.endswith("); its directory will never be removed automatically")


class TestMarkerParse:
    @pytest.mark.parametrize(
        "text",
        ["", "[]", "{}", '{"project_dir": "", "launcher_pid": 1}',
         '{"project_dir": "/p", "launcher_pid": true}', '{"project_dir": "/p", "launcher_pid": 0}',
         '{"project_dir": "/p", "launcher_pid": 3, "launcher_start": 5}', "not json"],
    )
    def test_bad(self, text: str) -> None:
        """Anything but a well-formed marker reads as no marker."""
        assert dirs.parse_marker(text) is None

    def test_round_trip(self) -> None:
        """A marker reads back as written."""
        m = dirs.Marker("/p", 7, "")
        assert dirs.parse_marker(m.to_json()) == m
