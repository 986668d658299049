"""A tree's sessions, spans and edges, read together (spec/trace.md "The tree").

:func:`gather` picks the sessions of a tree from the journal: every session whose lineage
root is the tree's root, then every session whose ``session_start`` is in one of their
traces (so the demo's check desk, outside the formation but called from inside it, and its
child belong to the formation's tree), until nothing more joins. :func:`build` (pure) turns
their records into one :class:`TreeModel` that the waterfall, the page and ``--json`` draw.

Lineage order: a session follows the session (or formation) it hangs from: its lineage
parent; for a session outside the lineage (a desk joined by a call), the session whose span
its first task continued. Siblings in start order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs

from murmur.observe.address import Known
from murmur.observe.records import Record, load

ENDED_BY_TEARDOWN = frozenset({"formation_ended", "canceled", "deadline_reached"})
TEARDOWN_RECORDS = ("formation_ended", "spawner_ended", "deadline_reached")


class Span(NamedTuple):
    """One line of the waterfall / one bar of the timeline (a tuple: a tree has thousands).

    Attributes:
        kind (str): ``session``, ``task``, ``model``, ``tool``, ``shell``, ``call``,
            ``delegation``, ``refusal``, ``link`` or ``teardown``.
        session (str): the session it belongs to.
        start_ms (int): Unix ms.
        duration_ms (int): 0 for an instant (a refusal).
        label (str): what it was, for people.
        status (str | None): how it ended, when that has a word.
        input_tokens, output_tokens (int | None): tokens, when the record counts them.
        level (int): 0 the session, 1 a task or a session-level record, 2 inside a task.
    """

    kind: str
    session: str
    start_ms: int
    duration_ms: int
    label: str
    status: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    level: int = 1

    @property
    def tokens(self) -> int | None:
        """Input plus output tokens (None when neither is counted)."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@attrs.frozen
class Edge:
    """A hop between nodes: ``kind`` ``member`` (formation → member), ``call`` (a member call
    or a door call), ``delegation`` or ``link``; ``refused`` when it was refused (``dst`` is
    then ``refused:<capsule or member>``); ``count`` calls along it."""

    src: str
    dst: str
    kind: str
    refused: bool = False
    label: str = ""
    count: int = 1


@attrs.frozen
class Node:
    """A session (or a formation) of the tree.

    Attributes:
        id (str): ``ses_…`` / ``frm_…``.
        kind (str): ``session`` | ``formation``.
        parent (str | None): the node it hangs from in lineage order.
        depth (int): 0 for the root.
        capsule (str): ``name@version`` (sessions).
        role (str): ``root``, ``member``, ``delegated``, ``link``, ``joined`` (in the trace,
            outside the lineage), ``formation``.
        member (str | None): the member name.
        status (str): how it ended (``running`` without an end).
        start_ms, end_ms (int): Unix ms (``end_ms`` the last record seen while running).
        input_tokens, output_tokens (int): totals.
        killed (str | None): why it counts as killed at teardown (a forced exit, a signal).
        teardown (bool): its end came from a teardown (a formation or parent ending, a signal).
    """

    id: str
    kind: str
    parent: str | None
    depth: int
    capsule: str = ""
    role: str = "root"
    member: str | None = None
    status: str = "running"
    start_ms: int = 0
    end_ms: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    killed: str | None = None
    teardown: bool = False


@attrs.frozen
class TreeModel:
    """One tree: nodes in lineage order, spans in lineage then time order, edges."""

    root: str
    trace_ids: tuple[str, ...]
    nodes: tuple[Node, ...]
    spans: tuple[Span, ...]
    edges: tuple[Edge, ...]
    refusals: tuple[str, ...]

    @property
    def start_ms(self) -> int:
        """The earliest start of any node."""
        return min((n.start_ms for n in self.nodes if n.start_ms), default=0)

    @property
    def wall_ms(self) -> int:
        """From the earliest start to the latest end."""
        return max((n.end_ms for n in self.nodes), default=0) - self.start_ms

    @property
    def sessions(self) -> tuple[Node, ...]:
        """The session nodes, in lineage order."""
        return tuple(n for n in self.nodes if n.kind == "session")


