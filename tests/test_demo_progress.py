"""Tests of the demo's progress lines (trace records → one line each) and the trace follower."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from murmur.demo.progress import TraceFollower, describe_record


class TestDescribe:
    def test_task_start_names_its_origin(self) -> None:
        """A task start says where the task came from."""
        assert describe_record("inventory", {"event_type": "task_start", "origin": "peer"}) == (
            "inventory: took a task from a member")
        assert describe_record("lead", {"event_type": "task_start", "origin": "user"}) == "lead: took its launch task"
        assert describe_record("d", {"event_type": "task_start", "origin": "x"}) == "d: took a task"

    def test_task_end_with_time_and_commands(self) -> None:
        """A task end gives its status, seconds and shell commands (singular for one)."""
        rec: dict[str, Any] = {"event_type": "task_end", "exit_status": "ok", "duration_ms": 1234, "shell_calls": 5}
        assert describe_record("inventory", rec) == "inventory: task ok in 1.2s, 5 shell commands"
        rec.update(shell_calls=1)
        assert describe_record("checker", rec) == "checker: task ok in 1.2s, 1 shell command"
        rec.update(shell_calls=0)
        assert describe_record("lead", rec) == "lead: task ok in 1.2s"

    def test_delegation_records(self) -> None:
        """The desk's delegation start, the call's end and the child's outcome read differently."""
        assert describe_record("audit-desk", {
            "event_type": "delegation_start", "capsule": "audit-pycheck", "version": "0.1.0",
            "child_session_id": "ses_c"}) == (
            "audit-desk: delegated to audit-pycheck 0.1.0 through mur-roost; child session ses_c")
        call = {"event_type": "delegation", "capsule": "audit-pycheck", "outcome": "completed", "reason": None}
        closed = {**call, "outcome": "ok"}
        assert describe_record("audit-desk", call) == "audit-desk: audit-pycheck answered (the call completed)"
        assert describe_record("audit-desk", closed) == "audit-desk: audit-pycheck reported its outcome: ok"
        assert describe_record("audit-desk", {**call, "outcome": "timed_out", "reason": "no answer in 60s"}) == (
            "audit-desk: the call to audit-pycheck timed_out: no answer in 60s")
        assert describe_record("audit-desk", {**call, "outcome": "crashed", "reason": "exit 1"}) == (
            "audit-desk: audit-pycheck reported its outcome: crashed (exit 1)")

    def test_completion_task_is_one_line_named_as_such(self) -> None:
        """A completion-origin task says nothing at its start and names itself at its end."""
        assert describe_record("audit-desk", {"event_type": "task_start", "origin": "completion"}) is None
        end = {"event_type": "task_end", "exit_status": "ok", "duration_ms": 0}
        assert describe_record("audit-desk", end, "completion") == (
            "audit-desk: completion task (a child's outcome) ok in 0.0s")
        assert describe_record("audit-desk", end, "event") == "audit-desk: task ok in 0.0s"

    def test_failed_member_step_is_reported(self) -> None:
        """A member or capsule step that did not succeed is named with its reason."""
        assert describe_record("lead", {"event_type": "plan_step", "kind": "member", "step": "check",
                                        "status": "failed", "reason": "boom"}) == "lead: step check failed: boom"
        assert describe_record("lead", {"event_type": "plan_step", "kind": "member", "step": "check",
                                        "status": "ok"}) is None

    def test_other_records_are_quiet(self) -> None:
        """Shell records and the rest print nothing."""
        assert describe_record("x", {"event_type": "shell"}) is None
        assert describe_record("x", {}) is None


class TestFollower:
    def test_reads_only_new_whole_lines(self, tmp_path: Path) -> None:
        """Each poll reads what the file gained; a partial last line waits for its end."""
        lines: list[str] = []
        seen: list[tuple[str, str]] = []
        follower = TraceFollower(lines.append, lambda label, r: seen.append((label, r["event_type"])))
        trace = tmp_path / "trace.jsonl"
        follower.follow(trace, "inventory")
        follower.poll()  # not there yet: nothing, no error
        start = json.dumps({"event_type": "task_start", "origin": "peer"})
        end = json.dumps({"event_type": "task_end", "exit_status": "ok", "duration_ms": 100})
        trace.write_text(start + "\n" + end[:10])
        follower.poll()
        assert lines == ["inventory: took a task from a member"]
        with trace.open("a") as fh:
            fh.write(end[10:] + "\nnot json\n")
        follower.poll()
        follower.poll()
        assert lines == ["inventory: took a task from a member", "inventory: task ok in 0.1s"]
        assert seen == [("inventory", "task_start"), ("inventory", "task_end")]

    def test_records_of_one_poll_are_said_in_time_order(self, tmp_path: Path) -> None:
        """Lines from several files read in one poll come out by timestamp, not by file."""
        lines: list[str] = []
        follower = TraceFollower(lines.append, lambda label, r: None)
        desk, child = tmp_path / "desk.jsonl", tmp_path / "child.jsonl"
        follower.follow(desk, "audit-desk")
        follower.follow(child, "audit-pycheck (child)")
        desk.write_text(json.dumps({"event_type": "task_end", "task_id": "t1", "exit_status": "ok",
                                    "duration_ms": 1000, "timestamp": 200}) + "\n")
        child.write_text(json.dumps({"event_type": "task_end", "task_id": "t2", "exit_status": "ok",
                                     "duration_ms": 400, "timestamp": 100}) + "\n")
        follower.poll()
        assert lines == ["audit-pycheck (child): task ok in 0.4s", "audit-desk: task ok in 1.0s"]

    def test_the_completion_task_is_named_at_its_end(self, tmp_path: Path) -> None:
        """The follower remembers each task's origin, so a completion task's end says so."""
        lines: list[str] = []
        follower = TraceFollower(lines.append, lambda label, r: None)
        trace = tmp_path / "trace.jsonl"
        follower.follow(trace, "audit-desk")
        trace.write_text("\n".join(json.dumps(r) for r in [
            {"event_type": "task_start", "task_id": "t1", "origin": "event", "timestamp": 1},
            {"event_type": "task_end", "task_id": "t1", "exit_status": "ok", "duration_ms": 0, "timestamp": 2},
            {"event_type": "task_start", "task_id": "t2", "origin": "completion", "timestamp": 3},
            {"event_type": "task_end", "task_id": "t2", "exit_status": "ok", "duration_ms": 0, "timestamp": 4},
        ]) + "\n")
        follower.poll()
        assert lines == ["audit-desk: took a task over its door", "audit-desk: task ok in 0.0s",
                         "audit-desk: completion task (a child's outcome) ok in 0.0s"]
