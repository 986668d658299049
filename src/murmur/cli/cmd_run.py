"""``mur run``: run one capsule session, or a formation with ``--roster``.

Thin: parses options, installs the early signal handlers first (a signal that arrives while
the rest is imported is remembered, ``spec/session.md`` "Wind-down"), then hands over to
:mod:`murmur.assembly` and :mod:`murmur.cli.run_session` (or :mod:`murmur.cli.run_roster`
for ``--roster``). Specification: ``spec/session.md`` "Starting a session".
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from murmur.session import EarlySignals

_EPILOG = """\
--deadline takes an absolute RFC 3339 time with a zone (2026-12-01T17:30:00Z) or a duration
counted from now: digits followed by s, m, h or d, possibly combined (90s, 15m, 2h, 1h30m).
When it falls the session winds down, ends `deadline_reached` and exits 1 (E-RUN-053).

--spawn a,b / --no-spawn / MURMUR_SPAWN=a,b|none narrow the spawn set: the capsules this
session (and everything it delegates to) may start. They only narrow the manifest's
capabilities.spawn.allow; a delegation outside the set is refused before mur-roost is asked.

exit status: 0 ok; 1 the deciding task did not complete (E-RUN-040), a launch refusal, or
records that could not be written (E-RUN-007); 2 command-line misuse; 70 an internal error
(the message names its log file); 130 interrupted (Ctrl-C before the session was up; a
formation's SIGINT, 129 its SIGHUP); 143 forced exit (a second SIGTERM, or 20 s after the
first; a formation's SIGTERM).
"""


def _count(text: str) -> int:
    """A cap's value: a whole number of 0 or more (argparse type)."""
    import argparse

    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``mur run`` (``spec/session.md`` "Starting a session")."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument("--manifest", metavar="PATH", help="the capsule manifest (default: ./murmur.yaml)")
    parser.add_argument("--capsule", metavar="SCOPE/NAME", help="run an installed capsule (project store, then global)")
    parser.add_argument("--capsule-version", metavar="VERSION", help="the exact installed version (with --capsule)")
    parser.add_argument(
        "--project-dir", metavar="DIR", help="the project whose stores and murmur.lock --capsule resolves from (default: .)"
    )
    parser.add_argument("--task", metavar="TEXT|PATH", help="run this task (a file's contents, or the text) and end with it")
    parser.add_argument("--json", action="store_true", help="print one readiness JSON line on stdout and nothing else there")
    parser.add_argument("--workdir", metavar="DIR", help="the work folder (shell cwd; default: the current directory)")
    parser.add_argument(
        "--lifecycle-task-acceptance", choices=("none", "single", "queue"), help="override lifecycle.task_acceptance"
    )
    parser.add_argument("--lifecycle-after-task", choices=("exit", "sleep"), help="override lifecycle.after_task")
    parser.add_argument("--deadline", metavar="WHEN", help="wind down at this moment (see below)")
    parser.add_argument(
        "--budget-tokens", type=_positive_int, metavar="N",
        help="the tree's token budget: model calls of this session and every descendant stop at N (spec/gateway.md)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="extra start-up lines on stderr")
    parser.add_argument("--no-env-file", action="store_true", help="do not read ./.env")
    parser.add_argument(
        "--containment", choices=("advisory", "scoped", "sealed"), help="raise the containment class of this run (never lowers the manifest's floor; spec/containment.md)"
    )
    parser.add_argument(
        "--system-prompt", metavar="TEXT", help="use this system prompt for this run (agent capsules; replaces the manifest's)"
    )
    parser.add_argument(
        "--spawn", metavar="A,B", help="narrow the spawn set to these capsules (only narrows; see spec/tree.md)"
    )
    parser.add_argument("--no-spawn", action="store_true", help="the empty spawn set: every delegation is refused")
    parser.add_argument("--context", metavar="ID", help="the context id of this run's task: runs with the same id share one conversation record")
    parser.add_argument(
        "--resume", nargs="?", const="@1", default=None, metavar="SESSION",
        help="continue the conversation of a session of this work folder: its ses_ id, a unique suffix of 4+ "
        "characters, @N (Nth newest; bare --resume = @1) or its records path",
    )
    parser.add_argument("--resume-mode", choices=("full", "compact"), default="full",
                        help="full (default): reload the record verbatim; compact: the on-compaction hook summarises it first. "
                        "full is often the cheaper: a verbatim reload can hit the provider's prompt cache, while a "
                        "summary changes the prefix and costs a call")
    parser.add_argument("--forget-session", action="store_true",
                        help="transport process: drop the agent CLI session --context names and start it afresh")
    parser.add_argument("--max-tree-total", type=_count, metavar="N",
                        help="at most N delegations under this tree's root, refused ones included (default: unbounded)")
    parser.add_argument("--max-same-capsule-chain", type=_count, metavar="N",
                        help="at most N consecutive parent->child steps of the same capsule (default: off)")
    parser.add_argument(
        "--roster", nargs="?", const="", default=None, metavar="PATH", help="launch a formation (default ./roster.yaml)"
    )
    parser.add_argument(
        "--die-with-parent", nargs="?", const=0, default=None, type=_pid, metavar="PID",
        help="wind down (as on SIGTERM) when the process that started this one dies; =PID names it",
    )


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a process id")
    return int(text)


ROSTER_FLAGS_ALLOWED = frozenset(
    {"roster", "task", "json", "verbose", "no_env_file", "containment", "deadline", "die_with_parent",
     "budget_tokens", "max_tree_total", "max_same_capsule_chain"}
)


def _run_roster(args: argparse.Namespace, early: object | None = None) -> int:
    from murmur.diagnostics import error
    from murmur.errors import UsageError

    if args.resume is not None:
        raise UsageError(
            error("E-CNV-003", "a formation cannot be resumed: --roster and --resume do not combine",
                  hint="launch the formation again with `mur run --roster` (a new formation); "
                  "to continue one member's conversation, run `mur run --resume SESSION` for that member alone")
        )
    defaults = {"json": False, "verbose": False, "no_env_file": False, "no_spawn": False,
                "resume_mode": "full", "forget_session": False,
                "max_tree_total": None, "max_same_capsule_chain": None}
    extra = sorted(
        "--" + k.replace("_", "-")
        for k, v in vars(args).items()
        if k not in ROSTER_FLAGS_ALLOWED and v is not None and v != defaults.get(k)
    )
    if extra:
        raise UsageError(
            error("E-CLI-001", f"--roster cannot be combined with {', '.join(extra)}",
                  hint="--roster combines only with --task, --json, --verbose, --no-env-file, --containment, --deadline, --die-with-parent, --budget-tokens, --max-tree-total, --max-same-capsule-chain")
        )
    from murmur.starter import early as warm

    warm.prestart(os.environ)  # the warm starter's imports overlap the launcher's (spec/formation.md)
    try:
        from murmur.cli.run_roster import run_roster  # the formation side, only for --roster

        return int(run_roster(args, early=early))
    finally:
        warm.discard_unused()  # a launch refused before it took its starter


def run(args: argparse.Namespace) -> int:
    """Run ``mur run``; returns the exit status."""
    from murmur.session import install_early_handlers

    early = install_early_handlers()
    if args.die_with_parent is not None:  # after the handlers: the signal is a wind-down
        from murmur.parentdeath import die_with_parent

        die_with_parent(args.die_with_parent or None)
    if args.roster is not None:
        early.second_status = lambda signum: 128 + signum  # the launcher's rule (spec/formation.md)
        return _run_roster(args, early)

    # Start-up allocates much and frees almost nothing: the cyclic collector waits until the
    # readiness line (or the end, if the session never gets there), then runs as before.
    collecting = gc.isenabled()
    gc.disable()

    def resume_gc() -> None:
        if collecting:
            gc.enable()

    try:
        return _run_session(args, early, when_ready=resume_gc)
    finally:
        resume_gc()


def _positive_int(text: str) -> int:
    """An argparse type: an integer greater than 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("the budget must be greater than 0")
    return value


def _run_session(args: argparse.Namespace, early: EarlySignals, *, when_ready: Callable[[], None]) -> int:
    from murmur.assembly import RunOptions, prepare  # the session side, only for a session
    from murmur.cli.run_session import run_prepared

    opts = RunOptions(
        manifest=args.manifest,
        capsule=args.capsule,
        capsule_version=args.capsule_version,
        project_dir=args.project_dir,
        task=args.task,
        json=args.json,
        workdir=args.workdir,
        task_acceptance=args.lifecycle_task_acceptance,
        after_task=args.lifecycle_after_task,
        deadline=args.deadline,
        verbose=args.verbose,
        no_env_file=args.no_env_file,
        containment=args.containment,
        system_prompt=args.system_prompt,
        spawn=args.spawn,
        no_spawn=args.no_spawn,
        context=args.context,
        resume=args.resume,
        resume_mode=args.resume_mode,
        forget_session=args.forget_session,
        max_tree_total=args.max_tree_total,
        max_same_capsule_chain=args.max_same_capsule_chain,
        budget_tokens=args.budget_tokens,
    )
    setup = prepare(opts)
    return run_prepared(setup, json_mode=opts.json, verbose=opts.verbose, early=early, when_ready=when_ready)
