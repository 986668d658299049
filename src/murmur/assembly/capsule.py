"""Where the capsule of a ``mur run`` comes from: ``./murmur.yaml``, ``--manifest``, or an
installed ``--capsule``/``--capsule-version`` (the project store, then the global one).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from murmur.assembly.options import RunOptions, usage_error
from murmur.diagnostics import Diagnostic
from murmur.manifest import Manifest


def resolve_capsule(opts: RunOptions, env: Mapping[str, str], cwd: Path) -> tuple[Manifest, Path, str]:
    """The manifest, the capsule root, and a description of where it came from.

    Raises:
        UsageError: ``E-CLI-001`` for ``--capsule`` without ``--capsule-version`` (or the
            reverse) or beside ``--manifest``.
        DiagnosticError: the manifest or the installed capsule is refused.
    """
    if opts.capsule_version is not None and opts.capsule is None:
        raise usage_error("--capsule-version needs --capsule", hint="give both, e.g. --capsule local/demo --capsule-version 0.1.0")
    if opts.capsule is not None:
        if opts.manifest is not None:
            raise usage_error("--capsule and --manifest name two capsules; give one of them")
        if opts.capsule_version is None:
            raise usage_error("--capsule needs --capsule-version", hint="give the exact version installed, e.g. 0.1.0")
        from murmur.registry import resolve

        project = Path(opts.project_dir).resolve() if opts.project_dir else cwd
        found = resolve(opts.capsule, opts.capsule_version, project_dir=project)
        return found.manifest, found.root, f"{found.ref}@{found.version} ({found.scope} store)"
    from murmur.manifest import load_manifest

    path = Path(opts.manifest) if opts.manifest else cwd / "murmur.yaml"
    if not path.is_absolute():
        path = cwd / path
    warnings: list[Diagnostic] = []
    manifest = load_manifest(path, env=env, warnings=warnings)
    for w in warnings:
        print(w.render(), file=sys.stderr, flush=True)
    root = path if path.is_dir() else path.parent
    return manifest, root.resolve(), str(path)

