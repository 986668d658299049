"""The forest ``mur ps --tree`` shows, built from the journal (pure; spec/tree.md).

:func:`build_forest` folds journal events (:mod:`murmur.tree.journal`) and two facts the
caller measured — which sessions' processes still run (pid *and* start time), which have a
running record — into nodes: formations (from their members' lineage), sessions, and their
delegated children under them in launch order. :func:`scope` picks what the text form shows;
:func:`render_text` and :func:`to_json` print it. No I/O, no clock: ``now_ms`` is passed in.

States: ``starting`` (journaled, no running record yet), ``running``, ``input-required`` (set by
the snapshot while a task waits for its user; ``reason`` holds the prompt line), ``winding-down``,
``ended`` with a status, ``uncertain`` (the process is gone and recorded no end; or mur-roost
or the node's parent was lost while it ran). A dead process is never ``running``. A delegation
that never started a session (refused, or its launch failed; the parent journals a
``delegation`` event) is a ``delegation`` node in state ``not-started`` with its status
(``refused`` | ``failed``) and reason, under its parent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

SCHEMA = "murmur.ps.tree/v1"
RECENT_MS = 3600 * 1000
"""Trees started this recently are listed without ``--all``."""
NEWEST = 5
"""The five newest trees are listed without ``--all``."""
ARG_CHARS = 64
LIVE_STATES = frozenset({"starting", "running", "input-required", "winding-down"})
GONE_REASON = "the process is gone and recorded no end"
PARENT_LOST = "its parent was lost while it ran"


@attrs.define(eq=False)
class Node:
    """One node of the forest (mutable while it is built; read-only afterwards)."""

    id: str
    kind: str  # "session" | "formation" | "delegation" (one that never started a session)
    state: str
    status: str | None = None
    exit_code: int | None = None
    created_unix_ms: int | None = None
    finished_unix_ms: int | None = None
    lineage: dict[str, Any] | None = None
    delegations: dict[str, int] = attrs.field(factory=lambda: {"started": 0, "refused": 0})
    capsule: str | None = None
    pid: int | None = None
    start_time: int | None = None
    reason: str | None = None
    caps: dict[str, Any] | None = None  # the tree caps from its journal start (spec/tree.md "Caps")
    tokens: dict[str, Any] | None = None  # {"own", "subtree", "budget"}: the gateway's spend files (spec/tree.md "TOKENS")
    order: int = 0
    children: list[Node] = attrs.field(factory=list)

    @property
    def live(self) -> bool:
        """Its process (or, for a formation, one of its members) still runs."""
        return self.state in LIVE_STATES

    def walk(self) -> Iterable[Node]:
        """This node, then every descendant (depth first, launch order)."""
        yield self
        for child in self.children:
            yield from child.walk()

    @property
    def parent_id(self) -> str | None:
        """The parent's bare id from the lineage (None for a root)."""
        parent = (self.lineage or {}).get("parent")
        return parent.split(":", 1)[1] if isinstance(parent, str) and ":" in parent else None


def _session_nodes(
    events: list[dict[str, Any]], alive: Mapping[str, bool], running: Mapping[str, Mapping[str, int]]
) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    winding: set[str] = set()
    uncertain: dict[str, str] = {}
    ends: dict[str, dict[str, Any]] = {}
    for i, ev in enumerate(events):
        kind, ident = ev["event"], ev["id"]
        if kind == "start" and ident not in nodes:
            lineage = ev.get("lineage") if isinstance(ev.get("lineage"), dict) else None
            nodes[ident] = Node(
                ident, "session", "starting",
                created_unix_ms=ev.get("unix_ms") if isinstance(ev.get("unix_ms"), int) else None,
                lineage=lineage,
                capsule=ev.get("capsule") if isinstance(ev.get("capsule"), str) else None,
                pid=ev.get("pid") if isinstance(ev.get("pid"), int) else None,
                start_time=ev.get("start_time") if isinstance(ev.get("start_time"), int) else None,
                caps=ev.get("caps") if isinstance(ev.get("caps"), dict) else None,
                order=i,
            )
        elif kind == "delegation" and ident not in nodes:
            nodes[ident] = _not_started(ev, i)
        elif kind == "winding_down":
            winding.add(ident)
        elif kind == "uncertain":
            uncertain.setdefault(ident, str(ev.get("reason") or "mur-roost was lost"))
        elif kind == "end":
            ends.setdefault(ident, ev)
    for ident, node in nodes.items():
        if node.kind == "delegation":
            continue
        end = ends.get(ident)
        if end is not None:
            node.state = "ended"
            node.status = str(end.get("status") or "unknown")
            code = end.get("exit_code")
            node.exit_code = code if isinstance(code, int) else None
            node.finished_unix_ms = end.get("unix_ms") if isinstance(end.get("unix_ms"), int) else None
            counts = end.get("delegations")
            if isinstance(counts, dict):
                node.delegations = {k: int(v) for k, v in counts.items() if isinstance(v, int)}
            if ident in uncertain:
                node.reason = uncertain[ident]
        elif not alive.get(ident, False):
            node.state = "uncertain"
            node.reason = uncertain.get(ident, GONE_REASON)
        elif ident in uncertain:
            node.state = "uncertain"
            node.reason = uncertain[ident]
        elif ident in winding:
            node.state = "winding-down"
        if ident in running and node.state != "ended":
            if node.state == "starting":
                node.state = "running"
            node.delegations = {k: int(v) for k, v in running[ident].items() if isinstance(v, int)}
    return nodes


