"""Reading a ``trace.jsonl`` and what one session did (spec/trace.md "Reading traces").

:func:`load` reads a file leniently: a line that does not parse (a writer killed mid-line)
is counted and skipped, never fatal. :func:`metrics` turns one session's records into a
:class:`SessionMetrics` (pure), the numbers ``mur trace show``, ``diff`` and ``report`` print.
Upstream's and this runtime's records both read: totals come from the last ``session_end``
when there is one, else from the ``inference`` / ``tool_call`` / ``shell`` records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

Record = dict[str, Any]


@attrs.frozen
class Loaded:
    """A trace file as read.

    Attributes:
        path (Path): the file.
        records (tuple[Record, ...]): every record, in file order.
        skipped (int): lines that did not parse as a JSON object with an ``event_type``.
    """

    path: Path
    records: tuple[Record, ...]
    skipped: int = 0


def load(path: Path) -> Loaded:
    """Read one trace file.

    Raises:
        DiagnosticError: ``E-TRC-003`` the file cannot be read; ``E-TRC-004`` it has lines
            and none of them is a trace record.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DiagnosticError(error(
            "E-TRC-003", f"the trace {path} cannot be read ({exc.strerror or type(exc).__name__})",
            hint="give a session id, a short id, @N, or the path of a readable trace.jsonl",
        )) from None
    body = raw.strip()
    if not body:
        return Loaded(path, (), 0)
    try:  # the common case, a whole file: one parse of all its lines at once (a record's
        # JSON never holds a raw newline, so every newline ends a record)
        every = json.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except ValueError:  # a torn or blank line: read them one by one
        return parse_lines(path, raw.splitlines())
    if all(isinstance(r, dict) and isinstance(r.get("event_type"), str) for r in every):
        return Loaded(path, tuple(every), 0)
    return parse_lines(path, raw.splitlines())


def parse_lines(path: Path, lines: Iterable[bytes]) -> Loaded:
    """Records from raw lines, one at a time (see :func:`load`)."""
    records: list[Record] = []
    skipped = 0
    seen_line = False
    for line in lines:
        if not line.strip():
            continue
        seen_line = True
        try:
            obj = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(obj, dict) and isinstance(obj.get("event_type"), str):
            records.append(obj)
        else:
            skipped += 1
    if seen_line and not records:
        raise DiagnosticError(error(
            "E-TRC-004", f"{path} holds no trace records (no line is a JSON object with an `event_type`)",
            path=str(path), hint="give the trace.jsonl a session wrote (its records directory holds it)",
        ))
    return Loaded(path, tuple(records), skipped)


@attrs.frozen
class ToolRow:
    """One tool call: ``turn``, ``name``, ``duration_ms``, ``ok``, ``input`` (compact JSON or None)."""

    turn: int
    name: str
    duration_ms: int
    ok: bool
    input: str | None


@attrs.frozen
class TaskRow:
    """One task: id, turns, tokens, exit status, duration."""

    task_id: str
    turns: int
    input_tokens: int
    output_tokens: int
    exit_status: str
    duration_ms: int
    tool_calls: int = 0
    shell_calls: int = 0


@attrs.frozen
class SessionMetrics:
    """What one session did (all counts are whole numbers; durations in ms).

    ``exit_status`` is ``running`` while no ``session_end`` was written. ``tool_success``
    is a percentage, None with no tool calls; the latencies are None with no calls.
    ``compaction_turn`` is the first compaction's turn (None: it never fired).
    """

    session_id: str
    capsule: str
    model: str | None
    exit_status: str
    duration_ms: int
    turns: int
    max_turns: int | None
    input_tokens: int
    output_tokens: int
    tool_calls: int
    tool_ok: int
    tool_latency_ms: float | None
    tool_rows: tuple[ToolRow, ...]
    shell_calls: int
    exit_codes: tuple[tuple[int, int], ...]
    shell_latency_ms: float | None
    compactions: tuple[tuple[int, int, int], ...]
    tasks: tuple[TaskRow, ...]

    @property
    def tool_errors(self) -> int:
        """Tool calls whose status was not ``ok``."""
        return self.tool_calls - self.tool_ok

    @property
    def tool_success(self) -> float | None:
        """Percentage of tool calls that succeeded (None with none)."""
        return None if self.tool_calls == 0 else 100.0 * self.tool_ok / self.tool_calls

    @property
    def compaction_turn(self) -> int | None:
        """The turn the first compaction fired at (None: it never fired)."""
        return self.compactions[0][0] if self.compactions else None


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def compact_input(value: object, limit: int = 120) -> str | None:
    """A tool input as compact JSON, cut to ``limit`` characters with ``…`` (None when absent)."""
    if value is None or value == {}:
        return None
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def _mean(values: Sequence[int]) -> float | None:
    return sum(values) / len(values) if values else None


