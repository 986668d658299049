"""``mur ps``: list running sessions (contract sheet section 3.2).

Reads ``$MURMUR_HOME/running/``; a record whose pid is gone or now names another process
(start time differs) is pruned with a ``pruned: <ses> — <reason>`` line on stderr. Columns:
``SESSION CAPSULE STATUS DETACHED UPTIME FORMATION URL``; ``--json`` prints one JSON array
(``uptime`` as text beside ``uptime_s``, seconds as a number).
Exit 0; 1 with ``E-RUN-028`` when a record cannot be read (the readable ones are still listed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json``."""
    parser.add_argument("--json", action="store_true", help="print the sessions as one JSON array")


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


def run(args: argparse.Namespace) -> int:
    """List running sessions; returns the exit status."""
    from murmur.cli._common import emit
    from murmur.diagnostics import error
    from murmur.session.running import list_running

    census = list_running(prune=True)
    for sid, why in census.pruned:
        print(f"pruned: {sid} — {why}", file=sys.stderr)
    now = dt.datetime.now(dt.UTC)
    if args.json:
        rows = [
            {
                "session_id": r.session_id,
                "capsule": r.name,
                "version": r.version,
                "status": "running",
                "detached": r.outlives_launcher,
                "uptime": _uptime(r.started_at, now),
                "uptime_s": uptime_seconds(r.started_at, now),
                "started_at": r.started_at,
                "formation_id": r.formation_id,
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
        table = [("SESSION", "CAPSULE", "STATUS", "DETACHED", "UPTIME", "FORMATION", "URL")]
        for r in census.live:
            table.append(
                (
                    r.session_id,
                    f"{r.name}@{r.version}",
                    "running",
                    "yes" if r.outlives_launcher else "no",
                    _uptime(r.started_at, now),
                    r.formation_id or "-",
                    r.url,
                )
            )
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for path, why in census.unreadable:
        emit(error("E-RUN-028", f"the running record {path} cannot be read: {why}", hint="remove the file if no such session runs"))
    return 1 if census.unreadable else 0