def _not_started(ev: Mapping[str, Any], order: int) -> Node:
    """A ``delegation`` event: a delegation that never started a session, under its parent."""
    at = ev.get("unix_ms") if isinstance(ev.get("unix_ms"), int) else None
    parent = ev.get("parent") if isinstance(ev.get("parent"), str) else None
    status = ev.get("status") if ev.get("status") in ("refused", "failed") else "refused"
    return Node(
        ev["id"], "delegation", "not-started", status=status, created_unix_ms=at, finished_unix_ms=at,
        lineage={"parent": f"session:{parent}" if parent else None, "root": ev.get("root"), "delegation_id": ev["id"]},
        capsule=ev.get("capsule") if isinstance(ev.get("capsule"), str) else None,
        reason=str(ev.get("reason") or status), order=order,
    )


def _formation_node(fid: str, members: list[Node]) -> Node:
    states = {m.state for m in members}
    node = Node(fid, "formation", "ended", order=min(m.order for m in members))
    created = [m.created_unix_ms for m in members if m.created_unix_ms is not None]
    node.created_unix_ms = min(created) if created else None
    for state in ("running", "winding-down", "starting"):
        if state in states:
            node.state = state
            break
    else:
        if "uncertain" in states:
            node.state = "uncertain"
            node.reason = "a member's process is gone and recorded no end"
        else:
            finished = [m.finished_unix_ms for m in members if m.finished_unix_ms is not None]
            node.finished_unix_ms = max(finished) if finished else None
            bad = [m for m in members if m.status not in ("ok", "formation_ended")]
            node.status = bad[0].status if bad else "formation_ended"
            node.exit_code = 0 if not bad else 1
    node.lineage = {"parent": None, "root": fid, "depth": 0, "spawn": []}
    return node


def build_forest(
    events: list[dict[str, Any]], alive: Mapping[str, bool], running: Mapping[str, Mapping[str, int]]
) -> list[Node]:
    """The roots of the forest, trees with a live node first, then newest first.

    Args:
        events (list[dict]): the journal, oldest first.
        alive (Mapping[str, bool]): session id -> its recorded process still runs.
        running (Mapping[str, Mapping[str, int]]): session ids with a running record (their
            door serves) -> the record's ``delegations`` counts.

    Returns:
        list[Node]: formations and root sessions (and orphans whose parent the journal no
        longer holds), each with its children in launch order.
    """
    nodes = _session_nodes(events, alive, running)
    started = {(n.lineage or {}).get("delegation_id") for n in nodes.values() if n.kind == "session"}
    for ident in [i for i, n in nodes.items() if n.kind == "delegation" and i in started]:
        del nodes[ident]  # its child did start a session after all: that node stands for it
    formations: dict[str, list[Node]] = {}
    roots: list[Node] = []
    for node in sorted(nodes.values(), key=lambda n: n.order):
        lineage = node.lineage or {}
        parent = lineage.get("parent")
        if isinstance(parent, str) and parent.startswith("session:") and parent[8:] in nodes:
            nodes[parent[8:]].children.append(node)
        elif isinstance(parent, str) and parent.startswith("formation:"):
            formations.setdefault(parent[10:], []).append(node)
        else:
            roots.append(node)
    for fid, members in formations.items():
        f = _formation_node(fid, members)
        f.children = members
        roots.append(f)
    for root in roots:
        _lost_parents(root)
    roots.sort(key=lambda r: (not any(n.live for n in r.walk()), -(r.created_unix_ms or 0), -r.order))
    return roots


def _lost_parents(node: Node) -> None:
    """A live node under an uncertain session is uncertain too (its parent was lost)."""
    for child in node.children:
        if node.kind == "session" and node.state == "uncertain" and child.live:
            child.state = "uncertain"
            child.reason = PARENT_LOST
        _lost_parents(child)


