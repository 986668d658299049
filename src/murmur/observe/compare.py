"""``mur trace diff`` and ``mur trace report``: upstream's metric table and aggregates (pure).

``diff``: one row per metric, Run A, Run B, and a delta (B - A) saying which run is better:
lower is better for turns, duration, tokens, calls and latencies, higher for the tool
success rate; ``=`` when equal; ``—`` for what does not compare (compaction, exit status).

``report``: mean, population standard deviation, min and max of each metric over the
sessions, then the exit-status distribution, then per-task averages when any session held
more than one task. Sessions without tool calls are left out of ``tool success (%)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from murmur.observe.records import SessionMetrics
from murmur.observe.summary import duration, grouped

RULE = "─"


def _ms(v: float) -> str:
    return f"{v:.0f}ms"


def _delta(a: float | None, b: float | None, fmt: Callable[[float], str], *, higher_better: bool = False) -> str:
    if a is None or b is None:
        return "—"
    d = b - a
    if d == 0:
        return "="
    better = ("B" if d > 0 else "A") if higher_better else ("A" if d > 0 else "B")
    return f"{'+' if d > 0 else '-'}{fmt(abs(d))} ({better} better)"


def _avg(total: int, turns: int) -> float | None:
    return total / turns if turns else None


def diff_rows(a: SessionMetrics, b: SessionMetrics) -> list[tuple[str, str, str, str]]:
    """``(metric, run A, run B, delta)`` rows, in upstream's order."""
    def num(v: float | None, fmt: Callable[[float], str]) -> str:
        return "—" if v is None else fmt(v)

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1f}%"

    def comp(m: SessionMetrics) -> str:
        return "none" if m.compaction_turn is None else f"turn {m.compaction_turn}"

    def count(v: float) -> str:
        return str(int(v))

    def one(v: float) -> str:
        return f"{v:.1f}"

    def whole(v: float) -> str:
        return f"{v:.0f}"

    ia, ib = _avg(a.input_tokens, a.turns), _avg(b.input_tokens, b.turns)
    oa, ob = _avg(a.output_tokens, a.turns), _avg(b.output_tokens, b.turns)
    return [
        ("turns", str(a.turns), str(b.turns), _delta(a.turns, b.turns, count)),
        ("duration", duration(a.duration_ms), duration(b.duration_ms), _delta(a.duration_ms, b.duration_ms, duration)),
        ("input tokens", grouped(a.input_tokens), grouped(b.input_tokens), _delta(a.input_tokens, b.input_tokens, count)),
        ("output tokens", grouped(a.output_tokens), grouped(b.output_tokens),
         _delta(a.output_tokens, b.output_tokens, count)),
        ("input/turn (avg)", num(ia, whole), num(ib, whole), _delta(ia, ib, one)),
        ("output/turn (avg)", num(oa, whole), num(ob, whole), _delta(oa, ob, one)),
        ("tool calls", str(a.tool_calls), str(b.tool_calls), _delta(a.tool_calls, b.tool_calls, count)),
        ("tool success rate", pct(a.tool_success), pct(b.tool_success),
         _delta(a.tool_success, b.tool_success, one, higher_better=True)),
        ("avg tool latency", num(a.tool_latency_ms, _ms), num(b.tool_latency_ms, _ms),
         _delta(a.tool_latency_ms, b.tool_latency_ms, _ms)),
        ("shell calls", str(a.shell_calls), str(b.shell_calls), _delta(a.shell_calls, b.shell_calls, count)),
        ("avg shell latency", num(a.shell_latency_ms, _ms), num(b.shell_latency_ms, _ms),
         _delta(a.shell_latency_ms, b.shell_latency_ms, _ms)),
        ("compaction", comp(a), comp(b), "—"),
        ("exit status", a.exit_status, b.exit_status, "—"),
    ]


def render_diff(a: SessionMetrics, b: SessionMetrics) -> str:
    """The ``mur trace diff`` table."""
    out = [f"{'Metric':<22} {'Run A':<16} {'Run B':<16} Delta",
           f"{RULE * 22} {RULE * 16} {RULE * 16} {RULE * 26}"]
    out += [f"{m:<22} {va:<16} {vb:<16} {d}" for m, va, vb, d in diff_rows(a, b)]
    return "\n".join(out)


def diff_json(a: SessionMetrics, b: SessionMetrics) -> dict[str, Any]:
    """``--json``: ``{"schema": "murmur.trace.diff/v1", "a", "b", "rows": [{metric, a, b, delta}]}``."""
    return {"schema": "murmur.trace.diff/v1", "a": a.session_id, "b": b.session_id,
            "rows": [{"metric": m, "a": va, "b": vb, "delta": d} for m, va, vb, d in diff_rows(a, b)]}


