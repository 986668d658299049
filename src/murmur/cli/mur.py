"""``mur``: the murmur command line.

Each subcommand lives in its own module ``murmur.cli.cmd_<name>`` exposing
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their
command runs, so ``mur --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from murmur import __version__
from murmur.diagnostics import EXIT_REFUSED, Diagnostic, error

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
        "  -h, --help  show this help",
        "  --version   print the version",
        "",
        "Run `mur <command> --help` for a command's options.",
    ]
    return "\n".join(lines)


def build_parser(name: str) -> tuple[argparse.ArgumentParser, object]:
    """The parser for one subcommand and its module."""
    module_name, help_text = COMMANDS[name]
    module = importlib.import_module(f"murmur.cli.{module_name}")
    parser = argparse.ArgumentParser(prog=f"mur {name}", description=help_text)
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mur``; returns the exit status (also used by the console script)."""
    from murmur.cli._common import guarded

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(_overview(), file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(_overview())
        return 0
    if args[0] == "--version":
        print(f"mur {__version__}")
        return 0
    name = args[0]
    if name not in COMMANDS:
        kind = "option" if name.startswith("-") else "command"
        print(f"mur: unknown {kind} {name!r}\n\n{_overview()}", file=sys.stderr)
        return 2
    missing = missing_cwd()
    if missing is not None:
        from murmur.cli._common import emit

        emit(missing)
        return EXIT_REFUSED

    def go() -> int:
        parser, module = build_parser(name)
        ns = parser.parse_args(args[1:])
        return int(module.run(ns))  # type: ignore[attr-defined]

    return guarded(go, program="mur")


if __name__ == "__main__":
    sys.exit(main())
