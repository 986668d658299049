"""Tests of removing old formation directories by the entry member's trace.retain."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from murmur import procstat
from murmur.formation.launch import dirs, retention
from murmur.formation.launch.retention import FormationEntry, Removal, decide
from murmur.manifest.model import Retain

DAY_MS = 86_400_000
NOW = 1_800_000_000_000


def frm_at(ms: int) -> str:
    """A formation id minted at ``ms`` (uuid7 layout, random tail)."""
    return f"frm_{ms:012x}7{os.urandom(10).hex()[:19]}"


def entry(ms: int, *, project: str = "/p", running: bool = False, marker: bool = True) -> FormationEntry:
    return FormationEntry(frm_at(ms), ms, dirs.Marker(project, 1, "") if marker else None, running)


class TestDecide:
    def test_max_sessions_keeps_newest(self) -> None:
        """Keep N newest (the current one counted); older ones go, newest first, as max_sessions."""
        es = [entry(NOW - i * 1000) for i in range(5)]
        out = decide(es, project_dir="/p", current_id=es[0].formation_id,
                     retain=Retain(max_sessions=2), now_ms=NOW)
        assert out == [Removal(e.formation_id, "max_sessions") for e in es[2:]]

    def test_max_age(self) -> None:
        """Older than max_age (from the id's time) goes as max_age, even within max_sessions."""
        es = [entry(NOW), entry(NOW - 2 * DAY_MS)]
        out = decide(es, project_dir="/p", current_id=es[0].formation_id,
                     retain=Retain(max_sessions=10, max_age=86_400), now_ms=NOW)
        assert out == [Removal(es[1].formation_id, "max_age")]

    def test_both_limits_reason_is_max_age(self) -> None:
        """A directory over both limits is removed for max_age."""
        es = [entry(NOW), entry(NOW - 3 * DAY_MS)]
        out = decide(es, project_dir="/p", current_id=es[0].formation_id,
                     retain=Retain(max_sessions=1, max_age=86_400), now_ms=NOW)
        assert out == [Removal(es[1].formation_id, "max_age")]

    def test_never_removed(self) -> None:
        """Current or newer, running, another project's, or unmarked: never removed."""
        current = entry(NOW - 10 * DAY_MS)
        newer = entry(NOW - 1000)
        running = entry(NOW - 20 * DAY_MS, running=True)
        other = entry(NOW - 30 * DAY_MS, project="/elsewhere")
        bare = entry(NOW - 40 * DAY_MS, marker=False)
        out = decide([current, newer, running, other, bare], project_dir="/p",
                     current_id=current.formation_id,
                     retain=Retain(max_sessions=0, max_age=1), now_ms=NOW)
        assert out == []

    def test_no_retain(self) -> None:
        """Without trace.retain, no formation directory is ever removed."""
        es = [entry(NOW - i * DAY_MS) for i in range(4)]
        assert decide(es, project_dir="/p", current_id=es[0].formation_id, retain=None, now_ms=NOW) == []
        assert decide(es, project_dir="/p", current_id=es[0].formation_id, retain=Retain(),
                      now_ms=NOW) == []

    def test_running_counts_toward_kept(self) -> None:
        """A running formation still counts in max_sessions' ranking."""
        es = [entry(NOW), entry(NOW - 1000, running=True), entry(NOW - 2000)]
        out = decide(es, project_dir="/p", current_id=es[0].formation_id,
                     retain=Retain(max_sessions=2), now_ms=NOW)
        assert out == [Removal(es[2].formation_id, "max_sessions")]


class TestRunPass:
    def _make(self, home: Path, project: Path, ms: int, *, marker_project: str | None = None,
              pid: int = 999_999_999) -> Path:
        frm = frm_at(ms)
        d = home / "formations" / project.name / frm
        (d / "peer").mkdir(parents=True)
        m = dirs.Marker(marker_project or str(project), pid, "1")
        (d / "formation.json").write_text(m.to_json())
        rec = dirs.records_dir_for(d.resolve()) / "peer" / "ses_x"
        rec.mkdir(parents=True)
        return d

    def test_removes_dirs_and_records(self, tmp_path: Path, murmur_home: Path) -> None:
        """Each removal takes the directory and its records, with one stderr line, newest first."""
        project = tmp_path / "proj"
        project.mkdir()
        old1 = self._make(murmur_home, project, NOW - 5000)
        old2 = self._make(murmur_home, project, NOW - 9000)
        cur = self._make(murmur_home, project, NOW)
        err = io.StringIO()
        done = retention.retention_pass(project, cur.name, Retain(max_sessions=1), now_ms=NOW, err=err)
        assert [r.formation_id for r in done] == [old1.name, old2.name]
        assert not old1.exists() and not old2.exists() and cur.exists()
        assert not dirs.records_dir_for(old1.resolve()).exists()
        assert dirs.records_dir_for(cur.resolve()).exists()
        assert err.getvalue().splitlines() == [
            f"[mur run] retention: removed formation {old1.name} (max_sessions)",
            f"[mur run] retention: removed formation {old2.name} (max_sessions)",
        ]

    def test_live_launcher_protects(self, tmp_path: Path, murmur_home: Path) -> None:
        """A formation whose launcher still runs (pid + start time) is kept."""
        import os

        project = tmp_path / "proj"
        project.mkdir()
        d = self._make(murmur_home, project, NOW - 5000, pid=os.getpid())
        m = dirs.Marker(str(project), os.getpid(), str(procstat.start_time(os.getpid())))
        (d / "formation.json").write_text(m.to_json())
        cur = frm_at(NOW)
        assert retention.retention_pass(project, cur, Retain(max_sessions=1), now_ms=NOW,
                                  err=io.StringIO()) == []
        assert d.exists()

    def test_running_record_protects(self, tmp_path: Path, murmur_home: Path) -> None:
        """A running record naming the formation, whose process lives, keeps it."""
        import os

        project = tmp_path / "proj"
        project.mkdir()
        d = self._make(murmur_home, project, NOW - 5000)
        running = murmur_home / "running"
        running.mkdir()
        (running / "ses_a.json").write_text(json.dumps({
            "formation_id": d.name, "pid": os.getpid(),
            "start_time": procstat.start_time(os.getpid()) or 0}))
        assert retention.retention_pass(project, frm_at(NOW), Retain(max_sessions=1), now_ms=NOW,
                                  err=io.StringIO()) == []
        assert d.exists()

    def test_unreadable_running_dir_protects_all(self, tmp_path: Path, murmur_home: Path) -> None:
        """When running/ cannot be read, every formation counts as running."""
        project = tmp_path / "proj"
        project.mkdir()
        d = self._make(murmur_home, project, NOW - 5000)
        (murmur_home / "running").write_text("not a directory")
        assert retention.running_formations() is None
        assert retention.retention_pass(project, frm_at(NOW), Retain(max_sessions=1), now_ms=NOW,
                                  err=io.StringIO()) == []
        assert d.exists()
