"""``mur stop NAME``: end a running formation (by its ``frm_`` id) or one session.

A formation id is ended through its launcher (SIGTERM; the launcher closes every lifeline);
anything else is a session address (full ``ses_`` id, a 4+ character suffix, or ``@N``),
ended with SIGTERM and, after ``--timeout`` seconds, SIGKILL. Specification:
``spec/formation.md`` ("mur stop").
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``NAME`` and ``--timeout``."""
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


def run(args: argparse.Namespace) -> int:
    """Stop what ``args.name`` names; print what was done; 0 when it ended."""
    from murmur.formation.stop import stop

    report = stop(args.name, timeout=args.timeout)
    print("\n".join(report.lines), flush=True)
    return 0
