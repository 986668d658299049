"""``mur stop NAME``: end a running formation (by its ``frm_`` id) or one session.

A formation id is ended through its launcher (SIGTERM; the launcher closes every lifeline);
anything else is a session address (full ``ses_`` id, a 4+ character suffix, or ``@N``),
ended with SIGTERM and, after ``--timeout`` seconds, SIGKILL. Specification:
``spec/formation.md`` ("mur stop").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``NAME``, ``--timeout`` and ``--json``."""
    parser.description = (
        "Stop a running formation (through its launcher) or one session (SIGTERM, then "
        "SIGKILL after --timeout). NAME is a formation id (frm_…) or a session address: "
        "a full session id (ses_…), a unique suffix of 4 or more of its characters "
        "(case-insensitive), or @N for the Nth newest running session (@1 = newest). "
        "`mur ps` lists running sessions."
    )
    parser.add_argument(
        "name",
        metavar="NAME",
        help="a formation id (frm_…), or a session address: ses_… id, a unique suffix of "
        "4+ characters, or @N (Nth newest; @1 = newest)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wait this long after SIGTERM before SIGKILL (default: 10 for a session, "
        "30 for a formation's launcher)",
    )


    parser.add_argument("--json", action="store_true",
                        help='print one JSON object ({"ok", "stopped", "signal", ...}) instead of lines')


def report_json(lines: Sequence[str]) -> dict[str, object]:
    """The ``--json`` object for a stop report's ``key: value`` lines.

    Keys: ``ok`` (true), ``stopped`` (the id), ``kind`` (``formation`` | ``session``),
    ``signal`` (``SIGTERM`` | ``SIGKILL`` | …, absent when nothing was signalled),
    ``capsule`` (``name version``, sessions), ``launcher_pid`` (int, formations),
    ``sessions`` (``["<ses> (<signal>)", …]``, members stopped as sessions).
    """
    out: dict[str, object] = {"ok": True}
    sessions: list[str] = []
    for line in lines:
        key, _, value = line.partition(": ")
        if key == "session":
            sessions.append(value)
        elif key == "launcher":
            pid = value.removeprefix("pid ")
            out["launcher_pid"] = int(pid) if pid.isdigit() else pid
        elif key:
            out[key] = value
    stopped = str(out.get("stopped", ""))
    out["kind"] = "formation" if stopped.startswith("frm_") else "session"
    if sessions or out["kind"] == "formation":
        out["sessions"] = sessions
    return out


def run(args: argparse.Namespace) -> int:
    """Stop what ``args.name`` names; print what was done; 0 when it ended.

    With ``--json`` a refusal is also one JSON object on stdout
    (``{"ok": false, "diagnostics": [...]}``) beside the diagnostic on stderr.
    """
    from murmur.errors import DiagnosticError
    from murmur.formation.stop import stop

    try:
        report = stop(args.name, timeout=args.timeout)
    except DiagnosticError as exc:
        if args.json:
            print(json.dumps({"ok": False, "diagnostics": [d.to_json() for d in exc.diagnostics]}), flush=True)
        raise
    if args.json:
        print(json.dumps(report_json(report.lines)), flush=True)
    else:
        print("\n".join(report.lines), flush=True)
    return 0
