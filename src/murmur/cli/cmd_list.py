"""``mur list [--json]``: the installed artifacts, project store first, then global.

Lines ``<scope> local/<name> <version> <sha256>`` under a header; ``--json`` prints one JSON array of objects with the
same fields (and the entry's path). Prints ``no installed artifacts`` when both stores are
empty. Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json``."""
    parser.description = ("List installed artifacts: scope (project or global), name "
                          "(local/<name>), version and sha256.")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON array of {scope, name, version, sha256, path}")


def run(args: argparse.Namespace) -> int:
    """Print the listing."""
    from murmur.registry import list_installed

    items = list_installed()
    if args.json:
        print(json.dumps([{"scope": i.scope, "name": i.ref, "version": i.version,
                           "sha256": i.sha256, "path": str(i.archive.parent)} for i in items]))
        return 0
    if not items:
        print("no installed artifacts")
        return 0
    # Only the scope column is padded, so each line reads `<scope>  local/<name> <version> <sha256>`.
    print(f"{'SCOPE':<8} NAME VERSION SHA256")
    for i in items:
        print(f"{i.scope:<8} {i.ref} {i.version} {i.sha256}")
    return 0
