"""Tests of the trace writer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from murmur.ids import is_id
from murmur.session.trace import SessionTrace, TraceWriteError, TraceWriter, read_trace
from murmur.tracectx import SpanContext


class TestTraceWriter:
    def test_header_order_and_flush(self, tmp_path: Path) -> None:
        """Each line starts with the five header keys, then the three trace-id keys, in order,
        and is on disk at once."""
        with TraceWriter(tmp_path / "t.jsonl", "ses_" + "0" * 32, now_ms=lambda: 1234) as w:
            sid = w.emit("session_start", parent_id=None, capsule_name="x")
            tid = w.emit("task_start", parent_id=sid, task_id="tsk_1", lane="user")
            lines = (tmp_path / "t.jsonl").read_text().splitlines()
        assert len(lines) == 2
        first = json.loads(lines[0])
        assert list(first)[:8] == [
            "event_type", "event_id", "parent_id", "session_id", "timestamp", "trace_id", "span_id", "capsule_name"
        ]  # a root span has no parent_span_id
        assert first["parent_id"] is None and first["timestamp"] == 1234
        second = json.loads(lines[1])
        assert second["parent_id"] == sid and second["event_id"] == tid
        assert list(second)[5:] == ["trace_id", "span_id", "parent_span_id", "task_id", "lane"]
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


class TestTraceIds:
    """spec/trace.md "Trace ids": every record is a span of the session's trace."""

    def test_new_trace_and_parent_spans(self, tmp_path: Path) -> None:
        """Without a TRACEPARENT the session is a new trace: session_start is a root span and
        every other record names its parent record's span."""
        with TraceWriter(tmp_path / "t.jsonl", "ses_x") as w:
            sid = w.emit("session_start", parent_id=None)
            tid = w.emit("task_start", parent_id=sid)
            w.emit("shell", parent_id=tid)
        start, task, shell = read_trace(tmp_path / "t.jsonl")
        assert len({r["trace_id"] for r in (start, task, shell)}) == 1
        assert len(str(start["trace_id"])) == 32 and int(str(start["trace_id"]), 16) > 0
        assert "parent_span_id" not in start
        assert start["span_id"] == sid[-16:] and task["span_id"] == tid[-16:]
        assert task["parent_span_id"] == start["span_id"] and shell["parent_span_id"] == task["span_id"]
        assert len({r["span_id"] for r in (start, task, shell)}) == 3

    def test_joined_session_and_task(self, tmp_path: Path) -> None:
        """A session started under a span joins its trace; a task that joins a caller's span
        of another trace carries that trace on its own records, and the session's records keep theirs."""
        parent = SpanContext("a" * 32, "b" * 16)
        caller = SpanContext("c" * 32, "d" * 16)
        with TraceWriter(tmp_path / "t.jsonl", "ses_x", joins=parent) as w:
            events = SessionTrace(w)
            events.start_id = w.emit("session_start", parent_id=None)
            tid = events.emit("task_start", joins=caller)
            assert tid is not None
            w.emit("shell", parent_id=tid)
            events.emit("session_end")
            assert w.span(tid) == SpanContext("c" * 32, tid[-16:])
        start, task, shell, end = read_trace(tmp_path / "t.jsonl")
        assert (start["trace_id"], start["parent_span_id"]) == ("a" * 32, "b" * 16)
        assert (task["trace_id"], task["parent_span_id"], task["parent_id"]) == ("c" * 32, "d" * 16, start["event_id"])
        assert (shell["trace_id"], shell["parent_span_id"]) == ("c" * 32, task["span_id"])
        assert (end["trace_id"], end["parent_span_id"]) == ("a" * 32, start["span_id"])

    def test_trace_fields_are_reserved(self, tmp_path: Path) -> None:
        """A payload cannot set the trace ids itself."""
        with TraceWriter(tmp_path / "t.jsonl", "ses_x") as w, pytest.raises(ValueError, match="header names"):
            w.emit("e", parent_id=None, trace_id="0" * 32)
