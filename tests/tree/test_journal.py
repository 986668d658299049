"""The host journal: concurrent appends, bounded pruning of whole trees (spec/tree.md)."""

from __future__ import annotations

import json
import multiprocessing
from multiprocessing import resource_tracker
from pathlib import Path

import pytest

from murmur.tree import journal


def _writer(home: str, n: int, tag: int) -> None:
    import os

    os.environ["MURMUR_HOME"] = home
    for i in range(n):
        journal.append("start", f"ses_{tag:04d}{i:028x}", i, {"lineage": {"root": f"ses_{tag:04d}{i:028x}"},
                                                             "pad": "x" * 300})


def test_concurrent_writers_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four processes appending at once: every line whole, none lost."""
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 200, t)) for t in range(4)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
    finally:
        for p in procs:
            p.kill()
            p.join(5)
        # spawn started multiprocessing's resource tracker; it would live until pytest exits
        resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]
    raw = journal.journal_path().read_text().splitlines()
    assert len(raw) == 800 and all(json.loads(line)["event"] == "start" for line in raw)
    assert len({json.loads(line)["id"] for line in raw}) == 800


def test_prune_plan_drops_old_ended_trees_whole() -> None:
    """Oldest trees go first, with every event of their members; a tree with a live node stays."""
    ev = []
    for root in ("ses_a", "ses_b", "ses_c"):
        ev.append({"event": "start", "id": root, "lineage": {"root": root}})
        ev.append({"event": "start", "id": root + "_kid", "lineage": {"root": root}})
        ev.append({"event": "end", "id": root + "_kid"})
    total = sum(len(json.dumps(e, separators=(",", ":"))) + 1 for e in ev)
    drop = journal.prune_plan(ev, live={"ses_a_kid"}, target_bytes=total // 2)
    assert drop == {"ses_b", "ses_c"} or drop == {"ses_b"}
    assert "ses_a" not in drop


def test_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_BYTES the journal is pruned below half of it; the newest tree survives."""
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path))
    monkeypatch.setattr(journal, "MAX_BYTES", 20_000)
    for i in range(200):
        sid = f"ses_{i:032x}"
        journal.append("start", sid, i, {"lineage": {"root": sid}, "pid": 0, "pad": "y" * 200})
        journal.append("end", sid, i, {"status": "ok"})
    assert journal.journal_path().stat().st_size <= 20_000
    ids = [e["id"] for e in journal.read_events()]
    assert f"ses_{199:032x}" in ids and f"ses_{0:032x}" not in ids


def test_torn_line_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A half-written line (a killed writer) is skipped by readers."""
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path))
    journal.append("start", "ses_x", 1)
    with journal.journal_path().open("a") as fh:
        fh.write('{"v":1,"event":"st')
    journal.append("end", "ses_x", 2)
    assert [e["event"] for e in journal.read_events()] == ["start", "end"]


def test_a_never_started_delegation_goes_with_its_tree() -> None:
    """A `delegation` event (a delegation that never started a session) belongs to its parent's
    tree: kept while that tree lives, dropped with it, never pruned apart from it."""
    ev = [
        {"event": "start", "id": "ses_a", "lineage": {"root": "ses_a"}},
        {"event": "delegation", "id": "dlg_x", "parent": "ses_a", "root": "ses_a", "reason": "r" * 500},
        {"event": "start", "id": "ses_b", "lineage": {"root": "ses_b"}},
    ]
    assert journal.trees_of(ev)["dlg_x"] == "ses_a"
    assert journal.prune_plan(ev, live={"ses_a"}, target_bytes=10) == {"ses_b"}
    assert "dlg_x" not in journal.prune_plan(ev, live={"ses_b"}, target_bytes=10)
    assert journal.prune_plan(ev, live={"ses_b"}, target_bytes=10) == {"ses_a"}
