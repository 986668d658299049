"""``mur build``: pack a capsule source directory into ``<name>-<version>.mur.zip``.

The archive holds ``murmur.yaml`` and every other file of the capsule directory except
session workdirs, ``.murmur/``, version-control directories, ``__pycache__``, ``*.pyc``,
earlier ``*.mur.zip`` archives, ``murmur.lock`` and ``.env`` (see
:mod:`murmur.registry.archive`). Packing is deterministic, so building the same sources
twice gives the same bytes and the same sha256. Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest.load import MANIFEST_FILE, load_manifest
from murmur.manifest.model import Manifest
from murmur.registry.archive import ARCHIVE_SUFFIX, collect_sources, pack


def archive_name(manifest: Manifest) -> str:
    """``<name>-<version>.mur.zip``."""
    return f"{manifest.name}-{manifest.version}{ARCHIVE_SUFFIX}"


def _needed_files(manifest: Manifest) -> list[tuple[str, str]]:
    needed = []
    if manifest.plan:
        needed.append(("plan", manifest.plan))
    if manifest.inference and manifest.inference.system_prompt_file:
        needed.append(("inference.system_prompt_file", manifest.inference.system_prompt_file))
    return needed


def build_bytes(src_dir: Path) -> tuple[Manifest, bytes]:
    """Validate a capsule directory and return its manifest and archive bytes.

    Raises:
        DiagnosticError: ``E-IO-001`` when ``src_dir`` is not a directory; manifest codes;
        ``E-BLD-002`` when a file the manifest names is missing; ``E-BLD-003``/``E-BLD-005``
        for unpackable sources; ``E-PLN-*`` when the plan would be refused by ``mur run``.
    """
    if not src_dir.is_dir():
        raise DiagnosticError(error(
            "E-IO-001", f"no capsule directory at {src_dir}", path=str(src_dir),
            hint="pass the directory that holds murmur.yaml"))
    manifest = load_manifest(src_dir / MANIFEST_FILE)
    for key, rel in _needed_files(manifest):
        if not (src_dir / rel).is_file():
            raise DiagnosticError(error(
                "E-BLD-002", f"`{key}` names {rel}, which is not a file in the capsule directory",
                path=str(src_dir / MANIFEST_FILE), hint=f"create {src_dir / rel} or fix `{key}`"))
    entries = collect_sources(src_dir)
    packed = {name for name, _ in entries}
    for key, rel in _needed_files(manifest):
        if Path(rel).as_posix().removeprefix("./") not in packed:
            raise DiagnosticError(error(
                "E-BLD-002", f"`{key}` names {rel}, which a build does not pack",
                path=str(src_dir / MANIFEST_FILE),
                hint="keep capsule files outside workdir/, .murmur/ and other excluded paths"))
    check_plan(src_dir, manifest)
    data = pack((name, path.read_bytes()) for name, path in entries)
    return manifest, data


def check_plan(capsule_root: Path, manifest: Manifest) -> None:
    """Validate the capsule's plan exactly as ``mur run`` will (no-op without ``plan:``).

    Args:
        capsule_root (Path): the directory holding ``murmur.yaml`` and the plan file.
        manifest (Manifest): the capsule's validated manifest (its grants bound the plan).

    Raises:
        DiagnosticError: every ``E-PLN-*`` fault :func:`murmur.plan.load_plan` finds.
    """
    if manifest.plan:
        from murmur.plan import load_plan

        load_plan(capsule_root, manifest)


def check_plan_text(text: bytes, manifest: Manifest, *, where: str) -> None:
    """Validate a packed plan file's bytes as ``mur run`` will (see :func:`check_plan`).

    Args:
        text (bytes): the plan file as packed in an archive.
        manifest (Manifest): the packed manifest.
        where (str): how diagnostics name the file (``<archive>!<plan>``).

    Raises:
        DiagnosticError: ``E-PLN-001`` when the bytes are not UTF-8; every ``E-PLN-*`` fault
        :func:`murmur.plan.parse_plan` finds.
    """
    from murmur.plan import parse_plan

    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DiagnosticError(error("E-PLN-001", f"the plan file cannot be read: {exc}", path=where)) from None
    parse_plan(decoded, manifest, path=where)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build(src_dir: Path, *, output: Path | None = None) -> Path:
    """Pack ``src_dir`` into a ``.mur.zip`` and return the archive's path.

    Args:
        src_dir (Path): the capsule source directory (holding ``murmur.yaml``).
        output (Path | None): where to write: a directory (the archive gets its standard
            name inside it) or a file path. Default: ``src_dir/<name>-<version>.mur.zip``.

    Raises:
        DiagnosticError: see :func:`build_bytes`.
    """
    manifest, data = build_bytes(src_dir)
    if output is None:
        target = src_dir / archive_name(manifest)
    elif output.is_dir():
        target = output / archive_name(manifest)
    else:
        target = output
    write_atomic(target, data)
    return target