def _first_trace_id(path: Path | None) -> str | None:
    """The ``trace_id`` of a trace's first line (reads one line)."""
    if path is None:
        return None
    try:
        with path.open("rb") as fh:
            line = fh.readline()
    except OSError:
        return None
    import json

    try:
        first = json.loads(line)
    except ValueError:
        return None
    tid = first.get("trace_id") if isinstance(first, dict) else None
    return tid if isinstance(tid, str) else None


_TRACE_ID = re.compile(rb'"trace_id":"([0-9a-f]{32})"')
_ids_cache: dict[Path, tuple[int, int, frozenset[str]]] = {}


def _all_trace_ids(path: Path | None) -> frozenset[str]:
    """Every ``trace_id`` a trace file holds (cached while its size and mtime stay)."""
    if path is None:
        return frozenset()
    try:
        st = path.stat()
        hit = _ids_cache.get(path)
        if hit is not None and hit[:2] == (st.st_size, st.st_mtime_ns):
            return hit[2]
        found = frozenset(m.decode() for m in _TRACE_ID.findall(path.read_bytes()))
    except OSError:
        return frozenset()
    _ids_cache[path] = (st.st_size, st.st_mtime_ns, found)
    return found


@attrs.frozen
class Gathered:
    """A tree's sessions (journal order), its trace ids, and the sessions that are in it only
    because some of their tasks joined one of its traces (``visiting``: a long-lived session
    a run called; only those records of theirs belong to the tree)."""

    sessions: tuple[Known, ...]
    traces: frozenset[str]
    visiting: frozenset[str]


def gather_tree(known: Sequence[Known], root: str) -> Gathered:
    """The sessions of ``root``'s tree (see the module text): the lineage and the sessions whose
    own trace (their first record's) is the tree's, to a fixed point; then sessions started
    elsewhere whose tasks joined one of those traces (a session started by hand that a command
    of the tree called), which add neither their lineage nor their own trace."""
    roots = {root}
    traces: set[str] = set()
    chosen: dict[str, Known] = {}
    visiting: set[str] = set()
    first_ids: dict[str, str | None] = {}
    for _ in range(32):  # closure: each round may add roots or traces
        grew = False
        for s in known:
            if s.id in chosen:
                continue
            if s.id not in first_ids:
                first_ids[s.id] = _first_trace_id(s.trace_path)
            first = first_ids[s.id]
            if s.root in roots or s.id == root or (first is not None and first in traces):
                chosen[s.id] = s
                grew = True
                roots.add(s.root)
                if first is not None:
                    traces.add(first)
        if not grew and traces:
            for s in known:
                if s.id not in chosen and _all_trace_ids(s.trace_path) & traces:
                    chosen[s.id] = s
                    visiting.add(s.id)
                    grew = True
        if not grew:
            break
    return Gathered(tuple(sorted(chosen.values(), key=lambda s: s.order)), frozenset(traces), frozenset(visiting))


def gather(known: Sequence[Known], root: str) -> list[Known]:
    """The sessions of ``root``'s tree, in journal order (:func:`gather_tree`)."""
    return list(gather_tree(known, root).sessions)


def only_the_trees(records: Mapping[str, Sequence[Record]], g: Gathered) -> dict[str, tuple[Record, ...]]:
    """Each session's records, a visiting session's cut to its session records and the records
    in the tree's traces."""
    out: dict[str, tuple[Record, ...]] = {}
    for sid, recs in records.items():
        if sid in g.visiting:
            recs = tuple(r for r in recs if r.get("trace_id") in g.traces
                         or r.get("event_type") in ("session_start", "session_end"))
        out[sid] = tuple(recs)
    return out


