"""``mur build``: pack a capsule source directory into ``<name>-<version>.mur.zip``.

The archive holds exactly what the manifest declares: ``murmur.yaml``, the ``plan`` file,
``inference.system_prompt_file`` and every ``requires_files`` entry — nothing else in the
directory (a stray ``credentials.txt`` stays out). A declared file that is missing, not a
regular file, a symlink, or in a path a build never packs (session workdirs, ``.murmur/``,
version control, ``.env``, ``murmur.lock``, archives) refuses the build. Packing is deterministic, so building the same sources
twice gives the same bytes and the same sha256. Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.manifest import MANIFEST_FILE, Manifest, has_reference, load_manifest
from murmur.registry.archive import (
    ARCHIVE_SUFFIX,
    EXCLUDED_DIRS,
    EXCLUDED_FILES,
    EXCLUDED_ROOT_DIRS,
    EXCLUDED_SUFFIXES,
    MAX_ARCHIVE_BYTES,
    name_problem,
    pack,
)
from murmur.userfile import UserFileError, read_user_file


def archive_name(manifest: Manifest) -> str:
    """``<name>-<version>.mur.zip``."""
    return f"{manifest.name}-{manifest.version}{ARCHIVE_SUFFIX}"


def _needed_files(manifest: Manifest) -> list[tuple[str, str]]:
    """``(manifest key, relative path)`` of every file the manifest declares."""
    needed = []
    if manifest.plan:
        needed.append(("plan", manifest.plan))
    if manifest.inference and manifest.inference.system_prompt_file:
        needed.append(("inference.system_prompt_file", manifest.inference.system_prompt_file))
    for rel in manifest.requires_files or ():
        needed.append(("requires_files", rel))
    return needed


def _never_packed(name: str) -> bool:
    parts = name.split("/")
    return (
        any(p in EXCLUDED_DIRS for p in parts[:-1])
        or parts[0] in EXCLUDED_ROOT_DIRS
        or parts[-1] in EXCLUDED_FILES
        or parts[-1].endswith(EXCLUDED_SUFFIXES)
    )


def declared_sources(src_dir: Path, manifest: Manifest) -> list[tuple[str, Path]]:
    """The files a build packs, as sorted ``(archive name, path)`` pairs: ``murmur.yaml``
    plus every file the manifest declares (:func:`_needed_files`), each once.

    Raises:
        DiagnosticError: ``E-BLD-002`` when a declared file is missing, not a regular file,
        or in a path a build never packs; ``E-BLD-005`` when it (or a directory on its way)
        is a symlink; ``E-BLD-003`` when its name cannot be packed safely.
    """
    where = str(src_dir / MANIFEST_FILE)
    found: dict[str, Path] = {MANIFEST_FILE: src_dir / MANIFEST_FILE}
    for key, rel in _needed_files(manifest):
        name = Path(rel).as_posix().removeprefix("./")
        problem = name_problem(name)
        if problem is not None:
            raise DiagnosticError(error("E-BLD-003", f"`{key}` names {rel}, which {problem}",
                                        path=where, hint="name a plain relative path"))
        if _never_packed(name):
            raise DiagnosticError(error(
                "E-BLD-002", f"`{key}` names {rel}, which a build never packs", path=where,
                hint="keep capsule files outside workdir/, .murmur/, version control, .env and murmur.lock"))
        path = src_dir
        for part in name.split("/"):
            path = path / part
            if path.is_symlink():
                raise DiagnosticError(error(
                    "E-BLD-005", f"`{key}` names {rel}, which passes through the symlink {path}",
                    path=where, hint="replace the link with the file it points to"))
        if not path.is_file():
            raise DiagnosticError(error(
                "E-BLD-002", f"`{key}` names {rel}, which is not a file in the capsule directory",
                path=where, hint=f"create {path} or fix `{key}`"))
        found.setdefault(name, path)
    return sorted(found.items())


def literal_secrets(manifest: Manifest, *, path: str | None = None) -> list[Diagnostic]:
    """``W-SEC-004`` for each secret key holding a literal instead of a ``${VAR}`` reference.

    The value is never shown; a literal would be packed into the archive and reach every
    store it is installed into.
    """
    found: list[str] = []
    if manifest.inference and manifest.inference.api_key and not has_reference(manifest.inference.api_key):
        found.append("inference.api_key")
    for art in manifest.artifacts:
        key = art.gateway.api_key if art.gateway else None
        if key and not has_reference(key):
            found.append(f"artifacts[{art.name}].gateway.api_key")
    return [
        error("W-SEC-004", f"`{key}` holds a literal secret, which the archive would carry",
              hint="write a reference such as `${PROVIDER_API_KEY}` and set the variable where the capsule runs",
              path=path)
        for key in found
    ]


def build_bytes(src_dir: Path, *, warnings: list[Diagnostic] | None = None) -> tuple[Manifest, bytes]:
    """Validate a capsule directory and return its manifest and archive bytes.

    Args:
        src_dir (Path): the capsule source directory.
        warnings (list[Diagnostic] | None): gets the manifest's ``W-SEC-019`` warnings and a
            ``W-SEC-004`` per literal secret.

    Raises:
        DiagnosticError: ``E-IO-001`` when ``src_dir`` is not a directory; manifest codes;
        ``E-BLD-002``
        when a declared file is missing; ``E-BLD-003``/``E-BLD-005`` for unpackable sources;
        ``E-PLN-*`` when the plan would be refused by ``mur run``.
    """
    if not src_dir.is_dir():
        raise DiagnosticError(error(
            "E-IO-001", f"no capsule directory at {src_dir}", path=str(src_dir),
            hint="pass the directory that holds murmur.yaml"))
    manifest = load_manifest(src_dir / MANIFEST_FILE, warnings=warnings)
    entries = declared_sources(src_dir, manifest)
    check_plan(src_dir, manifest)
    if warnings is not None:
        warnings.extend(literal_secrets(manifest, path=str(src_dir / MANIFEST_FILE)))
    data = pack((name, _source_bytes(path)) for name, path in entries)
    return manifest, data


def _source_bytes(path: Path) -> bytes:
    """A declared source's bytes: a regular file, read with a bound (never a FIFO or device).

    Raises:
        DiagnosticError: ``E-IO-003`` naming the path and what it is; ``E-BLD-006`` when it
        alone is larger than an archive may be.
    """
    try:
        return read_user_file(path, limit=MAX_ARCHIVE_BYTES)
    except UserFileError as exc:
        code = "E-BLD-006" if exc.kind == "too_large" else "E-IO-003"
        raise DiagnosticError(error(code, str(exc), path=str(path),
                                    hint="a capsule's declared files must be regular files")) from None


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


def build(src_dir: Path, *, output: Path | None = None,
          warnings: list[Diagnostic] | None = None) -> Path:
    """Pack ``src_dir`` into a ``.mur.zip`` and return the archive's path.

    Args:
        src_dir (Path): the capsule source directory (holding ``murmur.yaml``).
        output (Path | None): where to write: a directory (the archive gets its standard
            name inside it) or a file path. Default: ``src_dir/<name>-<version>.mur.zip``.

        warnings (list[Diagnostic] | None): see :func:`build_bytes`.

    Raises:
        DiagnosticError: see :func:`build_bytes`; ``E-IO-001`` when ``output``'s parent
        directory does not exist (nothing is created).
    """
    from murmur.registry.artifacts import build_artifact_bytes, manifest_text

    text = manifest_text(src_dir) if src_dir.is_dir() else None
    if text is not None:  # a tool, driver, hook or skill (spec/components.md)
        art, data = build_artifact_bytes(src_dir, text, warnings=warnings)
        name = f"{art.name}-{art.version}{ARCHIVE_SUFFIX}"
    else:
        manifest, data = build_bytes(src_dir, warnings=warnings)
        name = archive_name(manifest)
    if output is None:
        target = src_dir / name
    elif output.is_dir():
        target = output / name
    else:
        target = output
        if not target.parent.is_dir():
            raise DiagnosticError(error(
                "E-IO-001", f"the --output directory {target.parent} does not exist",
                hint="create it first, or name an existing directory"))
    write_atomic(target, data)
    return target
