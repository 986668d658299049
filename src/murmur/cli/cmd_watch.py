"""``mur watch [SESSION] [--tree]``: a running session's events as they happen (spec/trace.md).

Prints one line per record the session writes (its tasks, their steps and frames, model
calls, tool calls, shell steps, member calls, delegations), reading its ``trace.jsonl`` as it
grows; with ``--tree`` every session of its tree, descendants that start later included.
Ends when the session (with ``--tree``: the tree's root) ends; exit 0. Ctrl-C ends it at once,
exit 130. Addresses as ``mur trace`` takes them; no address: the newest running session, and
``E-TRC-011`` (exit 1) when none runs (an address, ``@1`` included, replays an ended session
and exits 0). A formation id is watched as a tree.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from murmur.observe.address import Known


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``SESSION``, ``--tree``, ``--json``, ``--interval``."""
    parser.description = ("Stream a running session's events as they happen: its tasks, their steps, model calls, "
                          "tool calls and shell steps. With --tree, every session of its tree, new descendants "
                          "included. Ends when the session (with --tree, its root) ends; Ctrl-C stops it.")
    parser.add_argument("address", nargs="?", metavar="SESSION",
                        help="a session or formation id, a short id, a suffix of 4+ characters, or @N "
                             "(default: the newest running session)")
    parser.add_argument("--tree", action="store_true", help="follow the whole tree the session is in")
    parser.add_argument("--json", action="store_true", help="print each record as one JSON line instead")
    parser.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                        help="how often the traces are read (default 0.1)")


def _alive(pid: int | None, start_time: int | None) -> bool:
    from murmur import procstat

    return pid is not None and procstat.start_time(pid) == start_time


def _nothing_running(known: Sequence[Known]) -> NoReturn:
    """No address and no live session: refuse (exit 1), never replay an old run as if it were
    the current one (a script streaming "what runs now" must not get yesterday's records).

    Raises:
        DiagnosticError: ``E-TRC-011``, whose hint names how to replay the newest session;
            ``E-TRC-005`` when nothing was ever recorded.
    """
    from murmur.diagnostics import error
    from murmur.errors import DiagnosticError
    from murmur.observe import address

    newest = address.newest_session(known)  # E-TRC-005 when there is none
    raise DiagnosticError(error(
        "E-TRC-011", "nothing is running: mur watch with no address follows a running session, and none runs",
        hint=f"`mur watch @1` replays the newest session ({newest}, ended); `mur ps --tree` lists the sessions",
    ))


def run(args: argparse.Namespace) -> int:
    """Follow until the session (or tree root) ends; 130 on Ctrl-C."""
    from murmur.observe import address, follow, tree, views

    known = views.journal_sessions()
    if args.address is not None:
        target = address.resolve(known, args.address)
    else:
        live = [s for s in known if s.end is None and _alive(s.pid, s.start_time)]
        if not live:
            _nothing_running(known)
        target = address.newest_session(live)
    tree_mode = args.tree or target.startswith("frm_")  # a formation is only ever watched whole
    root = address.root_of(known, target) if tree_mode else target
    state: dict[str, object] = {"known": known, "read_at": time.monotonic()}
    visiting: dict[str, frozenset[str]] = {}  # a visiting session's records outside the tree's traces are hidden

    def current() -> list[address.Known]:
        now = time.monotonic()
        if now - float(state["read_at"]) >= 0.5:  # type: ignore[arg-type]
            state["known"], state["read_at"] = views.journal_sessions(), now
        sessions: list[address.Known] = state["known"]  # type: ignore[assignment]
        if not tree_mode:
            return [s for s in sessions if s.id == target]
        g = tree.gather_tree(sessions, root)
        visiting.clear()
        visiting.update({sid: g.traces for sid in g.visiting})
        return list(g.sessions)

    def shown(s: address.Known, rec: dict[str, object]) -> bool:
        traces = visiting.get(s.id)
        return traces is None or rec.get("trace_id") in traces or rec.get("event_type") in ("session_start",
                                                                                             "session_end")

    follower = follow.Follower(current)
    ended: set[str] = set()
    members = root.startswith("frm_")

    def who(s: address.Known) -> str:
        name = s.lineage.get("member") or s.capsule.split("@", 1)[0]
        return f"{follow.short(s.id)} {name}"

    def root_done() -> bool:
        sessions = current()
        if members:
            mine = [s for s in sessions if s.lineage.get("parent") == f"formation:{root}"]
            return bool(mine) and all(s.id in ended or s.end is not None or not _alive(s.pid, s.start_time)
                                      for s in mine)
        s = next((s for s in sessions if s.id == root), None)
        return s is None or s.id in ended or s.end is not None or not _alive(s.pid, s.start_time)

    print(f"watching {root}{' and its tree' if tree_mode else ''}; Ctrl-C stops",
          file=sys.stderr, flush=True)
    try:
        while True:
            for s, rec in follower.poll():
                if rec.get("event_type") == "session_end":
                    ended.add(s.id)
                if not shown(s, rec):
                    continue
                sys.stdout.write((json.dumps(rec) if args.json else follow.line(rec, who(s))) + "\n")
            sys.stdout.flush()
            if root_done():
                for s, rec in follower.poll():  # what was written as it ended
                    if not shown(s, rec):
                        continue
                    sys.stdout.write((json.dumps(rec) if args.json else follow.line(rec, who(s))) + "\n")
                sys.stdout.flush()
                print(f"{follow.short(root)} ended", file=sys.stderr, flush=True)
                return 0
            time.sleep(max(0.02, args.interval))
    except KeyboardInterrupt:
        print("watch stopped (Ctrl-C)", file=sys.stderr, flush=True)
        return 130
