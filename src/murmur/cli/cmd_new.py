"""``mur new NAME``: write a capsule source directory (``--roster``: a formation project).

``mur new demo`` writes ``./demo/`` holding a plan capsule that builds, installs and runs as
written (:mod:`murmur.manifest.scaffold`). ``mur new --roster NAME`` writes a two-member
roster project (:mod:`murmur.formation.roster.roster_scaffold`). Refusals: ``E-NEW-002`` (bad name),
``E-NEW-003`` (the path exists). Nothing is ever written over.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``NAME``, ``--roster``, ``--dir``."""
    parser.description = (
        "Write a new capsule source directory ./NAME (a plan capsule that echoes its task), "
        "or with --roster a roster project with two member capsules."
    )
    parser.add_argument("name", metavar="NAME",
                        help="capsule (or roster) name: lowercase letters, digits and '-'")
    parser.add_argument("--roster", action="store_true",
                        help="write a roster project (roster.yaml + lead/ and worker/ capsules)")
    parser.add_argument("--dir", type=Path, default=None, metavar="DIR",
                        help="where to create NAME/ (default: the current directory)")


def run(args: argparse.Namespace) -> int:
    """Write the scaffold; print the created path."""
    dest: Path = args.dir if args.dir is not None else Path.cwd()
    if args.roster:
        from murmur.formation import write_roster_scaffold

        write_roster_scaffold(args.name, dest)
        target = dest / args.name
    else:
        from murmur.manifest import write_capsule_scaffold

        target = write_capsule_scaffold(args.name, dest)
    print(f"created {target}")
    return 0
