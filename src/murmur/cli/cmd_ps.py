"""``mur ps``: list running sessions, or the forest (``--tree``).

Specification: ``spec/session.md``, "Running records"; ``spec/tree.md``, "``mur ps --tree``".

Flat form: reads ``$MURMUR_HOME/running/``; a record whose pid is gone or now names another
process (start time differs) is pruned with a ``pruned: <ses> — <reason>`` line on stderr.
Columns: ``SESSION CAPSULE STATUS DETACHED UPTIME PARENT REFUSED FORMATION URL``; ``--json``
prints one JSON array (``uptime`` as text beside ``uptime_s``, seconds as a number). STATUS is
``input-required`` while a task waits for its user; each such task follows its row as
``└─ <task> input-required: <prompt cut to one line>`` (``waiting`` in ``--json``).
A record that cannot be read is skipped with a ``W-RUN-009`` warning (a malformed one is set
aside in ``running/unreadable/``, so it is reported once); the others are still listed.
Exit 0; 1 with ``E-RUN-028`` when the ``running/`` directory itself cannot be read.

``--tree`` (spec/tree.md): the forest of formations, operator sessions and delegated children
from the host journal; scoped to running trees, trees from the last hour and the five newest
unless ``--all``; ``--json`` prints ``murmur.ps.tree/v1``, unscoped.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json``, ``--tree``, ``--all``."""
    parser.description = (
        "List running sessions, or with --tree the whole forest: formations and their members, "
        "operator sessions, and delegated children under their parents, with their state "
        "(starting, running, winding-down, ended <status>, uncertain). Without --all the tree "
        "shows running trees, trees from the last hour and the five newest; --json is unscoped."
    )
    parser.add_argument("--json", action="store_true", help="print JSON (a list; with --tree murmur.ps.tree/v1)")
    parser.add_argument("--tree", action="store_true", help="print the forest of session trees")
    parser.add_argument("--all", action="store_true", help="with --tree: every tree the journal holds")


def uptime_seconds(started_at: str, now: dt.datetime) -> float | None:
    """Seconds since ``started_at`` (RFC 3339), never negative; None when unreadable."""
    try:
        start = dt.datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if start.tzinfo is None:
        return None
    return max(0.0, round((now - start).total_seconds(), 3))


def _uptime(started_at: str, now: dt.datetime) -> str:
    seconds = uptime_seconds(started_at, now)
    if seconds is None:
        return "?"
    secs = int(seconds)
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m"


def _parent(lineage: dict[str, object] | None) -> str | None:
    parent = (lineage or {}).get("parent")
    return parent.split(":", 1)[1] if isinstance(parent, str) and ":" in parent else None


def waiting_of(record: object) -> list[tuple[str, str]]:
    """``(task_id, prompt line)`` of each task the running record says waits for input."""
    raw = getattr(record, "waiting", None)
    if not isinstance(raw, list):
        return []
    out = []
    for w in raw:
        if isinstance(w, dict) and isinstance(w.get("task_id"), str) and isinstance(w.get("prompt"), str):
            out.append((w["task_id"], w["prompt"]))
    return out


def status_of(record: object) -> str:
    """``input-required`` while a task waits for its user, else ``running``."""
    return "input-required" if waiting_of(record) else "running"


def run_tree(args: argparse.Namespace, now_ms: int | None = None) -> int:
    """``mur ps --tree``; returns the exit status."""
    from murmur.tree import load_forest, render_text, scope, to_json

    roots = load_forest()
    if args.json:
        print(json.dumps(to_json(roots), indent=2))
        return 0
    now = int(time.time() * 1000) if now_ms is None else now_ms
    print(render_text(scope(roots, now, show_all=args.all), now, show_all=args.all))
    return 0


def run(args: argparse.Namespace) -> int:
    """List running sessions; returns the exit status."""
    from murmur.cli._common import emit
    from murmur.diagnostics import error
    from murmur.session import list_running

    if args.tree:
        return run_tree(args)
    if args.all:
        from murmur.errors import UsageError

        raise UsageError(error("E-CLI-001", "--all goes with --tree", hint="run `mur ps --tree --all`"))
    census = list_running(prune=True)
    if census.directory_error is not None:
        from murmur import paths

        emit(error("E-RUN-028", f"the running records directory {paths.running_dir()} cannot be read: "
                   f"{census.directory_error}", hint="make it a directory this user can read"))
        return 1
    for sid, why in census.pruned:
        print(f"pruned: {sid} — {why}", file=sys.stderr)
    now = dt.datetime.now(dt.UTC)
    if args.json:
        rows = [
            {
                "session_id": r.session_id,
                "capsule": r.name,
                "version": r.version,
                "status": status_of(r),
                "waiting": [{"task_id": t, "prompt": p} for t, p in waiting_of(r)],
                "detached": r.outlives_launcher,
                "uptime": _uptime(r.started_at, now),
                "uptime_s": uptime_seconds(r.started_at, now),
                "started_at": r.started_at,
                "formation_id": r.formation_id,
                "parent": _parent(r.lineage),
                "lineage": r.lineage,
                "refused": (r.delegations or {}).get("refused", 0),
                "started": (r.delegations or {}).get("started", 0),
                "url": r.url,
                "pid": r.pid,
                "workdir": r.workdir,
                "records_dir": r.records_dir,
            }
            for r in census.live
        ]
        print(json.dumps(rows, indent=2))
    elif not census.live:
        print("no running capsules")
    else:
        from murmur.tree import short_ids

        shorts = short_ids([p for r in census.live if (p := _parent(r.lineage))])
        table = [("SESSION", "CAPSULE", "STATUS", "DETACHED", "UPTIME", "PARENT", "REFUSED", "FORMATION", "URL")]
        asks: dict[int, list[tuple[str, str]]] = {}
        for r in census.live:
            parent = _parent(r.lineage)
            if waiting_of(r):
                asks[len(table)] = waiting_of(r)
            table.append(
                (
                    r.session_id,
                    f"{r.name}@{r.version}",
                    status_of(r),
                    "yes" if r.outlives_launcher else "no",
                    _uptime(r.started_at, now),
                    shorts.get(parent, parent) if parent else "-",
                    str((r.delegations or {}).get("refused", 0)),
                    r.formation_id or "-",
                    r.url,
                )
            )
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for i, row in enumerate(table):
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
            for task_id, prompt in asks.get(i, []):
                print(f"  └─ {task_id} input-required: {prompt}")
    for path, why in census.unreadable:
        emit(error("W-RUN-009", f"skipped the running record {path}: {why}",
                   hint="remove the file if no such session runs"))
    return 0