def find(roots: Iterable[Node], ident: str) -> Node | None:
    """The node with this id anywhere in the forest."""
    for root in roots:
        for node in root.walk():
            if node.id == ident:
                return node
    return None


# -- scope and short ids ---------------------------------------------------------------------


@attrs.frozen
class Scoped:
    """What the text form lists: the shown roots and how many trees were left out."""

    roots: tuple[Node, ...]
    left_out: int


def scope(roots: list[Node], now_ms: int, *, show_all: bool = False) -> Scoped:
    """Running trees, trees started in the last hour, and the five newest (``--all``: every tree).

    ``roots`` must be in :func:`build_forest` order; the order is kept.
    """
    if show_all:
        return Scoped(tuple(roots), 0)
    newest = sorted(roots, key=lambda r: -(r.created_unix_ms or 0))[:NEWEST]
    keep = {id(r) for r in newest}
    for r in roots:
        if any(n.live for n in r.walk()) or (r.created_unix_ms or 0) >= now_ms - RECENT_MS:
            keep.add(id(r))
    shown = tuple(r for r in roots if id(r) in keep)
    return Scoped(shown, len(roots) - len(shown))


def short_ids(idents: Iterable[str], minimum: int = 4) -> dict[str, str]:
    """``prefix_…tail`` for each id: the shortest tail (at least ``minimum`` hex digits)
    that no other listed id ends with. Time-ordered ids share their leading hex, so the
    tail is what tells them apart."""
    ids = list(dict.fromkeys(idents))
    out: dict[str, str] = {}
    for ident in ids:
        prefix, _, hexpart = ident.partition("_")
        k = min(minimum, len(hexpart))
        while k < len(hexpart) and any(o != ident and o.endswith(hexpart[-k:]) for o in ids):
            k += 1
        out[ident] = f"{prefix}_…{hexpart[-k:]}" if k < len(hexpart) else ident
    return out


def resolve(roots: Iterable[Node], text: str) -> list[Node]:
    """The nodes ``text`` names: a full id, a listed short id (``ses_…c1c4``), or a suffix of
    at least 4 characters (case-insensitive). More than one means ambiguous."""
    wanted = text.strip().lower()
    every = [n for r in roots for n in r.walk()]
    exact = [n for n in every if wanted in _names(n)]
    if exact:
        return exact
    tail = wanted.split("…", 1)[1] if "…" in wanted else wanted
    prefix = wanted.split("_", 1)[0] + "_" if "…" in wanted else ""
    if len(tail) < 4:
        return []
    return [n for n in every if any(i.endswith(tail) and i.startswith(prefix) for i in _names(n))]


def _names(node: Node) -> tuple[str, ...]:
    """The ids that name ``node``: its own, and for a delegated child its ``dlg_`` id (so
    ``mur stop dlg_…`` stops the delegation's subtree; spec/tree.md "Cascade")."""
    dlg = (node.lineage or {}).get("delegation_id")
    return (node.id, dlg.lower()) if isinstance(dlg, str) and dlg else (node.id,)


# -- text and JSON ------------------------------------------------------------------------------


