"""A synthetic tree on disk: a journal and one trace per session, written with the real
:class:`~murmur.session.trace.TraceWriter` (so the ids are the runtime's own).

A formation of ``members`` members; every member but the first delegates to a child, each
child to another, until ``sessions`` sessions exist; the first member is killed at teardown,
and one delegation is refused. The events are spread evenly: tasks, model turns, tool calls,
shell steps, member calls. Used by tests/observe and benchmarks/trace.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from murmur.ids import new_id
from murmur.session.trace import TraceWriter
from murmur.tracectx import SpanContext, span_of

T0 = 1_800_000_000_000


class _Clock:
    def __init__(self, start: int) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 4
        return self.now


def write_tree(home: Path, *, sessions: int = 8, events: int = 400, members: int = 3) -> dict[str, Any]:
    """Write the tree under ``home`` (its ``tree/journal.jsonl`` and ``records/``).

    Returns:
        dict: ``formation`` (id), ``sessions`` (ids in journal order), ``children`` (id ->
        parent id), ``members`` (name -> id), ``killed`` (id), ``trace_id``.
    """
    frm = new_id("frm")
    trace_id = frm[4:]
    journal: list[dict[str, Any]] = []
    per = max(8, events // sessions)
    out: dict[str, Any] = {"formation": frm, "sessions": [], "children": {}, "members": {}, "trace_id": trace_id}
    clock = _Clock(T0)
    order = itertools.count()
    spans: dict[str, SpanContext] = {}  # session id -> its task's span (what a child joins)

    def one(sid: str, name: str, lineage: dict[str, Any], joins: SpanContext, *, delegate_to: str | None,
            refuse: bool, calls: list[str]) -> None:
        records = home / "records" / "w" / sid
        records.mkdir(parents=True, exist_ok=True)
        start = clock.now
        journal.append({"v": 1, "event": "start", "id": sid, "unix_ms": start, "pid": 1, "start_time": 1,
                        "capsule": f"{name}@0.1.0", "lineage": lineage, "workdir": str(records),
                        "records_dir": str(records), "_order": next(order)})
        with TraceWriter(records / "trace.jsonl", sid, now_ms=clock, joins=joins) as w:
            s = w.emit("session_start", parent_id=None, capsule_name=name, capsule_version="0.1.0", model="m",
                       max_turns=50, lineage=lineage)
            task_id = new_id("tsk")
            t = w.emit("task_start", parent_id=s, task_id=task_id, origin="user", lane="user")
            spans[sid] = w.span(t)
            n = 4
            turn = 0
            tin = tout = 0
            while n < per - 6:
                i = w.emit("inference", parent_id=t, turn=turn, input_tokens=100 + turn, output_tokens=20,
                           decision="tool_call", tool_name="bash", duration_ms=3)
                w.emit("tool_call", parent_id=i, turn=turn, tool_name="bash", input={"command": f"echo {turn}"},
                       duration_ms=2, status="ok")
                w.emit("shell", parent_id=i, turn=turn, binary="/bin/echo", command=f"echo {turn}", exit_code=0,
                       duration_ms=1)
                tin, tout, turn, n = tin + 100 + turn, tout + 20, turn + 1, n + 3
            for callee in calls:
                w.emit("member_call_start", parent_id=s, task_id="t", call_id=f"mcl_{callee}", member=callee)
                w.emit("member_call", parent_id=s, call_id=f"mcl_{callee}", member=callee, status="completed",
                       duration_ms=5, member_task_id="tsk_x")
            if delegate_to is not None:
                w.emit("delegation_start", parent_id=s, delegation_id=f"dlg_{delegate_to[4:]}", capsule="worker",
                       version="0.1.0", child_session_id=delegate_to)
            if refuse:
                w.emit("delegation", parent_id=s, capsule="forbidden", version="0.1.0", delegation_id=None,
                       child_session_id=None, duration_ms=0, outcome="refused", reason="not in the spawn set")
            done_at = clock.now + 50
            clock.now = done_at
            if delegate_to is not None:
                w.emit("delegation", parent_id=s, capsule="worker", version="0.1.0",
                       delegation_id=f"dlg_{delegate_to[4:]}", child_session_id=delegate_to, duration_ms=40,
                       outcome="completed", reason=None)
            w.emit("task_end", parent_id=t, task_id=task_id, exit_status="ok", duration_ms=clock.now - start, turns=turn,
                   input_tokens=tin, output_tokens=tout, tool_calls=turn, shell_calls=turn)
            w.emit("session_end", parent_id=s, total_turns=turn, total_input_tokens=tin, total_output_tokens=tout,
                   total_tool_calls=turn, total_shell_calls=turn, duration_ms=clock.now - start, exit_status="ok")
        out["sessions"].append(sid)

    names = [f"m{i}" for i in range(members)]
    ids = {n: new_id("ses") for n in names}
    out["members"] = ids
    chains: list[list[str]] = [[] for _ in names]
    left = sessions - members
    k = 1
    while left > 0:  # children of members 1.., round robin, each chain one deeper
        chains[k % members or 1].append(new_id("ses"))
        left -= 1
        k += 1
    formation_span = SpanContext(trace_id, span_of(frm))
    pending: list[tuple[str, str, dict[str, Any], str | None, str]] = []
    for idx, name in enumerate(names):
        sid = ids[name]
        chain = chains[idx]
        lineage = {"parent": f"formation:{frm}", "root": frm, "depth": 1, "spawn": [], "formation_id": frm,
                   "member": name}
        one(sid, name, lineage, formation_span, delegate_to=chain[0] if chain else None, refuse=idx == 1,
            calls=names[1:] if idx == 0 else [])
        parent = sid
        for depth, child in enumerate(chain, 2):
            pending.append((child, parent, {"parent": f"session:{parent}", "root": frm, "depth": depth, "spawn": [],
                                            "delegation_id": f"dlg_{child[4:]}", "formation_id": frm},
                            chain[depth - 1] if depth - 1 < len(chain) else None, name))
            parent = child
    for child, parent, lineage, grandchild, _member in pending:
        one(child, "worker", lineage, spans[parent], delegate_to=grandchild, refuse=False, calls=[])
        out["children"][child] = parent
    killed = ids[names[0]]
    out["killed"] = killed
    for sid in out["sessions"]:
        forced = sid == killed
        journal.append({"v": 1, "event": "end", "id": sid, "unix_ms": clock.now, "status": "ok",
                        "exit_code": 143 if forced else 0, **({"forced": True} if forced else {})})
    (home / "tree").mkdir(parents=True, exist_ok=True)
    with (home / "tree" / "journal.jsonl").open("w") as fh:
        for ev in sorted(journal, key=lambda e: (e["event"] != "start", e.get("_order", 0))):
            ev.pop("_order", None)
            fh.write(json.dumps(ev) + "\n")
    return out