def metrics(records: Sequence[Mapping[str, Any]]) -> SessionMetrics:
    """One session's numbers from its records (pure; any record order)."""
    start: Mapping[str, Any] = {}
    end: Mapping[str, Any] | None = None
    inferences: list[Mapping[str, Any]] = []
    tools: list[Mapping[str, Any]] = []
    shells: list[Mapping[str, Any]] = []
    compactions: list[tuple[int, int, int]] = []
    task_ends: list[Mapping[str, Any]] = []
    session_id = ""
    stamps: list[int] = []
    for r in records:
        kind = r.get("event_type")
        session_id = session_id or str(r.get("session_id") or "")
        if isinstance(r.get("timestamp"), int):
            stamps.append(r["timestamp"])
        if kind == "session_start" and not start:
            start = r
        elif kind == "session_end":
            end = r
        elif kind == "inference":
            inferences.append(r)
        elif kind == "tool_call":
            tools.append(r)
        elif kind == "shell":
            shells.append(r)
        elif kind == "compaction":
            compactions.append((_int(r.get("turn")), _int(r.get("tokens_before")), _int(r.get("tokens_after"))))
        elif kind == "task_end":
            task_ends.append(r)
    name = str(start.get("capsule_name") or "?")
    version = start.get("capsule_version")
    capsule = f"{name} v{version}" if version else name
    if end is not None:
        turns = _int(end.get("total_turns"), len(inferences))
        input_tokens = _int(end.get("total_input_tokens"))
        output_tokens = _int(end.get("total_output_tokens"))
        duration = _int(end.get("duration_ms"), (stamps[-1] - stamps[0]) if stamps else 0)
        status = str(end.get("exit_status") or "unknown")
    else:
        turns = len(inferences)
        input_tokens = sum(_int(r.get("input_tokens")) for r in inferences)
        output_tokens = sum(_int(r.get("output_tokens")) for r in inferences)
        duration = (max(stamps) - min(stamps)) if stamps else 0
        status = "running"
    rows = tuple(
        ToolRow(_int(t.get("turn")), str(t.get("tool_name") or "?"), _int(t.get("duration_ms")),
                t.get("status") == "ok", compact_input(t.get("input")))
        for t in tools
    )
    codes: dict[int, int] = {}
    for s in shells:
        code = _int(s.get("exit_code"), -1)
        codes[code] = codes.get(code, 0) + 1
    tasks = tuple(
        TaskRow(str(t.get("task_id") or "?"), _int(t.get("turns")), _int(t.get("input_tokens")),
                _int(t.get("output_tokens")), str(t.get("exit_status") or "?"), _int(t.get("duration_ms")),
                _int(t.get("tool_calls")), _int(t.get("shell_calls")))
        for t in task_ends
    )
    return SessionMetrics(
        session_id=session_id,
        capsule=capsule,
        model=start.get("model") if isinstance(start.get("model"), str) else None,
        exit_status=status,
        duration_ms=duration,
        turns=turns,
        max_turns=start.get("max_turns") if isinstance(start.get("max_turns"), int) else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tool_calls=len(tools),
        tool_ok=sum(1 for row in rows if row.ok),
        tool_latency_ms=_mean([row.duration_ms for row in rows]),
        tool_rows=rows,
        shell_calls=len(shells),
        exit_codes=tuple(sorted(codes.items())),
        shell_latency_ms=_mean([_int(s.get("duration_ms")) for s in shells]),
        compactions=tuple(compactions),
        tasks=tasks,
    )


def metrics_json(m: SessionMetrics) -> dict[str, Any]:
    """``--json`` form of :class:`SessionMetrics` (``murmur.trace.show/v1``)."""
    return {
        "schema": "murmur.trace.show/v1",
        "session_id": m.session_id,
        "capsule": m.capsule,
        "model": m.model,
        "exit_status": m.exit_status,
        "duration_ms": m.duration_ms,
        "turns": m.turns,
        "max_turns": m.max_turns,
        "input_tokens": m.input_tokens,
        "output_tokens": m.output_tokens,
        "tool_calls": {
            "count": m.tool_calls, "ok": m.tool_ok, "error": m.tool_errors, "success_pct": m.tool_success,
            "avg_latency_ms": m.tool_latency_ms,
            "rows": [attrs.asdict(r) for r in m.tool_rows],
        },
        "shell_calls": {
            "count": m.shell_calls, "exit_codes": {str(c): n for c, n in m.exit_codes},
            "avg_latency_ms": m.shell_latency_ms,
        },
        "compaction": [{"turn": t, "tokens_before": b, "tokens_after": a} for t, b, a in m.compactions],
        "tasks": [attrs.asdict(t) for t in m.tasks],
    }
