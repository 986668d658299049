"""``mur watch``: a running session's records as they are written (spec/trace.md "mur watch").

:class:`Follower` tails trace files: each :meth:`Follower.poll` returns the whole lines
written since the last one (a line still being written waits for its newline). With a tree
it re-reads the journal on each poll, so descendants that start later are followed from their
first record. :func:`line` renders one record for people (pure).

The watch ends when the watched session ends (its ``session_end``, its journal ``end``, or its
process gone), or for a tree when its root does: a formation when every member has ended.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from murmur.observe.address import Known
from murmur.observe.records import compact_input


def short(ident: str) -> str:
    prefix, _, hexpart = ident.partition("_")
    return f"{prefix}_…{hexpart[-4:]}" if len(hexpart) > 8 else ident


def describe(r: Mapping[str, Any]) -> str:
    """What one record says, in a few words (pure)."""
    kind = str(r.get("event_type"))
    g = r.get
    if kind == "session_start":
        return f"session started: {g('capsule_name')}@{g('capsule_version')} ({g('workload') or 'agent'})"
    if kind == "session_end":
        return f"session ended {g('exit_status')} after {g('duration_ms')}ms"
    if kind == "a2a_task_received":
        return f"task {short(str(g('task_id')))} received" + (f" from member {g('caller_member')}" if g("caller_member") else "")
    if kind == "task_start":
        return f"task {short(str(g('task_id')))} started ({g('origin')}, {g('lane')} lane)"
    if kind == "task_end":
        return (f"task {short(str(g('task_id')))} ended {g('exit_status')} in {g('duration_ms')}ms"
                f" ({g('turns')} turns, {g('tool_calls')} tool calls, {g('shell_calls')} shell calls)")
    if kind == "inference":
        return f"model turn {g('turn')}: {g('decision')} ({g('input_tokens')} in, {g('output_tokens')} out)"
    if kind == "tool_call":
        given = compact_input(g("input"), 80)
        return f"tool {g('tool_name')} {g('status')} in {g('duration_ms')}ms" + (f" {given}" if given else "")
    if kind == "shell":
        cmd = " ".join(str(g("command") or "").split())
        cmd = cmd if len(cmd) <= 80 else cmd[:79] + "…"
        binary = str(g("binary") or "").rsplit("/", 1)[-1]
        what = cmd if not binary or cmd.split(" ", 1)[0] == binary else f"{binary} {cmd}"
        return f"shell exit {g('exit_code')} in {g('duration_ms')}ms: {what}"
    if kind == "plan_step":
        return f"step {g('step')} ({g('kind')}) {g('status')} in {g('duration_ms')}ms"
    if kind in ("member_call_start", "member_call"):
        return f"call {g('member')}: {g('status') or 'started'}"
    if kind == "delegation_start":
        return f"delegated to {g('capsule')} {g('version')}: child {short(str(g('child_session_id')))}"
    if kind == "delegation":
        return f"delegation to {g('capsule')}: {g('outcome')}" + (f" ({g('reason')})" if g("reason") else "")
    if kind == "task_rejected":
        return f"task rejected: {g('cause')}"
    return kind


def line(r: Mapping[str, Any], who: str) -> str:
    """``HH:MM:SS.mmm  <who>  <what>`` for one record (local time)."""
    ts = r.get("timestamp")
    when = "--:--:--.---"
    if isinstance(ts, int):
        when = time.strftime("%H:%M:%S", time.localtime(ts / 1000)) + f".{ts % 1000:03d}"
    return f"{when}  {who}  {describe(r)}"


class Follower:
    """Tails the traces of some sessions.

    Args:
        sessions (Callable[[], Sequence[Known]]): the sessions to follow now (called on each
            poll; a tree's grows as descendants start).
    """

    def __init__(self, sessions: Callable[[], Sequence[Known]]) -> None:
        self._sessions = sessions
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self.known: dict[str, Known] = {}

    def poll(self) -> list[tuple[Known, dict[str, Any]]]:
        """Records written since the last poll, per session in file order, sessions in journal order."""
        out: list[tuple[Known, dict[str, Any]]] = []
        for s in self._sessions():
            self.known[s.id] = s
            path = s.trace_path
            if path is None:
                continue
            got = self._read(s.id, path)
            out += [(s, r) for r in got]
        return out

    def _read(self, sid: str, path: Path) -> list[dict[str, Any]]:
        offset = self._offsets.get(sid, 0)
        try:
            with path.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
        except OSError:
            return []
        self._offsets[sid] = offset + len(chunk)
        data = self._partial.pop(sid, b"") + chunk
        lines = data.split(b"\n")
        if lines and lines[-1]:
            self._partial[sid] = lines[-1]
        out = []
        for raw in lines[:-1]:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


def ended(s: Known, seen_end: bool, alive: Callable[[Known], bool]) -> bool:
    """Whether a session has ended: its ``session_end`` was read, its journal says so, or its
    process is gone."""
    return seen_end or s.end is not None or not alive(s)
