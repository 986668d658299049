"""``mur stop ID``: end a node of the process tree and its whole subtree, in one grace.

``ID`` is a formation id, a session id, a short id unique in ``mur ps --tree``, a unique
suffix of 4+ characters, or ``@N`` (the Nth newest running session). Every live descendant
begins its wind-down at the same moment; 25 s later whatever is left is SIGKILLed
(spec/tree.md "Cascade"). A formation is ended through its launcher (seed 004). A session
the tree journal does not know is stopped as one session (SIGTERM, SIGKILL after
``--timeout``; spec/formation.md "mur stop").
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``NAME``, ``--timeout``, ``--json``."""
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
    parser.add_argument("--json", action="store_true", help="print what was ended as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Stop what ``args.name`` names; print what was done; 0 when it ended."""
    from murmur import timing
    from murmur.formation.stop import resolve_session, stop
    from murmur.tree.snapshot import load_forest
    from murmur.tree.stop import find_node, stop_node

    name = args.name.strip()
    roots = load_forest()
    if name.startswith("@"):
        name = resolve_session(name).session_id
    node = find_node(roots, name)
    if node is None:
        report = stop(name, timeout=args.timeout)
        if args.json:
            print(json.dumps({"stopped": name, "lines": list(report.lines)}), flush=True)
        else:
            print("\n".join(report.lines), flush=True)
        return 0
    done = stop_node(node, kill_after=timing.LAUNCHER_KILL if args.timeout is None else args.timeout)
    if args.json:
        print(json.dumps(done.to_json()), flush=True)
    else:
        print("\n".join(done.text()), flush=True)
    return 1 if done.left else 0
