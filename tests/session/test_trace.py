"""Tests of the trace writer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from murmur.ids import is_id
from murmur.session.trace import TraceWriteError, TraceWriter, read_trace


class TestTraceWriter:
    def test_header_order_and_flush(self, tmp_path: Path) -> None:
        """Each line starts with the five header keys in order and is on disk at once."""
        with TraceWriter(tmp_path / "t.jsonl", "ses_" + "0" * 32, now_ms=lambda: 1234) as w:
            sid = w.emit("session_start", parent_id=None, capsule_name="x")
            tid = w.emit("task_start", parent_id=sid, task_id="tsk_1", lane="user")
            lines = (tmp_path / "t.jsonl").read_text().splitlines()
        assert len(lines) == 2
        first = json.loads(lines[0])
        assert list(first)[:6] == ["event_type", "event_id", "parent_id", "session_id", "timestamp", "capsule_name"]
        assert first["parent_id"] is None and first["timestamp"] == 1234
        second = json.loads(lines[1])
        assert second["parent_id"] == sid and second["event_id"] == tid
        assert list(second)[5:] == ["task_id", "lane"]
        assert is_id(sid, "evt") and is_id(tid, "evt")
        assert w.session_event_id == sid
        assert oct(os.stat(tmp_path / "t.jsonl").st_mode & 0o777) == "0o600"

    def test_ids_are_time_ordered(self, tmp_path: Path) -> None:
        """evt ids sort in emission order."""
        with TraceWriter(tmp_path / "t.jsonl", "ses_x") as w:
            ids = [w.emit("e", parent_id=None) for _ in range(50)]
        assert ids == sorted(ids)
        assert [r["event_id"] for r in read_trace(tmp_path / "t.jsonl")] == ids

    def test_reserved_field_refused(self, tmp_path: Path) -> None:
        """A payload cannot reuse a header name."""
        with TraceWriter(tmp_path / "t.jsonl", "ses_x") as w, pytest.raises(ValueError, match="header names"):
            w.emit("e", parent_id=None, timestamp=3)

    def test_failure_is_fatal_and_reported_once(self, tmp_path: Path) -> None:
        """A failed write raises E-RUN-007 and calls on_failure exactly once."""
        seen: list[TraceWriteError] = []
        w = TraceWriter(tmp_path / "t.jsonl", "ses_x", on_failure=seen.append)
        w.close()
        with pytest.raises(TraceWriteError) as info:
            w.emit("e", parent_id=None)
        assert info.value.code == "E-RUN-007"
        with pytest.raises(TraceWriteError):
            w.emit("e", parent_id=None)
        assert len(seen) == 1 and w.failed is seen[0]
