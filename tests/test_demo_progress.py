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
        """The desk's delegation start and end become lines naming the child."""
        assert describe_record("audit-desk", {
            "event_type": "delegation_start", "capsule": "audit-pycheck", "version": "0.1.0",
            "child_session_id": "ses_c"}) == (
            "audit-desk: delegated to audit-pycheck 0.1.0 through mur-roost; child session ses_c")
        assert describe_record("audit-desk", {"event_type": "delegation", "capsule": "audit-pycheck",
                                              "outcome": "ok"}) == "audit-desk: delegation to audit-pycheck ended ok"

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
