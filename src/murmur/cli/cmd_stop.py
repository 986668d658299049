"""``mur stop ID``: end a node of the process tree and its whole subtree, in one grace.

``ID`` is a formation id, a session id, a short id unique in ``mur ps --tree``, a unique
suffix of 4+ characters, or ``@N`` (the Nth newest running session). Every live descendant
begins its wind-down at the same moment; 25 s later whatever is left is SIGKILLed
(spec/tree.md "Cascade"). A formation is ended through its launcher (spec/formation.md "How a
formation ends"). A session the tree journal does not know is stopped as one session
(SIGTERM, SIGKILL after ``--timeout``; spec/formation.md "mur stop").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``NAME``, ``--timeout`` and ``--json``."""
    parser.description = (
        "Stop a running formation or session and everything it started: every live "
        "descendant begins its wind-down at once, and whatever is left 25 s later is killed. "
        "NAME is a formation id (frm_…), a session id (ses_…), a short id as `mur ps --tree` "
        "prints it (ses_…c1c4), a unique suffix of 4 or more of its characters "
        "(case-insensitive), or @N for the Nth newest running session (@1 = newest)."
    )
    parser.add_argument(
        "name",
        metavar="NAME",
        help="a formation id (frm_…), a session id (ses_…), a short id, a unique suffix of "
        "4+ characters, or @N (Nth newest; @1 = newest)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds from the trigger to SIGKILL of what is left (default: 25 for a tree; "
        "10 for a session the tree does not know, 30 for a formation's launcher)",
    )
    parser.add_argument("--json", action="store_true",
                        help='print one JSON object ({"ok", "stopped", ...}) instead of lines')


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
    from murmur import timing
    from murmur.errors import DiagnosticError
    from murmur.formation import resolve_session, stop_named
    from murmur.tree import find_node, load_forest, stop_node

    name = args.name.strip()
    try:
        roots = load_forest()
        if name.startswith("@"):
            name = resolve_session(name).session_id
        node = find_node(roots, name)
        if node is None:
            report = stop_named(name, timeout=args.timeout)
            if args.json:
                print(json.dumps(report_json(report.lines)), flush=True)
            else:
                print("\n".join(report.lines), flush=True)
            return 0
        done = stop_node(node, kill_after=timing.LAUNCHER_KILL if args.timeout is None else args.timeout)
    except DiagnosticError as exc:  # also an ended node's E-RUN-022: --json prints it too
        if args.json:
            print(json.dumps({"ok": False, "diagnostics": [d.to_json() for d in exc.diagnostics]}), flush=True)
        raise
    if args.json:
        print(json.dumps({"ok": not done.left, **done.to_json()}), flush=True)
    else:
        print("\n".join(done.text()), flush=True)
    return 1 if done.left else 0
