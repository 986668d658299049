"""``mur trace show --tree``: a text waterfall of a whole tree in lineage order (pure).

One line per session, task, model call, tool call, shell step, member call, delegation,
refusal and teardown: its start offset from the tree's first start, its duration, its tokens
(``-`` when nothing counted them), and what it was, indented under its session::

    trace 44ef9ae6…: frm_…0d3d, 5 sessions, wall 2.4s, 0 tokens, 0 refusals
       START      TIME  TOKENS  WHAT
      +0.000s     2.4s       -  formation frm_…0d3d (3 members): ok
      +0.013s     1.1s       -  ├─ ses_…9068 audit-lead@0.1.0 (member lead): ok
      +0.021s     1.0s       -  │    task tsk_…84fa (user): ok
"""

from __future__ import annotations

from murmur.observe.summary import duration, grouped
from murmur.observe.tree import Node, TreeModel

_MARK = {"refusal": "✗ ", "teardown": "⏹ "}


def _short(ident: str) -> str:
    prefix, _, hexpart = ident.partition("_")
    return f"{prefix}_…{hexpart[-4:]}" if len(hexpart) > 8 else ident


def _offset(ms: int) -> str:
    return f"+{ms / 1000:.3f}s"


def _prefixes(nodes: tuple[Node, ...]) -> dict[str, str]:
    """Tree glyphs per node (``├─ ``, ``│  └─ ``), from the lineage-ordered list."""
    out: dict[str, str] = {}
    last_child: dict[str | None, str] = {}
    for n in nodes:
        last_child[n.parent] = n.id
    stem: dict[str, str] = {}
    for n in nodes:
        if n.parent is None or n.depth == 0:
            out[n.id], stem[n.id] = "", ""
            continue
        base = stem.get(n.parent, "")
        last = last_child.get(n.parent) == n.id
        out[n.id] = base + ("└─ " if last else "├─ ")
        stem[n.id] = base + ("   " if last else "│  ")
    return out


def render(m: TreeModel) -> str:
    """The waterfall text."""
    sessions = m.sessions
    tokens = sum(n.input_tokens + n.output_tokens for n in sessions)
    trace = ", ".join(t[:8] + "…" for t in m.trace_ids) or "(no trace ids)"
    lines = [f"trace {trace}: {_short(m.root)}, {len(sessions)} session{'s' if len(sessions) != 1 else ''}, "
             f"wall {duration(m.wall_ms)}, {grouped(tokens)} tokens, {len(m.refusals)} refusal"
             f"{'s' if len(m.refusals) != 1 else ''}",
             f"   {'START':>8}  {'TIME':>7}  {'TOKENS':>7}  WHAT"]
    glyph = _prefixes(m.nodes)
    stems: dict[str, str] = {}
    for n in m.nodes:
        g = glyph[n.id]
        stems[n.id] = g[:-3] + ("   " if g.endswith("└─ ") else "│  ") if g else ""
    t0 = m.start_ms

    def row(start: int, dur: int | None, tok: int | None, what: str) -> str:
        took = "" if dur is None else duration(dur)
        return f"  {_offset(start - t0):>9}  {took:>7}  {('-' if tok is None else grouped(tok)):>7}  {what}"

    for n in m.nodes:
        if n.kind == "formation":
            lines.append(row(n.start_ms, n.end_ms - n.start_ms, None,
                             f"{glyph[n.id]}formation {_short(n.id)} {n.capsule.removeprefix('formation ')}: {n.status}"))
    by_session: dict[str, list[str]] = {}
    for sp in m.spans:
        if sp.kind == "session":
            continue
        indent = "  " * sp.level
        dur = sp.duration_ms if sp.duration_ms or sp.kind not in ("refusal",) else None
        by_session.setdefault(sp.session, []).append(
            row(sp.start_ms, dur, sp.tokens, f"{stems.get(sp.session, '')}{indent}{_MARK.get(sp.kind, '')}{sp.label}"
                + (f": {sp.status}" if sp.status and sp.kind in ("task",) else "")))
    out: list[str] = lines[:2]
    formation_rows = iter(lines[2:])
    for n in m.nodes:
        if n.kind == "formation":
            out.append(next(formation_rows))
            continue
        what = f"{glyph[n.id]}{_short(n.id)} {n.capsule}"
        if n.member:
            what += f" (member {n.member})"
        elif n.role in ("delegated", "link", "joined"):
            what += f" ({n.role})"
        what += f": {n.status}" + (f", killed: {n.killed}" if n.killed else "")
        tok = n.input_tokens + n.output_tokens
        out.append(row(n.start_ms, n.end_ms - n.start_ms, tok if tok else None, what))
        out += by_session.get(n.id, [])
    return "\n".join(out)
