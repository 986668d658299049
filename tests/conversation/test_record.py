"""The durable record: names, modes, append-only lines, torn tails, retention (spec/conversations.md)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from murmur.agent.thread import UNFINISHED_TOOL, from_lines, to_lines
from murmur.agent.transports import AssistantTurn, ToolCall, ToolResult, ToolResults, UserText
from murmur.conversation.record import RecordStore, bad_segment, check_segment, read_messages
from murmur.errors import DiagnosticError


def store(tmp_path: Path, notes: list[str] | None = None, *, now: int = 1_000_000) -> RecordStore:
    return RecordStore(tmp_path / "conversations", "cap", "cap", (notes if notes is not None else []).append,
                       now_ms=lambda: now)


@pytest.mark.parametrize("name", ["", "a/b", "/abs", ".", "..", ".hidden", "x\0y", "x" * 256])
def test_bad_segments_are_refused_with_e_cap_011(name: str) -> None:
    assert bad_segment(name) is not None
    with pytest.raises(DiagnosticError) as exc:
        check_segment(name, "--context")
    assert exc.value.diagnostics[0].code == "E-CAP-011"


@pytest.mark.parametrize("name", ["ctx_0193", "my-context", "a.b", "x" * 255])
def test_good_segments_pass(name: str) -> None:
    assert check_segment(name, "--context") == name


def test_nothing_exists_until_the_first_append_then_dirs_are_0700(tmp_path: Path) -> None:
    s = store(tmp_path)
    assert s.load("ctx_a") == [] and not (tmp_path / "conversations").exists()
    s.append("ctx_a", {"role": "user", "content": "hi"})
    for d in (tmp_path / "conversations", tmp_path / "conversations" / "cap", tmp_path / "conversations" / "cap" / "ctx_a"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    f = tmp_path / "conversations" / "cap" / "ctx_a" / "conversation.jsonl"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    header, line = (json.loads(x) for x in f.read_text().splitlines())
    assert header == {"type": "murmur.record", "capsule": "cap", "created_ms": 1_000_000}
    assert line["role"] == "user" and line["id"].startswith("msg_")


def test_a_torn_tail_is_skipped_and_the_next_line_starts_fresh(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.append("c", {"role": "user", "content": "one"})
    f = tmp_path / "conversations" / "cap" / "c" / "conversation.jsonl"
    with f.open("ab") as fh:
        fh.write(b'{"role":"assistant","content":"cut sh')  # a writer killed mid-line
    assert [m["content"] for m in s.load("c")] == ["one"]
    s.append("c", {"role": "user", "content": "two"})
    assert [m["content"] for m in s.load("c")] == ["one", "two"]


def test_a_corrupt_middle_line_is_reported_once_and_loads_empty(tmp_path: Path) -> None:
    notes: list[str] = []
    s = store(tmp_path, notes)
    s.append("c", {"role": "user", "content": "one"})
    f = tmp_path / "conversations" / "cap" / "c" / "conversation.jsonl"
    f.write_text(f.read_text() + "garbage\n" + json.dumps({"role": "user", "content": "x"}) + "\n")
    assert s.load("c") == [] and s.load("c") == []
    assert len(notes) == 1 and "cannot be read" in notes[0]
    with pytest.raises(ValueError):
        read_messages(f)


def test_a_bad_context_id_costs_only_its_record(tmp_path: Path) -> None:
    notes: list[str] = []
    s = store(tmp_path, notes)
    s.append("../escape", {"role": "user", "content": "x"})
    s.append("../escape", {"role": "user", "content": "y"})
    assert not (tmp_path / "conversations").exists() and not (tmp_path / "escape").exists()
    assert len(notes) == 1 and notes[0].startswith("note: context")


def test_keep_newest_cuts_and_the_header_records_the_drop(tmp_path: Path) -> None:
    s = store(tmp_path)
    for i in range(5):
        s.append("c", {"role": "user", "content": str(i), "id": f"msg_{i}"})
    assert s.keep_newest("c", 2) == 3
    f = tmp_path / "conversations" / "cap" / "c" / "conversation.jsonl"
    header = json.loads(f.read_text().splitlines()[0])
    assert header["truncated"] == {"dropped": 3, "oldest_surviving_id": "msg_3", "last_dropped_id": "msg_2",
                                   "at_ms": 1_000_000}
    assert [m["content"] for m in s.load("c")] == ["3", "4"]
    assert s.keep_newest("c", 2) == 0


def test_expire_removes_records_older_than_max_age(tmp_path: Path) -> None:
    s = store(tmp_path, now=10_000_000)
    s.append("old", {"role": "user", "content": "x"})
    s.append("new", {"role": "user", "content": "y"})
    s.append("kept", {"role": "user", "content": "z"})
    for name in ("old", "kept"):
        os.utime(tmp_path / "conversations" / "cap" / name / "conversation.jsonl", (1000, 1000))
    os.utime(tmp_path / "conversations" / "cap" / "new" / "conversation.jsonl", (9_999, 9_999))
    assert s.expire(60, keep="kept") == ["old"]
    assert sorted(p.name for p in (tmp_path / "conversations" / "cap").iterdir()) == ["kept", "new"]


def test_items_round_trip_through_lines() -> None:
    call = ToolCall("c1", "echo", {"args": ["x"]}, '{"args": ["x"]}')
    items = [UserText("hi"), AssistantTurn("", (call,)), ToolResults((ToolResult("c1", "echo", "x", False),)),
             AssistantTurn("done")]
    lines = [line for item in items for line in to_lines(item, "tsk_1")]
    assert from_lines(lines) == items


def test_an_unanswered_tool_call_gets_an_error_result_on_reload() -> None:
    """A session killed while a tool ran: the reload answers the call, so the provider accepts it."""
    call = ToolCall("c1", "sleep", {"args": ["9"]}, '{"args": ["9"]}')
    lines = [*to_lines(UserText("go"), "t"), *to_lines(AssistantTurn("", (call,)), "t"), *to_lines(UserText("next"), "t")]
    got = from_lines(lines)
    assert got[2] == ToolResults((ToolResult("c1", "sleep", UNFINISHED_TOOL, is_error=True),))
    assert got[3] == UserText("next")
