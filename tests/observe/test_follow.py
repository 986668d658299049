"""`mur watch`'s follower (spec/trace.md "mur watch"): whole lines only, in order, across
polls; new sessions joined as they appear."""

from __future__ import annotations

import json
from pathlib import Path

from murmur.observe.address import Known
from murmur.observe.follow import Follower, describe, line


def test_follower_reads_whole_lines_as_they_grow(tmp_path: Path) -> None:
    """A half-written line waits for its newline; a session that appears later is followed from
    its first record; an unparseable line is skipped."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    sessions = [Known("ses_a", a, {}, 0)]
    f = Follower(lambda: sessions)
    assert f.poll() == []  # no file yet
    rec = {"event_type": "task_start", "task_id": "tsk_" + "1" * 32, "origin": "user", "lane": "user", "timestamp": 5}
    text = json.dumps(rec) + "\n"
    (a / "trace.jsonl").write_text(text + text[:10])
    assert [r for _, r in f.poll()] == [rec]
    with (a / "trace.jsonl").open("a") as fh:
        fh.write(text[10:] + "not json\n")
    assert [r for _, r in f.poll()] == [rec]
    sessions.append(Known("ses_b", b, {}, 0, order=1))
    (b / "trace.jsonl").write_text(json.dumps({"event_type": "session_end", "exit_status": "ok", "duration_ms": 3}) + "\n")
    got = f.poll()
    assert [(k.id, r["event_type"]) for k, r in got] == [("ses_b", "session_end")]
    assert f.poll() == []


def test_lines_say_what_happened() -> None:
    """Each kind of record reads as a few words with the session's short id and name."""
    shell = {"event_type": "shell", "binary": "/usr/bin/python3", "command": "python3 -c 'print(1)'", "exit_code": 0,
             "duration_ms": 12, "timestamp": 1_700_000_000_123}
    out = line(shell, "ses_…c1c4 checker")
    assert out.endswith("  ses_…c1c4 checker  shell exit 0 in 12ms: python3 -c 'print(1)'") and ".123" in out
    assert describe({"event_type": "tool_call", "tool_name": "bash", "status": "ok", "duration_ms": 3,
                     "input": {"command": "ls"}}) == 'tool bash ok in 3ms {"command":"ls"}'
    assert describe({"event_type": "delegation", "capsule": "kid", "outcome": "refused", "reason": "no"}) == \
        "delegation to kid: refused (no)"
    assert describe({"event_type": "something_new"}) == "something_new"
