"""``mur``: the murmur command line.

Each subcommand lives in its own module ``murmur.cli.cmd_<name>`` exposing
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their
command runs, so ``mur --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import typing

from murmur import __version__
from murmur.diagnostics import EXIT_REFUSED, EXIT_USAGE, Diagnostic, error

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "new": ("cmd_new", "write a new capsule (or roster) source directory"),
    "build": ("cmd_build", "pack a capsule source directory into <name>-<version>.mur.zip"),
    "install": ("cmd_install", "install a .mur.zip (or source directory) into a store"),
    "list": ("cmd_list", "list installed artifacts"),
    "run": ("cmd_run", "run a capsule session (or a formation with --roster)"),
    "doctor": ("cmd_doctor", "check a capsule or roster and report what would be refused"),
    "ps": ("cmd_ps", "list running sessions"),
    "stop": ("cmd_stop", "stop a running formation (or session)"),
    "demo": ("cmd_demo", "run the example audit formation end to end"),
    "agent": ("cmd_agent", "ask about capsules as agents: `mur agent who` (who can run what)"),
    "trace": ("cmd_trace", "read what sessions recorded: show (--tree), diff, report, view --html"),
    "watch": ("cmd_watch", "stream a running session's events (--tree: its whole tree)"),
    "context": ("cmd_context", "print how a capsule delegates by running a capsule's name (links)"),
}


def _overview() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = [
        "usage: mur <command> [options]",
        "",
        "murmur runs packaged AI agents (capsules) as local processes.",
        "",
        "commands:",
    ]
    lines += [f"  {n.ljust(width)}  {h}" for n, (_, h) in COMMANDS.items()]
    lines += [
        "",
        "options:",
        "  -h, --help      show this help",
        "  -V, --version   print the version",
        "",
        "Run `mur <command> --help` (or `mur help <command>`) for a command's options.",
    ]
    return "\n".join(lines)


_UNRECOGNISED = re.compile(r"unrecognized arguments: (.*)")
_INVALID = re.compile(r"argument (\S+?)(?:/\S+)?: invalid (?:\w+ value|choice): '([^']*)'(?: \(choose from (.*)\))?")
_NEEDS_VALUE = re.compile(r"argument (\S+?)(?:/\S+)?: expected one argument")


def parser_error_message(message: str) -> str:
    """An argparse error message reworded as murmur says it (one sentence, no usage dump)."""
    m = _UNRECOGNISED.fullmatch(message)
    if m:
        words = m.group(1).split()
        flags = [w for w in words if w.startswith("-")]
        if flags:
            return f"unrecognised option{'s' if len(flags) > 1 else ''} {' '.join(flags)}"
        return f"unexpected argument{'s' if len(words) > 1 else ''} {' '.join(words)}"
    m = _INVALID.fullmatch(message)
    if m:
        choices = f" (use one of: {m.group(3)})" if m.group(3) else ""
        return f"option {m.group(1)} cannot take '{m.group(2)}'{choices}"
    m = _NEEDS_VALUE.fullmatch(message)
    if m:
        return f"option {m.group(1)} needs a value (a value starting with `-` needs {m.group(1)}=VALUE)"
    return message.replace("the following arguments are required:", "missing the argument")


class CodedParser(argparse.ArgumentParser):
    """An argument parser whose errors are coded like every other refusal.

    ``error`` prints ``error[E-CLI-002]: <message>``, the one-line usage and a hint naming
    ``mur <command> --help``, then exits 2 — never argparse's multi-line usage dump.
    """

    def error(self, message: str) -> typing.NoReturn:
        diag = error("E-CLI-002", parser_error_message(message), hint=f"run `{self.prog} --help` for its options")
        lines = diag.render().splitlines()
        usage = " ".join(self.format_usage().split())
        if len(usage) > 100:  # one short line: the positionals, the options by name only
            positionals = [a.metavar or a.dest for a in self._actions if not a.option_strings]
            usage = " ".join([f"usage: {self.prog} [options]", *map(str, positionals)])
        print("\n".join([lines[0], f"  {usage}", *lines[1:]]), file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USAGE)


def build_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    """The parser for one subcommand and its module."""
    module_name, help_text = COMMANDS[name]
    module = importlib.import_module(f"murmur.cli.{module_name}")
    parser = CodedParser(prog=f"mur {name}", description=help_text)
    module.add_arguments(parser)
    return parser, module


def missing_cwd() -> Diagnostic | None:
    """``E-IO-001`` when the current working directory no longer exists, else None.

    A command run from a deleted directory is bad input (exit 1), not a bug: every command
    resolves paths against the cwd, which :func:`os.getcwd` cannot then name.
    """
    try:
        os.getcwd()
    except FileNotFoundError:
        return error("E-IO-001", "the current directory no longer exists",
                     hint="`cd` to a directory that exists and run the command again")
    return None


def not_utf8(run_args: list[str], environ: typing.Mapping[str, str]) -> Diagnostic | None:
    """``mur run``'s refusal of text that is not UTF-8, else None (spec/session.md "mur run").

    A session writes its arguments, its work folder and ``MURMUR_HOME`` into UTF-8 traces,
    records and the wire; a byte string that does not decode (Python holds it as surrogate
    escapes) would otherwise end the run as an internal error or a failed trace write. Returns
    ``E-CLI-002`` (exit 2) for an argument, ``E-IO-003`` (exit 1) for the current directory or
    ``MURMUR_HOME``."""

    def bad(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    for n, a in enumerate(run_args, start=1):
        if bad(a):
            shown = a.encode("utf-8", "backslashreplace").decode("ascii", "replace")
            return error("E-CLI-002", f"argument {n} of `mur run` ({shown}) is not UTF-8 text",
                         hint="pass UTF-8 text; a file or directory whose name is not UTF-8 needs a new name "
                         "(murmur records every argument in UTF-8)")
    home = environ.get("MURMUR_HOME", "")
    if bad(home):
        return error("E-IO-003", "MURMUR_HOME is not UTF-8 text",
                     hint="point MURMUR_HOME at a directory whose path is UTF-8 (murmur records its paths in UTF-8)")
    try:
        cwd = os.getcwd()
    except OSError:
        return None  # missing_cwd() says so
    if bad(cwd):
        return error("E-IO-003", "the current directory's path is not UTF-8 text",
                     hint="`cd` to a directory whose path is UTF-8 and run the command again "
                     "(murmur records the work folder's path in UTF-8)")
    return None


def launches_formation(run_args: list[str], environ: typing.Mapping[str, str]) -> bool:
    """Whether ``mur run <run_args>`` will launch a formation (``--roster`` given, outside a
    formation), read before the arguments are parsed so the warm starter can start first (pure)."""
    if environ.get("MURMUR_FORMATION_ID", "").strip():
        return False
    for a in run_args:
        if a == "--":
            return False
        if a == "--roster" or a.startswith("--roster="):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mur``; returns the exit status (also used by the console script)."""
    from murmur.cli._common import guarded

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(_overview(), file=sys.stderr)
        return 2
    if args[0] == "help" and len(args) > 1:
        args = [args[1], "--help", *args[2:]]  # `mur help CMD` is `mur CMD --help`
    if args[0] in ("-h", "--help", "help"):
        print(_overview())
        return 0
    if args[0] in ("--version", "-V"):
        print(f"mur {__version__}")
        return 0
    name = args[0]
    if name not in COMMANDS:
        kind = "option" if name.startswith("-") else "command"
        print(f"mur: unknown {kind} {name!r}\n\n{_overview()}", file=sys.stderr)
        return 2
    import logging

    logging.raiseExceptions = False  # a log line that cannot be written is dropped, never a traceback
    missing = missing_cwd()
    if missing is not None:
        from murmur.cli._common import emit

        emit(missing)
        return EXIT_REFUSED

    def go() -> int:
        parser, module = build_parser(name)
        ns = parser.parse_args(args[1:])
        return int(module.run(ns))  # type: ignore[attr-defined]

    if name != "run":
        return guarded(go, program="mur")
    odd = not_utf8(args[1:], os.environ)
    if odd is not None:
        from murmur.cli._common import emit

        emit(odd)
        return EXIT_USAGE if odd.code == "E-CLI-002" else EXIT_REFUSED
    own = argv is None  # this process's own command line: it exits with the status
    caller = None if own else _callers_signals()
    try:
        if not launches_formation(args[1:], os.environ):
            return _held(guarded(go, program="mur"), own=own)
        from murmur.starter import early as warm

        warm.prestart(os.environ)  # first thing: its imports overlap the launcher's (spec/formation.md)
        try:
            return _held(guarded(go, program="mur"), own=own)
        finally:
            warm.discard_unused()  # a launch refused (or a usage error) before it took its starter
    finally:
        if caller is not None:
            for sig, handler in caller.items():
                signal.signal(sig, handler)


def _callers_signals() -> dict[signal.Signals, typing.Any]:
    """The handlers of the signals ``mur run`` takes over (SIGTERM, SIGINT, SIGHUP, and SIGUSR1,
    the cascade; spec/session.md "Wind-down"), as ``main([...])``'s caller in its own process had
    them: put back when ``main`` returns, so that a caller's Ctrl-C stays its own. A handler
    installed outside Python (``None``) is left to whatever the run set."""
    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
    return {sig: h for sig in sigs if (h := signal.getsignal(sig)) is not None}


def _held(status: int, *, own: bool) -> int:
    """``mur run``'s status, decided: from here to the exit no signal changes it. Only when
    ``main`` runs this process's own command line (``own``): a caller of ``main([...])`` in
    its own process (a test run, a script) keeps its signals, and so do its later children
    (an ignored signal is inherited across ``exec``)."""
    if own:
        from murmur.session import hold_signals_to_exit

        hold_signals_to_exit()
    return status


if __name__ == "__main__":
    sys.exit(main())
