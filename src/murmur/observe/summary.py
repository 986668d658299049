"""``mur trace show``: one session's summary in upstream's sections (pure).

Sections, in order: Session, Turns, Tokens, Tool calls (with one row per call: turn, tool,
duration, ✓/✗, the input as compact JSON cut to 120 characters), Shell calls, Compaction,
and Tasks when the session held more than one task (spec/trace.md "mur trace show").
"""

from __future__ import annotations

from murmur.observe.records import SessionMetrics

WIDTH = 49
TIMES = "\u00d7"  # the multiplication sign upstream prints between count and exit code


def heading(title: str) -> str:
    """``── Title ───…`` ruled to :data:`WIDTH` characters."""
    head = f"── {title} "
    return head + "─" * max(2, WIDTH - len(head))


def duration(ms: float) -> str:
    """``500ms``, ``3.2s``, ``2m13s``, ``1h05m``."""
    ms = round(ms)
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def grouped(n: float) -> str:
    """``2,200`` (rounded to a whole number)."""
    return f"{round(n):,}"


def task_short(task_id: str) -> str:
    """Eight characters naming a task: an upstream task id's first eight, a ``tsk_`` id's last
    eight (its leading digits are a timestamp, shared by a session's tasks)."""
    return task_id[-8:] if task_id.startswith("tsk_") else task_id[:8]


def _field(name: str, value: str) -> str:
    return f"{name + ':':<12}{value}"


def render(m: SessionMetrics) -> str:
    """The text of ``mur trace show`` for one session."""
    out = [heading("Session"), _field("session", m.session_id), _field("capsule", m.capsule),
           _field("model", m.model or "—"), _field("status", m.exit_status), _field("duration", duration(m.duration_ms)),
           "", heading("Turns"), _field("count", f"{m.turns}  (max: {m.max_turns if m.max_turns is not None else '—'})"),
           "", heading("Tokens")]
    if m.turns:
        out.append(_field("input", f"{grouped(m.input_tokens)}  (avg {m.input_tokens / m.turns:.0f}/turn)"))
        out.append(_field("output", f"{grouped(m.output_tokens)}  (avg {m.output_tokens / m.turns:.0f}/turn)"))
    else:
        out.append(_field("input", grouped(m.input_tokens)))
        out.append(_field("output", grouped(m.output_tokens)))
    out.append(_field("total", grouped(m.input_tokens + m.output_tokens)))
    out += ["", heading("Tool calls")]
    if m.tool_calls:
        out.append(_field("count", f"{m.tool_calls}  ({m.tool_ok} ok, {m.tool_errors} error)  "
                                   f"success {m.tool_success or 0.0:.1f}%"))
        out.append(_field("latency", f"avg {m.tool_latency_ms or 0:.0f}ms"))
        for row in m.tool_rows:
            line = f"  turn {row.turn}  {row.name} {row.duration_ms}ms {'✓' if row.ok else '✗'}"
            out.append(line + (f"  {row.input}" if row.input else ""))
    else:
        out.append(_field("count", "0"))
    out += ["", heading("Shell calls"), _field("count", str(m.shell_calls))]
    if m.shell_calls:
        out.append(_field("exit codes", ", ".join(f"{n}{TIMES}{code}" for code, n in m.exit_codes)))
        out.append(_field("latency", f"avg {m.shell_latency_ms or 0:.0f}ms"))
    out += ["", heading("Compaction")]
    if m.compactions:
        out.append(_field("fired", f"yes ({len(m.compactions)}{TIMES})"))
        for turn, before, after in m.compactions:
            out.append(f"  turn {turn}  {grouped(before)} → {grouped(after)} tokens")
    else:
        out.append(_field("fired", "no"))
    if len(m.tasks) > 1:
        out.append(heading("Tasks"))
        for i, t in enumerate(m.tasks, 1):
            out.append(f"task {i}  {task_short(t.task_id)}  turns: {t.turns}  in: {t.input_tokens}  out: {t.output_tokens}  "
                       f"{t.exit_status}  {duration(t.duration_ms)}")
    return "\n".join(out)
