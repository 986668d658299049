"""Read the forest as it is now: the journal, liveness by pid and start time, running records.

The one I/O step in front of :func:`murmur.tree.forest.build_forest`.
"""

from __future__ import annotations

from murmur import procstat
from murmur.session import list_running
from murmur.tree import journal
from murmur.tree.forest import Node, attach_spend, build_forest


def load_forest() -> list[Node]:
    """The forest from ``$MURMUR_HOME`` (a missing journal gives an empty forest)."""
    events = journal.read_events()
    ended = {ev["id"] for ev in events if ev["event"] == "end"}
    alive: dict[str, bool] = {}
    for ev in events:
        if ev["event"] != "start" or ev["id"] in ended or ev["id"] in alive:
            continue
        pid, start = ev.get("pid"), ev.get("start_time")
        alive[ev["id"]] = isinstance(pid, int) and pid > 0 and procstat.start_time(pid) == start
    running = {}
    asking: dict[str, str] = {}
    for rec in list_running(prune=False).live:
        running[rec.session_id] = dict(rec.delegations or {})
        waiting = rec.waiting if isinstance(rec.waiting, list) else []
        prompts = [w["prompt"] for w in waiting if isinstance(w, dict) and isinstance(w.get("prompt"), str)]
        if prompts:
            asking[rec.session_id] = prompts[0]
    roots = build_forest(events, alive, running)
    from murmur.gateway import read_spend  # the tree gateway's spend files (spec/tree.md "TOKENS")

    attach_spend(roots, {root.id: read_spend(root.id) for root in roots})
    for root in roots:
        for node in root.walk():
            if node.id in asking and node.state == "running":
                node.state, node.reason = "input-required", asking[node.id]
    return roots
