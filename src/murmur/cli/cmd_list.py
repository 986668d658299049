"""``mur list [-g | --project] [--json]``: the installed artifacts, project store first, then global.

Aligned columns ``SCOPE NAME VERSION SHA256`` (one line per entry: ``<scope> local/<name>
<version> <sha256>``, each column padded to its widest value); ``--json`` prints one JSON array
of objects with the same fields (and the entry's path). ``-g/--global`` lists only the global
store, ``--project`` only the project store. Prints ``no installed artifacts`` when the stores
read are empty. A store that cannot be read (``E-IO-003``, e.g. ``MURMUR_HOME`` naming a
regular file) and an installed entry that fails verification (``E-REG-002``) are reported on
stderr; the readable entries are still listed, and the exit status is then 1.
Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from murmur.diagnostics import EXIT_REFUSED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``-g/--global``, ``--project``, ``--json``."""
    parser.description = ("List installed artifacts: scope (project or global), name "
                          "(local/<name>), version and sha256. Default: both stores.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-g", "--global", dest="global_", action="store_true",
                       help="list only the global store ($MURMUR_HOME/artifacts/)")
    where.add_argument("--project", action="store_true",
                       help="list only the project store (./.murmur/artifacts/)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON array of {scope, name, version, sha256, path}")


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as lines whose columns are padded to the widest cell (the last is not padded)."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    return [" ".join([*(cell.ljust(w) for cell, w in zip(r, widths, strict=False)), r[-1]])
            for r in rows]


def run(args: argparse.Namespace) -> int:
    """Print the listing; problems go to stderr (exit 1)."""
    from murmur.cli._common import emit
    from murmur.registry import scan_installed

    scopes = ("global",) if args.global_ else ("project",) if args.project else ("project", "global")
    listing = scan_installed(scopes=scopes)
    items = listing.items
    if args.json:
        print(json.dumps([{"scope": i.scope, "name": i.ref, "version": i.version,
                           "sha256": i.sha256, "path": str(i.archive.parent)} for i in items]))
    elif not items:
        if not listing.problems:
            print("no installed artifacts")
    else:
        rows = [("SCOPE", "NAME", "VERSION", "SHA256")]
        rows += [(i.scope, i.ref, i.version, i.sha256) for i in items]
        print("\n".join(table(rows)))
    for problem in listing.problems:
        emit(problem)
    return EXIT_REFUSED if listing.problems else 0