def read_records(sessions: Sequence[Known]) -> dict[str, tuple[Record, ...]]:
    """Each session's records (a trace that cannot be read gives none)."""
    out: dict[str, tuple[Record, ...]] = {}
    for s in sessions:
        path = s.trace_path
        try:
            out[s.id] = load(path).records if path is not None and path.exists() else ()
        except Exception:  # an unreadable trace is a node without spans, never a failed view
            out[s.id] = ()
    return out


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _short(ident: str) -> str:
    prefix, _, hexpart = ident.partition("_")
    return f"{prefix}_…{hexpart[-4:]}" if len(hexpart) > 8 else ident


def _cut(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def session_spans(sid: str, records: Sequence[Record], known: Known | None) -> tuple[list[Span], dict[str, Any]]:
    """The spans of one session and its facts (``start``, ``end``, ``status``, tokens)."""
    spans: list[Span] = []
    start = end = None
    starts: dict[str, Record] = {}
    dlg_start: dict[str, Record] = {}
    calls: dict[str, Record] = {}
    facts: dict[str, Any] = {"status": "running", "input_tokens": 0, "output_tokens": 0, "teardown_ms": None}
    last = 0
    for r in records:
        kind = r["event_type"]
        ts = _int(r.get("timestamp")) or 0
        last = max(last, ts)
        dur = _int(r.get("duration_ms")) or 0
        if kind == "session_start":
            start = r
        elif kind == "session_end":
            end = r
            facts["status"] = str(r.get("exit_status") or "unknown")
            facts["input_tokens"] = _int(r.get("total_input_tokens")) or 0
            facts["output_tokens"] = _int(r.get("total_output_tokens")) or 0
        elif kind == "task_start":
            starts[str(r.get("task_id"))] = r
        elif kind == "task_end":
            began = starts.pop(str(r.get("task_id")), None)
            t0 = _int(began.get("timestamp")) if began else None
            t0 = t0 if t0 is not None else ts - dur
            origin = began.get("origin") if began else None
            spans.append(Span("task", sid, t0, max(0, ts - t0), f"task {_short(str(r.get('task_id')))}"
                              + (f" ({origin})" if origin else ""), str(r.get("exit_status")),
                              _int(r.get("input_tokens")), _int(r.get("output_tokens")), 1))
        elif kind == "inference":
            what = str(r.get("decision") or "")
            if r.get("tool_name"):
                what += f" {r['tool_name']}"
            spans.append(Span("model", sid, ts - dur, dur, f"model turn {r.get('turn', '?')}: {what}".rstrip(": "),
                              "failed" if r.get("error_code") else "ok",
                              _int(r.get("input_tokens")), _int(r.get("output_tokens")), 2))
        elif kind == "tool_call":
            spans.append(Span("tool", sid, ts - dur, dur, f"tool {r.get('tool_name', '?')}", str(r.get("status")),
                              level=2))
        elif kind == "shell":
            code = _int(r.get("exit_code"))
            cmd = str(r.get("command") or "")
            binary = str(r.get("binary") or "").rsplit("/", 1)[-1]
            label = f"shell {binary} {cmd}" if binary and cmd.split(" ", 1)[0] != binary else f"shell {cmd}"
            spans.append(Span("shell", sid, ts - dur, dur, _cut(label) + f" → exit {code}",
                              "ok" if code == 0 else "failed", level=2))
        elif kind == "member_call_start":
            calls[str(r.get("call_id"))] = r
        elif kind == "member_call":
            status = str(r.get("status") or "")
            began = calls.get(str(r.get("call_id")))
            t0 = (_int(began.get("timestamp")) if began else None) or ts - dur
            refused = status in ("rejected", "refused") or (status == "failed" and began is None)
            spans.append(Span("refusal" if refused else "call", sid, t0, 0 if refused else max(0, ts - t0),
                              f"call → {r.get('member', '?')}: {status}", status, level=2))
        elif kind == "delegation_start":
            dlg_start[str(r.get("delegation_id"))] = r
        elif kind == "delegation":
            dlg = str(r.get("delegation_id"))
            outcome = str(r.get("outcome") or "")
            if outcome == "refused" or (r.get("delegation_id") is None and not r.get("child_session_id")):
                reason = str(r.get("reason") or outcome)
                spans.append(Span("refusal", sid, ts, 0, _cut(f"delegation to {r.get('capsule', '?')} refused: {reason}",
                                                             100), "refused", level=1))
            elif dlg in dlg_start:
                began = dlg_start.pop(dlg)
                t0 = _int(began.get("timestamp")) or ts - dur
                spans.append(Span("delegation", sid, t0, max(0, ts - t0),
                                  f"delegation → {r.get('capsule', '?')} {_short(str(r.get('child_session_id') or '?'))}:"
                                  f" {outcome}", outcome, level=1))
        elif kind == "task_rejected":
            spans.append(Span("refusal", sid, ts, 0, f"task rejected: {r.get('cause', '?')}", "rejected", level=1))
        elif kind == "link_request" and r.get("exit") not in (0, None):
            spans.append(Span("refusal", sid, ts, 0, _cut(f"link {r.get('capsule') or '?'} refused: "
                                                         f"{r.get('outcome') or r.get('detail')}", 100),
                              "refused", level=1))
        elif kind in TEARDOWN_RECORDS and facts["teardown_ms"] is None:
            facts["teardown_ms"] = ts
    for began in starts.values():  # a task still running
        t0 = _int(began.get("timestamp")) or last
        spans.append(Span("task", sid, t0, max(0, last - t0), f"task {_short(str(began.get('task_id')))}", "running",
                          level=1))
    t_start = (_int(start.get("timestamp")) if start else None) or (known.started_ms if known else 0) or last
    end_ms = _int(end.get("timestamp")) if end else None
    if end_ms is None and known is not None and known.end is not None:
        end_ms = _int(known.end.get("unix_ms"))
    if end_ms is None:
        end_ms = last
    facts.update(start=t_start, end=max(end_ms, t_start), start_record=start or {})
    if known is not None and known.winding_down_ms is not None and facts["teardown_ms"] is None:
        facts["teardown_ms"] = known.winding_down_ms
    if known is not None and known.end is not None and facts["status"] == "running":
        facts["status"] = str(known.end.get("status") or "ended")
    td = facts["teardown_ms"]
    if td is not None and td <= facts["end"]:
        spans.append(Span("teardown", sid, td, facts["end"] - td, f"teardown ({facts['status']})", facts["status"],
                          level=1))
    return spans, facts


def _killed(known: Known | None, status: str) -> str | None:
    end = known.end if known is not None else None
    if end is None:
        return None
    code = _int(end.get("exit_code"))
    if end.get("forced"):
        return f"forced exit ({code})"
    if code is not None and code >= 128:
        return f"exit {code} (signal {code - 128})"
    return None


def _member_edges(sid: str, records: Sequence[Record], by_member: Mapping[tuple[str, str], str],
                  formation: str | None) -> list[Edge]:
    out = []
    for r in records:
        if r["event_type"] != "member_call":
            continue
        member = str(r.get("member") or "?")
        status = str(r.get("status") or "")
        dst = by_member.get((formation or "", member))
        refused = status in ("rejected", "refused") or dst is None or (status == "failed" and not r.get("member_task_id"))
        out.append(Edge(sid, dst if dst and not refused else f"refused:{member}", "call", refused, f"call {status}"))
    return out


def build(root: str, sessions: Sequence[Known], records: Mapping[str, Sequence[Record]],
          traces: frozenset[str] | None = None) -> TreeModel:
    """The tree's model (pure): ``sessions`` as :func:`gather` chose them, ``records`` theirs,
    ``traces`` the tree's trace ids (default: those of each session's first record)."""
    by_id = {s.id: s for s in sessions}
    span_owner: dict[str, str] = {}
    for sid, recs in records.items():
        for r in recs:
            sp = r.get("span_id")
            if isinstance(sp, str):
                span_owner[sp] = sid
    formations: dict[str, list[str]] = {}
    by_member: dict[tuple[str, str], str] = {}
    for s in sessions:
        frm = s.lineage.get("formation_id")
        parent = s.lineage.get("parent")
        if isinstance(parent, str) and parent.startswith("formation:"):
            formations.setdefault(parent[10:], []).append(s.id)
            if isinstance(s.lineage.get("member"), str):
                by_member[(str(frm or parent[10:]), s.lineage["member"])] = s.id
    parent_of: dict[str, str | None] = {}
    role: dict[str, str] = {}
    edges: list[Edge] = []
    for s in sessions:
        parent = s.lineage.get("parent")
        if isinstance(parent, str) and parent.startswith("session:") and parent[8:] in by_id:
            parent_of[s.id] = parent[8:]
            role[s.id] = "link" if s.lineage.get("via") == "link" else "delegated"
        elif isinstance(parent, str) and parent.startswith("formation:"):
            parent_of[s.id] = parent[10:]
            role[s.id] = "member"
            edges.append(Edge(parent[10:], s.id, "member", label=str(s.lineage.get("member") or "")))
        else:
            caller = None
            for r in records.get(s.id, ()):
                if r["event_type"] in ("task_start", "session_start"):
                    owner = span_owner.get(str(r.get("parent_span_id")))
                    if owner is not None and owner != s.id:
                        caller = owner
                        break
            parent_of[s.id] = caller
            role[s.id] = "joined" if caller is not None else "root"
    # door calls made outside the lineage (a command's HTTP call): a task that continued a span
    # of another session; member calls and completions have edges of their own
    for s in sessions:
        for r in records.get(s.id, ()):
            if r["event_type"] != "task_start" or r.get("origin") in ("completion",):
                continue
            owner = span_owner.get(str(r.get("parent_span_id")))
            if owner is None or owner == s.id or (r.get("origin") == "peer" and role.get(s.id) == "member"):
                continue
            if parent_of.get(s.id) == owner and role.get(s.id) in ("delegated", "link"):
                continue  # a child's first task: its delegation edge says it
            edges.append(Edge(owner, s.id, "call", label="door call"))
    for s in sessions:
        frm = s.lineage.get("formation_id")
        edges += _member_edges(s.id, records.get(s.id, ()), by_member, str(frm) if frm else None)
        for r in records.get(s.id, ()):
            if r["event_type"] == "delegation_start" and r.get("child_session_id"):
                child = str(r["child_session_id"])
                via = by_id.get(child)
                kind = "link" if via is not None and via.lineage.get("via") == "link" else "delegation"
                edges.append(Edge(s.id, child, kind, label=f"{r.get('capsule', '')} {r.get('delegation_id', '')}"))
            elif r["event_type"] == "delegation" and r.get("outcome") == "refused":
                edges.append(Edge(s.id, f"refused:{r.get('capsule', '?')}", "delegation", True,
                                  str(r.get("reason") or "refused")))
    # fix cycles: a parent chain that returns to itself hangs from the root instead
    for sid in list(parent_of):
        seen = {sid}
        p = parent_of[sid]
        while p is not None and p in parent_of:
            if p in seen:
                parent_of[sid] = None
                break
            seen.add(p)
            p = parent_of[p]
    all_spans: list[Span] = []
    facts: dict[str, dict[str, Any]] = {}
    for s in sessions:
        spans, f = session_spans(s.id, records.get(s.id, ()), s)
        all_spans += spans
        facts[s.id] = f
    nodes: list[Node] = []
    children: dict[str | None, list[str]] = {}
    tops: list[str] = []
    for fid in formations:
        parent_of.setdefault(fid, None)
    for ident in parent_of:
        p = parent_of[ident]
        if p is None or (p not in parent_of and p not in formations):
            tops.append(ident)
        else:
            children.setdefault(p, []).append(ident)

    def start_of(ident: str) -> int:
        if ident in facts:
            return int(facts[ident]["start"])
        return min((int(facts[m]["start"]) for m in formations.get(ident, []) if m in facts), default=0)

    tops.sort(key=lambda i: (i != root, start_of(i)))
    order: list[tuple[str, int, str | None]] = []

    def visit(ident: str, depth: int, parent: str | None) -> None:
        order.append((ident, depth, parent))
        for c in sorted(children.get(ident, []), key=start_of):
            visit(c, depth + 1, ident)

    for t in tops:
        visit(t, 0 if t == tops[0] else 1, None if t == tops[0] else tops[0])
    for ident, depth, parent in order:
        if ident in formations and ident not in facts:
            held = [facts[m] for m in formations[ident] if m in facts]
            statuses = [str(h["status"]) for h in held]
            bad = [st for st in statuses if st not in ("ok", "formation_ended")]
            nodes.append(Node(ident, "formation", parent, depth, role="formation",
                              status="running" if "running" in statuses else (bad[0] if bad else "ok"),
                              start_ms=min((int(h["start"]) for h in held), default=0),
                              end_ms=max((int(h["end"]) for h in held), default=0),
                              capsule=f"formation ({len(held)} members)"))
            continue
        s = by_id[ident]
        f = facts[ident]
        status = str(f["status"])
        nodes.append(Node(ident, "session", parent, depth, s.capsule, role.get(ident, "root"),
                          s.lineage.get("member") if isinstance(s.lineage.get("member"), str) else None,
                          status, int(f["start"]), int(f["end"]), int(f["input_tokens"]), int(f["output_tokens"]),
                          _killed(s, status), status in ENDED_BY_TEARDOWN or f["teardown_ms"] is not None))
    rank = {n.id: i for i, n in enumerate(nodes)}
    all_spans.sort(key=lambda sp: (rank.get(sp.session, 1 << 30), sp.start_ms, sp.level))
    session_rows = [Span("session", n.id, n.start_ms, max(0, n.end_ms - n.start_ms),
                         f"{n.capsule}" + (f" (member {n.member})" if n.member else ""), n.status,
                         n.input_tokens, n.output_tokens, 0) for n in nodes if n.kind == "session"]
    spans_out: list[Span] = []
    by_session: dict[str, list[Span]] = {}
    for sp in all_spans:
        by_session.setdefault(sp.session, []).append(sp)
    for row in session_rows:
        spans_out.append(row)
        spans_out += by_session.get(row.session, [])
    merged: dict[tuple[str, str, str, bool], Edge] = {}
    for e in edges:
        key = (e.src, e.dst, e.kind, e.refused)
        merged[key] = attrs.evolve(merged[key], count=merged[key].count + 1) if key in merged else e
    refusals = tuple(f"{_short(sp.session)}: {sp.label}" for sp in spans_out if sp.kind == "refusal")
    if traces is None:
        traces = frozenset(str(r["trace_id"]) for recs in records.values() for r in recs[:1] if r.get("trace_id"))
    return TreeModel(root, tuple(sorted(traces)), tuple(nodes), tuple(spans_out), tuple(merged.values()), refusals)


def model_json(m: TreeModel) -> dict[str, Any]:
    """``--json`` of a tree (``murmur.trace.tree/v1``)."""
    return {
        "schema": "murmur.trace.tree/v1",
        "root": m.root,
        "trace_ids": list(m.trace_ids),
        "start_unix_ms": m.start_ms,
        "wall_ms": m.wall_ms,
        "nodes": [attrs.asdict(n) for n in m.nodes],
        "spans": [{**s._asdict(), "offset_ms": s.start_ms - m.start_ms, "tokens": s.tokens} for s in m.spans],
        "edges": [attrs.asdict(e) for e in m.edges],
        "refusals": list(m.refusals),
        "killed": [{"id": n.id, "why": n.killed} for n in m.nodes if n.killed],
    }
