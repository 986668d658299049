"""``mur demo [PATH] [--home DIR] [--keep] [--json]``: the example audit formation, end to end.

Thin: parses options and hands over to :func:`murmur.demo.run_demo` (README, "What the demo
just did").
"""

from __future__ import annotations

import argparse
from pathlib import Path

_EPILOG = """\
The demo copies murmur's example formation (murmur/examples/audit) into a private directory,
builds and installs its capsules into a private MURMUR_HOME there, starts mur-roost on a free
loopback port, starts the check desk (the one capsule that delegates), runs the formation with
the task "audit PATH" and prints the report its entry member wrote. Progress goes to stderr.
Every process it starts is stopped before it exits, also on Ctrl-C (a second Ctrl-C kills them
at once).

exit status: the formation's (0 when the audit completed); 128 + signal when interrupted;
1 when something the demo needs did not come up (E-DMO-002).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``PATH``, ``--home``, ``--keep``, ``--json``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument("path", nargs="?", type=Path, default=None, metavar="PATH",
                        help="the directory to audit (default: the installed murmur package's source)")
    parser.add_argument("--home", type=Path, default=None, metavar="DIR",
                        help="keep the demo (roster, MURMUR_HOME, records) in DIR instead of a "
                             "temporary directory")
    parser.add_argument("--keep", action="store_true",
                        help="leave the demo directory behind and print how to rerun it by hand")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON summary line on stdout instead of the report")


def run(args: argparse.Namespace) -> int:
    """Run the demo; the exit status is the formation's."""
    from murmur.demo import DemoOptions, run_demo

    return run_demo(DemoOptions(target=args.path, home=args.home, keep=args.keep, json=args.json))
