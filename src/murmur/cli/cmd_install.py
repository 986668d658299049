"""``mur install [ZIP|DIR] [-g] [--pin]``: install an artifact into the project or global store.

A ``.mur.zip`` is installed as ``local/<name>``; a capsule directory is built first (as
``mur build`` would) and its archive installed. Default target: the project store
``./.murmur/artifacts/``; ``-g/--global``: ``$MURMUR_HOME/artifacts/``. ``--pin`` also
records the artifact's version and sha256 in ``./murmur.lock`` (project installs only).
Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``SOURCE``, ``-g/--global``, ``--pin``, ``--json``."""
    parser.description = (
        "Install a .mur.zip (or build and install a capsule directory; default: the current "
        "directory) as local/<name> into the project store ./.murmur/artifacts/, or with -g "
        "into the global store ($MURMUR_HOME/artifacts/, default ~/.murmur/artifacts/)."
    )
    parser.add_argument("source", nargs="?", type=Path, default=Path("."), metavar="ZIP|DIR",
                        help="a .mur.zip made by `mur build`, or a capsule directory (default: .)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-g", "--global", dest="global_", action="store_true",
                       help="install into the global store instead of the project store")
    where.add_argument("--pin", action="store_true",
                       help="record the installed version and sha256 in ./murmur.lock "
                            "(project installs only)")
    parser.add_argument("--json", action="store_true",
                        help='print {"scope", "name", "version", "sha256", "path"} as one JSON line')


def run(args: argparse.Namespace) -> int:
    """Install and report the entry."""
    from murmur.registry import Pin, lock_path, write_pin
    from murmur.registry.artifacts import InstalledArtifact
    from murmur.registry.store import install_any

    got = install_any(args.source, global_=args.global_)
    if isinstance(got, InstalledArtifact):
        m = got.manifest
        if args.json:
            print(json.dumps({"scope": got.scope, "name": m.name, "version": m.version,
                              "runtime": m.runtime, "execution": m.execution,
                              "sha256": got.sha256, "path": str(got.archive.parent)}))
        else:
            print(f"installed artifact {m.name} {m.version} ({m.runtime}, {m.execution}; "
                  f"{got.scope}) sha256 {got.sha256}")
        return 0
    installed = got
    if args.pin:
        write_pin(lock_path(), Pin(installed.ref, installed.version, installed.sha256))
    if args.json:
        print(json.dumps({"scope": installed.scope, "name": installed.ref,
                          "version": installed.version, "sha256": installed.sha256,
                          "path": str(installed.archive.parent)}))
    else:
        print(f"installed {installed.ref} {installed.version} ({installed.scope}) "
              f"sha256 {installed.sha256}")
        if args.pin:
            print(f"pinned in {lock_path()}")
    return 0
