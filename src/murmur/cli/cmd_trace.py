"""``mur trace show | diff | report | view``: read what sessions recorded (spec/trace.md).

* ``show [SESSION|PATH] [--tree] [--json]``: one session's summary in upstream's sections;
  with ``--tree`` the whole tree as a waterfall (no address: the newest session / root).
* ``diff [A] [B] [--json]``: upstream's metric table (default: the two newest sessions).
* ``report [DIR] [--json]``: mean, stddev, min, max over every trace in ``DIR`` (default:
  ``$MURMUR_HOME/records``) and the exit-status distribution.
* ``view [ROOT|FORMATION|SESSION] --html FILE``: one self-contained HTML page of a tree.

Read-only. Exit 0; 1 with an ``E-TRC-…`` diagnostic for an address or file that names nothing.
"""

from __future__ import annotations

import argparse
import json
import sys

_ADDRESS = ("a session id (ses_…), a formation id (frm_…), a short id as `mur ps --tree` prints it, "
            "a suffix of 4+ characters, @N (Nth newest session), or a path to a trace.jsonl")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The four subcommands."""
    parser.description = ("Read what sessions recorded in their trace.jsonl: one session's summary, a whole "
                          "tree as a waterfall, two runs side by side, aggregates, or a page of a tree.")
    subs = parser.add_subparsers(dest="trace_command", metavar="COMMAND", required=True,
                                 parser_class=type(parser))
    show = subs.add_parser("show", help="a session's summary, or with --tree its whole tree as a waterfall",
                           description="Print one session's summary (session, turns, tokens, tool calls, shell "
                                       "calls, compaction, tasks); with --tree, the tree it is in: every session, "
                                       "task, model call, tool call, shell step, delegation and refusal with its "
                                       "start offset, duration and tokens, in lineage order.")
    show.add_argument("address", nargs="?", metavar="SESSION|PATH", help=f"{_ADDRESS} (default: the newest)")
    show.add_argument("--tree", action="store_true", help="the whole tree (default: the newest root)")
    show.add_argument("--json", action="store_true", help="print JSON (murmur.trace.show/v1, murmur.trace.tree/v1)")
    diff = subs.add_parser("diff", help="compare two sessions metric by metric",
                           description="Compare two sessions: turns, duration, tokens, tool and shell calls and "
                                       "latencies, compaction, exit status, with the better run named per metric.")
    diff.add_argument("a", nargs="?", metavar="A", help=f"run A: {_ADDRESS} (default: the second newest)")
    diff.add_argument("b", nargs="?", metavar="B", help="run B (default: the newest)")
    diff.add_argument("--json", action="store_true", help="print JSON (murmur.trace.diff/v1)")
    report = subs.add_parser("report", help="aggregate every trace in a directory",
                             description="Mean, population stddev, min and max of each metric over every trace "
                                         "in DIR (*.jsonl in it and every trace.jsonl below it), then how the "
                                         "sessions ended.")
    report.add_argument("dir", nargs="?", metavar="DIR", help="the directory (default: $MURMUR_HOME/records)")
    report.add_argument("--json", action="store_true", help="print JSON (murmur.trace.report/v1)")
    view = subs.add_parser("view", help="write one self-contained HTML page of a tree",
                           description="Write one HTML page of a tree from its local records (nothing is "
                                       "fetched): the tree as a graph, a timeline with a lane per session, and "
                                       "a summary (wall time, tokens by node, refusals, what teardown killed).")
    view.add_argument("address", nargs="?", metavar="ROOT|FORMATION|SESSION", help=f"{_ADDRESS} (default: the "
                      "newest root)")
    view.add_argument("--html", required=True, metavar="FILE", help="where to write the page")
    view.add_argument("--json", action="store_true", help='print {"path", "url", ...} as JSON')


def run(args: argparse.Namespace) -> int:
    """Run one ``mur trace`` subcommand."""
    return int({"show": _show, "diff": _diff, "report": _report, "view": _view}[args.trace_command](args))


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _show(args: argparse.Namespace) -> int:
    from murmur.observe import records, views

    if args.tree:
        from murmur.observe import tree, waterfall

        model = views.tree_of(args.address)
        _print(json.dumps(tree.model_json(model)) if args.json else waterfall.render(model))
        return 0
    from murmur.observe import summary

    loaded = records.load(views.session_trace(args.address))
    m = records.metrics(loaded.records)
    _print(json.dumps(records.metrics_json(m)) if args.json else summary.render(m))
    if loaded.skipped:
        print(f"note: {loaded.skipped} line(s) of {loaded.path} did not parse and were skipped", file=sys.stderr)
    return 0


def _diff(args: argparse.Namespace) -> int:
    from murmur.diagnostics import error
    from murmur.errors import DiagnosticError
    from murmur.observe import compare, records, views

    known = views.journal_sessions()
    if args.a is None or args.b is None:
        newest = sorted(known, key=lambda s: s.order, reverse=True)
        if args.a is None and len(newest) < 2:
            raise DiagnosticError(error("E-TRC-005", f"diff needs two sessions; {len(newest)} recorded here",
                                        hint="give two sessions or two trace.jsonl paths: mur trace diff A B"))
    a_addr = args.a if args.a is not None else "@2"
    b_addr = args.b if args.b is not None else ("@1" if args.a is None else None)
    a_path, b_path = views.session_trace(a_addr, known), views.session_trace(b_addr, known)
    if a_path.resolve() == b_path.resolve():  # a session against itself says nothing (spec/trace.md)
        only = len(known) == 1 and (args.a is None or args.b is None)
        raise DiagnosticError(error(
            "E-TRC-010",
            f"diff compares two sessions, but {a_addr} and {b_addr or '@1 (the default B)'} are the same one"
            + ("; only one session is recorded here" if only else ""),
            hint=("run the capsule again, then `mur trace diff @2 @1`" if only
                  else "give two different sessions: `mur trace diff @2 @1`, or A and B as ids or trace.jsonl paths"),
        ))
    a = records.metrics(records.load(a_path).records)
    b = records.metrics(records.load(b_path).records)
    _print(json.dumps(compare.diff_json(a, b)) if args.json else compare.render_diff(a, b))
    return 0


def _report(args: argparse.Namespace) -> int:
    from murmur.observe import compare, records, views

    where, files = views.report_files(args.dir)
    sessions = [records.metrics(records.load(f).records) for f in files]
    _print(json.dumps(compare.report_json(sessions, where)) if args.json else compare.render_report(sessions, where))
    return 0


def _view(args: argparse.Namespace) -> int:
    from pathlib import Path

    from murmur.observe import page, views

    model = views.tree_of(args.address)
    out = page.write(model, Path(args.html))
    url = out.resolve().as_uri()
    if args.json:
        _print(json.dumps({"path": str(out), "url": url, "root": model.root, "sessions": len(model.sessions)}))
    else:
        _print(f"page: {url}")
    return 0
