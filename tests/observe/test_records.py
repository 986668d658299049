"""Reading a trace file: the one-parse fast path and the line-by-line fallback agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.observe.records import load


@pytest.mark.parametrize(("text", "kinds", "skipped"), [
    ('{"event_type":"a"}\n{"event_type":"b"}\n', ["a", "b"], 0),
    ('{"event_type":"a"}\r\n{"event_type":"b"}\r\n', ["a", "b"], 0),
    ('{"event_type":"a"}\n\n\n{"event_type":"b"}\n', ["a", "b"], 0),
    ('{"event_type":"a"}\n[1, 2]\n{"event_type":"b"}\n', ["a", "b"], 1),
    ('{"event_type":"a"}\n1, 2\n{"event_type":"b"}', ["a", "b"], 1),
    ('{"event_type":"a"}\n{"event_type":"b","x":"has \\\\n inside"}\n{"event_ty', ["a", "b"], 1),
    ("", [], 0),
    ("\n\n", [], 0),
])
def test_load(tmp_path: Path, text: str, kinds: list[str], skipped: int) -> None:
    """Every record in file order; what does not parse is counted, never fatal."""
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    got = load(path)
    assert [r["event_type"] for r in got.records] == kinds and got.skipped == skipped


def test_a_file_with_no_record_is_refused(tmp_path: Path) -> None:
    """Lines, but none a record: E-TRC-004 naming the file."""
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(DiagnosticError) as info:
        load(path)
    assert info.value.diagnostics[0].code == "E-TRC-004"
