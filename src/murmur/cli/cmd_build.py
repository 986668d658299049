"""``mur build [DIR] [--output PATH]``: pack a capsule directory into ``<name>-<version>.mur.zip``.

Packing is deterministic (same sources, same bytes, same sha256) and packs only what the
manifest declares. Prints the archive path and its sha256, or one JSON object with
``--json``; warnings (``W-SEC-019``, ``W-SEC-004``) go to stderr. Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``DIR``, ``--output``, ``--json``."""
    parser.description = (
        "Pack the capsule in DIR (default: the current directory) into "
        "<name>-<version>.mur.zip. The same sources always give the same bytes and sha256."
    )
    parser.add_argument("dir", nargs="?", type=Path, default=Path("."), metavar="DIR",
                        help="the capsule source directory holding murmur.yaml (default: .)")
    parser.add_argument("--output", "-o", type=Path, default=None, metavar="PATH",
                        help="write the archive here (a directory or a file path; default: DIR)")
    parser.add_argument("--json", action="store_true",
                        help='print {"path", "name", "version", "sha256"} as one JSON line')


def run(args: argparse.Namespace) -> int:
    """Build and report the archive."""
    from murmur.cli._common import emit
    from murmur.diagnostics import Diagnostic
    from murmur.manifest import load_manifest
    from murmur.registry import build

    warnings: list[Diagnostic] = []
    path = build(args.dir, output=args.output, warnings=warnings)
    for w in warnings:
        emit(w)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if args.json:
        from murmur.registry.artifacts import manifest_text

        art = manifest_text(args.dir)
        if art is not None:
            from murmur.manifest.artifact import parse_artifact_manifest

            a = parse_artifact_manifest(art, path=str(args.dir))
            print(json.dumps({"path": str(path), "name": a.name, "version": a.version,
                              "runtime": a.runtime, "execution": a.execution, "sha256": sha}))
            return 0
        m = load_manifest(args.dir)
        print(json.dumps({"path": str(path), "name": m.name, "version": m.version, "sha256": sha}))
    else:
        print(f"built {path}")
        print(f"sha256 {sha}")
    return 0