def stats(values: Sequence[float]) -> tuple[float, float, float, float]:
    """``(mean, population stddev, min, max)`` of a non-empty sequence."""
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return mean, sd, min(values), max(values)


_ONE = "one"  # 2.7
_GROUPED = "grouped"  # 4,133


def _metric_rows(sessions: Sequence[SessionMetrics]) -> list[tuple[str, str, list[float]]]:
    with_tools = [m.tool_success for m in sessions if m.tool_success is not None]
    return [
        ("turns", _ONE, [m.turns for m in sessions]),
        ("duration (ms)", _GROUPED, [m.duration_ms for m in sessions]),
        ("input tokens", _GROUPED, [m.input_tokens for m in sessions]),
        ("output tokens", _GROUPED, [m.output_tokens for m in sessions]),
        ("tool calls", _ONE, [m.tool_calls for m in sessions]),
        ("tool success (%)", _ONE, [v for v in with_tools if v is not None]),
        ("shell calls", _ONE, [m.shell_calls for m in sessions]),
    ]


def _task_rows(sessions: Sequence[SessionMetrics]) -> list[tuple[str, str, list[float]]]:
    tasks = [t for m in sessions if len(m.tasks) > 1 for t in m.tasks]
    return [
        ("task turns", _ONE, [t.turns for t in tasks]),
        ("task input tokens", _GROUPED, [t.input_tokens for t in tasks]),
        ("task output tokens", _GROUPED, [t.output_tokens for t in tasks]),
        ("task duration (ms)", _GROUPED, [t.duration_ms for t in tasks]),
    ]


def _fmt(kind: str, v: float) -> str:
    """One decimal (rounded), or a whole number with thousands commas (cut toward zero, as
    upstream prints them: a stddev of 3996.9 reads ``3,996``)."""
    return f"{v:.1f}" if kind == _ONE else f"{int(v):,}"


def _table(rows: list[tuple[str, str, list[float]]]) -> list[str]:
    out = [f"{'Metric':<22} {'Mean':<14} {'StdDev':<14} {'Min':<14} Max",
           f"{RULE * 22} {RULE * 14} {RULE * 14} {RULE * 14} {RULE * 14}"]
    for name, kind, values in rows:
        if not values:
            continue
        mean, sd, lo, hi = stats(values)
        out.append(f"{name:<22} {_fmt(kind, mean):<14} {_fmt(kind, sd):<14} {_fmt(kind, lo):<14} {_fmt(kind, hi)}")
    return out


def render_report(sessions: Sequence[SessionMetrics], where: Path) -> str:
    """The ``mur trace report`` text for ``sessions`` read from ``where``."""
    out = [f"Files: {len(sessions)}  ({where})", ""]
    out += _table(_metric_rows(sessions))
    out += ["", "Exit status:"]
    counts: dict[str, int] = {}
    for m in sessions:
        counts[m.exit_status] = counts.get(m.exit_status, 0) + 1
    for status in sorted(counts):
        out.append(f"  {status:<24} {counts[status]}  ({100 * counts[status] / len(sessions):.1f}%)")
    multi = [m for m in sessions if len(m.tasks) > 1]
    if multi:
        out += ["", "── Per-task averages (multi-task sessions only) " + RULE * 14]
        out += _table(_task_rows(sessions))
        out.append(f"Tasks: {sum(len(m.tasks) for m in multi)}")
    return "\n".join(out)


def report_json(sessions: Sequence[SessionMetrics], where: Path) -> dict[str, Any]:
    """``--json``: ``{"schema": "murmur.trace.report/v1", "files", "dir", "metrics": {name:
    {mean, stddev, min, max}}, "exit_status": {status: count}, "per_task": {...} | null}``."""
    def block(rows: list[tuple[str, str, list[float]]]) -> dict[str, Any]:
        return {name: dict(zip(("mean", "stddev", "min", "max"), stats(v), strict=True)) for name, _, v in rows if v}

    counts: dict[str, int] = {}
    for m in sessions:
        counts[m.exit_status] = counts.get(m.exit_status, 0) + 1
    multi = any(len(m.tasks) > 1 for m in sessions)
    return {"schema": "murmur.trace.report/v1", "files": len(sessions), "dir": str(where),
            "metrics": block(_metric_rows(sessions)), "exit_status": dict(sorted(counts.items())),
            "per_task": block(_task_rows(sessions)) if multi else None}
