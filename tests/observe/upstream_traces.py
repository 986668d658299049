"""Traces shaped as upstream's documented examples (docs/content/reference/cli.md, `mur trace`).

Run A: 2 turns, ok. Run B: 5 turns, max_turns_reached, compaction at turn 3. Run C: 1 turn,
no calls. Together they are the three files of upstream's `mur trace report` example.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SES_A = "ses_aaaaaaaaaaaa4aaa8aaa000000000001"


def session(sid: str, *, turns: list[tuple[int, int]], tools: list[tuple[str, int, bool, dict[str, Any] | None]],
            shells: list[tuple[int, int]], duration_ms: int, status: str, compaction_turn: int | None = None,
            tasks: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Records of one session: ``turns`` (input, output tokens) per inference, ``tools`` (name,
    ms, ok, input), ``shells`` (exit code, ms)."""
    t = 1_700_000_000_000
    out: list[dict[str, Any]] = [{"event_type": "session_start", "session_id": sid, "timestamp": t,
                                  "capsule_name": "my-agent", "capsule_version": "0.1.0",
                                  "model": "claude-3-5-sonnet", "max_turns": 10}]
    for i, (inp, outp) in enumerate(turns):
        out.append({"event_type": "inference", "session_id": sid, "timestamp": t + i, "turn": i,
                    "input_tokens": inp, "output_tokens": outp, "decision": "tool_call" if tools else "end_turn"})
        if compaction_turn == i:
            out.append({"event_type": "compaction", "session_id": sid, "timestamp": t + i, "turn": i,
                        "tokens_before": 9000, "tokens_after": 3000})
    for i, (name, ms, ok, given) in enumerate(tools):
        rec: dict[str, Any] = {"event_type": "tool_call", "session_id": sid, "timestamp": t + 10 + i, "turn": i,
                               "tool_name": name, "duration_ms": ms, "status": "ok" if ok else "error"}
        if given is not None:
            rec["input"] = given
        out.append(rec)
    for i, (code, ms) in enumerate(shells):
        out.append({"event_type": "shell", "session_id": sid, "timestamp": t + 20 + i, "turn": i,
                    "binary": "/usr/bin/cargo", "command": "test", "exit_code": code, "duration_ms": ms})
    for task in tasks or []:
        out.append({"event_type": "task_end", "session_id": sid, "timestamp": t + 30, **task})
    out.append({"event_type": "session_end", "session_id": sid, "timestamp": t + duration_ms,
                "total_turns": len(turns), "total_input_tokens": sum(a for a, _ in turns),
                "total_output_tokens": sum(b for _, b in turns), "total_tool_calls": len(tools),
                "total_shell_calls": len(shells), "duration_ms": duration_ms, "exit_status": status})
    return out


def run_a() -> list[dict[str, Any]]:
    """Upstream's single-task example (and run A of its diff)."""
    return session(SES_A, turns=[(1000, 150), (1200, 200)],
                   tools=[("bash", 100, True, {"command": "cargo test --workspace"})],
                   shells=[(0, 50)], duration_ms=500, status="ok")


def run_b() -> list[dict[str, Any]]:
    """Run B of upstream's diff: 5 turns, 5 tools (4 ok, avg 188 ms), 5 shells (avg 36 ms)."""
    return session("ses_bbbbbbbbbbbb4bbb8bbb000000000002",
                   turns=[(1500, 200), (1800, 210), (2000, 220), (2200, 230), (2200, 230)],
                   tools=[("bash", 100, True, None), ("bash", 200, True, None), ("bash", 200, False, None),
                          ("read", 200, True, None), ("bash", 240, True, None)],
                   shells=[(0, 20), (0, 30), (1, 40), (0, 40), (0, 50)],
                   duration_ms=1700, status="max_turns_reached", compaction_turn=3)


def run_c() -> list[dict[str, Any]]:
    """The third file of upstream's report example: 1 turn, no calls."""
    return session("ses_cccccccccccc4ccc8ccc000000000003", turns=[(500, 100)], tools=[], shells=[],
                   duration_ms=200, status="ok")


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write ``records`` as a trace.jsonl at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
