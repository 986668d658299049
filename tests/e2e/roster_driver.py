"""Runs ``murmur.formation.launcher.run_roster`` as ``mur run --roster`` would.

Used by the e2e tests only while ``mur run`` has no ``--roster`` flag of its own; the flags
are the ones ``--roster`` combines with.
"""

from __future__ import annotations

import argparse
import sys

from murmur.cli._common import guarded


def main() -> int:
    parser = argparse.ArgumentParser(prog="mur run")
    parser.add_argument("--roster", nargs="?", const="", default=None)
    parser.add_argument("--task")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.add_argument("--no-env-file", action="store_true")
    parser.add_argument("--containment")
    parser.add_argument("--deadline")
    ns = parser.parse_args(sys.argv[1:])

    def go() -> int:
        from murmur.formation.launcher import run_roster

        return run_roster(ns)

    return guarded(go, program="mur")


if __name__ == "__main__":
    sys.exit(main())