def ago(ms: int | None, now_ms: int) -> str:
    """``Ns|Nm|Nh|Nd ago`` (``-`` when unknown)."""
    if ms is None:
        return "-"
    secs = max(0, (now_ms - ms) // 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def run_time(node: Node, now_ms: int) -> str:
    """``12.3s``, ``2m13s``, ``1h05m`` from creation to end (or now); ``-`` when uncertain."""
    if node.created_unix_ms is None or node.state in ("uncertain", "not-started"):
        return "-"
    end = node.finished_unix_ms if node.finished_unix_ms is not None else now_ms
    ms = max(0, end - node.created_unix_ms)
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    secs = ms // 1000
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m"


def state_text(node: Node) -> str:
    """``ended <status>`` for an ended node, else the state."""
    if node.kind == "delegation":
        return str(node.status)
    return f"ended {node.status}" if node.state == "ended" else node.state


def _cut(text: str) -> str:
    return text if len(text) <= ARG_CHARS else text[: ARG_CHARS - 1] + "…"


def command(node: Node, shorts: Mapping[str, str]) -> str:
    """The COMMAND column: the formation and its size, the member name and capsule, or the
    capsule and the ``dlg_`` id of a delegated child (and ``via link: <calling command>`` for a
    child a capsule link started)."""
    if node.kind == "formation":
        n = len(node.children)
        return f"formation ({n} member{'s' if n != 1 else ''})"
    lineage = node.lineage or {}
    capsule = _cut(node.capsule or "?")
    parts: list[str] = []
    member = lineage.get("member")
    if isinstance(member, str) and str(lineage.get("parent", "")).startswith("formation:"):
        parts.append(f"{member} (entry)" if lineage.get("entry") is True else member)
    parts.append(capsule)
    dlg = lineage.get("delegation_id")
    if isinstance(dlg, str) and node.kind != "delegation":
        parts.append(f"({shorts.get(dlg, dlg)})")
    caller = lineage.get("caller")
    if lineage.get("via") == "link" and isinstance(caller, list):
        parts.append(_cut("via link: " + " ".join(str(w) for w in caller)))
    if node.state in ("uncertain", "input-required", "not-started") and node.reason:
        parts.append(f"[{node.reason}]")
    return " ".join(parts)


HEADER = ("ID", "STARTED", "STATE", "EXIT", "RUN", "REFUSED", "TOKENS", "COMMAND")


def tokens_text(node: Node) -> str:
    """The TOKENS column: ``own/subtree`` as the tree's gateway counted them (``-``: none)."""
    t = node.tokens
    if not t:
        return "-"
    return f"{t.get('own', 0)}/{t.get('subtree', 0)}"


def attach_spend(roots: Iterable[Node], spend: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
    """Set each node's ``tokens`` from its tree's spend records (root id -> node id -> record,
    :func:`murmur.gateway.spend.read_spend`'s shape); a node without one keeps None."""
    for root in roots:
        records = spend.get(root.id) or {}
        if not records:
            continue
        for node in root.walk():
            rec = records.get(node.id)
            if rec is not None:
                node.tokens = {"own": int(rec.get("own_tokens") or 0), "subtree": int(rec.get("subtree_tokens") or 0),
                               "budget": rec.get("budget_tokens")}


def rows(roots: Iterable[Node], now_ms: int, shorts: Mapping[str, str]) -> list[tuple[str, ...]]:
    """One row per node, children drawn with ``├─``/``└─``/``│`` in the ID and COMMAND columns."""
    out: list[tuple[str, ...]] = []

    def visit(node: Node, lead: str, branch: str) -> None:
        out.append(
            (
                branch + shorts.get(node.id, node.id),
                ago(node.created_unix_ms, now_ms),
                state_text(node),
                str(node.exit_code) if node.exit_code is not None else "-",
                run_time(node, now_ms),
                str(node.delegations.get("refused", 0)) if node.kind == "session" else "-",
                tokens_text(node),
                branch + command(node, shorts),
            )
        )
        for i, child in enumerate(node.children):
            last = i == len(node.children) - 1
            visit(child, lead + ("   " if last else "│  "), lead + ("└─ " if last else "├─ "))

    for root in roots:
        visit(root, "", "")
    return out


def render_text(scoped: Scoped, now_ms: int, *, show_all: bool = False) -> str:
    """The ``mur ps --tree`` text: a header, the rows, and the left-out count line."""
    if not scoped.roots:
        line = "no session trees recorded"
        if scoped.left_out:
            line += f" ({scoped.left_out} older trees not shown; `mur ps --tree --all` lists every tree)"
        return line
    every = [n.id for r in scoped.roots for n in r.walk()]
    every += [str((n.lineage or {}).get("delegation_id")) for r in scoped.roots for n in r.walk()
              if isinstance((n.lineage or {}).get("delegation_id"), str)]
    shorts = short_ids(every)
    table = [HEADER, *rows(scoped.roots, now_ms, shorts)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]]).rstrip()
             for row in table]
    if scoped.left_out:
        s = "s" if scoped.left_out != 1 else ""
        lines.append(f"({scoped.left_out} older tree{s} not shown; `mur ps --tree --all` lists every tree)")
    return "\n".join(lines)


def node_json(node: Node) -> dict[str, Any]:
    """One NODE of ``murmur.ps.tree/v1``."""
    out: dict[str, Any] = {
        "node": node.kind,
        "id": node.id,
        "state": node.state,
        "status": node.status,
        "exit_code": node.exit_code,
        "created_unix_ms": node.created_unix_ms,
        "finished_unix_ms": node.finished_unix_ms,
        "lineage": node.lineage,
        "refused": node.delegations.get("refused", 0),
        "started": node.delegations.get("started", 0),
    }
    if node.kind == "session":
        out["capsule"] = node.capsule
        out["pid"] = node.pid
    elif node.kind == "delegation":
        out["capsule"] = node.capsule
    if node.reason is not None:
        out["reason"] = node.reason
    if node.caps is not None:
        out["caps"] = node.caps
    out["tokens"] = node.tokens
    out["children"] = [node_json(c) for c in node.children]
    return out


def to_json(roots: Iterable[Node]) -> dict[str, Any]:
    """``{"schema": "murmur.ps.tree/v1", "roots": [NODE]}`` (unscoped)."""
    return {"schema": SCHEMA, "roots": [node_json(r) for r in roots]}
