"""Artifact stores: installing ``.mur.zip`` files and resolving them by exact version.

Two stores, the same layout: the project store ``<project>/.murmur/artifacts/`` and the
global store ``$MURMUR_HOME/artifacts/`` (``~/.murmur/artifacts/``)::

    <store>/<scope>/<name>/<version>/
        <name>-<version>.mur.zip   the archive bytes exactly as installed
        root/                      the unpacked capsule (murmur.yaml + its files)
        installed.json             {"ref", "name", "version", "sha256"}

An artifact installed from a file has scope ``local``: ``local/<name>``. Resolution asks
for an exact version, looks in the project store, then the global store, verifies the
archive still hashes to the sha256 recorded at install (``E-REG-002``) and checks the
project's ``murmur.lock`` (``E-REG-005``). Installs are atomic: everything is written to a
temporary directory inside the store and renamed into place, so a failed install leaves
the store as it was. Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import attrs

from murmur import paths
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.manifest import (
    MAX_MANIFEST_BYTES,
    RESERVED_VERSIONS,
    VERSION_RE,
    Manifest,
    is_capsule_name,
    parse_manifest_bytes,
)
from murmur.manifest.artifact import is_artifact_text
from murmur.registry import archive
from murmur.registry.build import archive_name, build, check_plan_text
from murmur.registry.lock import check_pin, lock_path, read_lock
from murmur.userfile import UserFileError, read_user_file

if TYPE_CHECKING:
    from murmur.registry.artifacts import InstalledArtifact

LOCAL_SCOPE = "local"
ROOT_DIR = "root"
RECORD_FILE = "installed.json"


@attrs.frozen
class Installed:
    """One installed artifact.

    Attributes:
        scope (str): ``"project"``, ``"global"`` or ``"registry"`` (a store named directly).
        ref (str): the scoped name, ``local/<name>``.
        name (str): the bare capsule name.
        version (str): its exact version.
        sha256 (str): hex sha256 of the ``.mur.zip`` bytes.
        archive (Path): the installed ``.mur.zip``.
        root (Path): the unpacked capsule directory (read-only by convention).
        manifest (Manifest): the manifest packed in the archive (references unresolved).
    """

    scope: str
    ref: str
    name: str
    version: str
    sha256: str
    archive: Path
    root: Path
    manifest: Manifest


class ArtifactArchive(Exception):
    """Raised inside :func:`install` when the archive holds an artifact manifest (a tool,
    driver, hook or skill): :func:`install_any` installs it with
    :func:`murmur.registry.artifacts.install_artifact` instead."""

    def __init__(self, data: bytes, where: str) -> None:
        super().__init__(where)
        self.data = data
        self.where = where


def install_any(source: Path, *, global_: bool,
                project_dir: Path | None = None) -> Installed | InstalledArtifact:
    """:func:`install` a capsule, or an artifact (spec/components.md) when that is what the
    archive or directory holds."""
    try:
        return install(source, global_=global_, project_dir=project_dir)
    except ArtifactArchive as art:
        from murmur.registry.artifacts import install_artifact

        return install_artifact(art.data, where=art.where, global_=global_, project_dir=project_dir)


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def rehash(installed: Installed) -> str:
    """The sha256 of the archive bytes on disk now (``""`` when the archive is gone).

    Formation supervision compares it with the sha256 bound at admission (``E-RUN-047``).
    """
    try:
        h = hashlib.sha256()
        with installed.archive.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return ""


# --- names -------------------------------------------------------------------------------


def split_ref(ref: str, *, allow_bare: bool) -> tuple[str, str]:
    """``(scope, name)`` of ``<scope>/<name>`` (or of a bare name when ``allow_bare``).

    Raises:
        DiagnosticError: ``E-REG-007`` for a bare name where a scoped one is needed (the hint
        names ``local/<name>``) or a name that is not valid.
    """
    scope, sep, name = ref.partition("/")
    if not sep:
        if allow_bare and is_capsule_name(ref):
            return LOCAL_SCOPE, ref
        hint = (f"write `{LOCAL_SCOPE}/{ref}` for a capsule installed from its .mur.zip "
                f"(scoped form `<scope>/<name>`)") if is_capsule_name(ref) else \
            "artifact names are `<scope>/<name>`, e.g. `local/demo`"
        raise DiagnosticError(error("E-REG-007", f"`{ref}` is not a scoped artifact name", hint=hint))
    if not (is_capsule_name(scope) and is_capsule_name(name)):
        raise DiagnosticError(error(
            "E-REG-007", f"`{ref}` is not a valid artifact name",
            hint="artifact names are `<scope>/<name>` in lowercase letters, digits and `-`"))
    return scope, name


def _version_ok(version: str) -> bool:
    return bool(version.strip()) and version.strip().lower() not in RESERVED_VERSIONS \
        and VERSION_RE.fullmatch(version) is not None


def _reserved_version(ref: str, version: str) -> DiagnosticError:
    shown = version.strip() or "(blank)"
    return DiagnosticError(error(
        "E-REG-004",
        f"version {shown} of {ref} resolves to nothing: resolution needs an exact version",
        hint="`latest`, `stable`, `edge` and a blank version name no artifact; give e.g. `0.1.0`"))


# --- reading a store -----------------------------------------------------------------------


def _entry_dir(store: Path, scope: str, name: str, version: str) -> Path:
    return store / scope / name / version


def _load_entry(entry: Path, scope_label: str) -> Installed:
    """Read one installed entry, verifying its record against its archive bytes."""
    where = str(entry)
    try:
        record = json.loads((entry / RECORD_FILE).read_text(encoding="utf-8"))
        ref, name, version, sha = (str(record[k]) for k in ("ref", "name", "version", "sha256"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DiagnosticError(error(
            "E-REG-002", f"the installed artifact at {entry} has no readable record ({exc})",
            path=where, hint="reinstall it with `mur install`")) from None
    zip_path = entry / f"{name}-{version}{archive.ARCHIVE_SUFFIX}"
    try:
        data = zip_path.read_bytes()
    except OSError as exc:
        raise DiagnosticError(error(
            "E-REG-002", f"the archive of {ref}@{version} cannot be read ({exc.strerror})",
            path=str(zip_path), hint="reinstall it with `mur install`")) from None
    actual = sha256_bytes(data)
    if actual != sha:
        raise DiagnosticError(error(
            "E-REG-002",
            f"{ref}@{version} no longer matches its recorded sha256 (recorded {sha}, now {actual})",
            path=str(zip_path), hint="reinstall it with `mur install`"))
    with archive.open_archive(data, where=str(zip_path)) as zf:
        raw = archive.read_member(zf, archive.MANIFEST_ENTRY, where=str(zip_path),
                                  limit=MAX_MANIFEST_BYTES)
    manifest = parse_manifest_bytes(raw, path=f"{zip_path}!{archive.MANIFEST_ENTRY}")
    if (manifest.name, manifest.version) != (name, version):
        raise DiagnosticError(error(
            "E-REG-002", f"{ref}@{version} holds the manifest of {manifest.name}@{manifest.version}",
            path=str(zip_path), hint="reinstall it with `mur install`"))
    return Installed(scope_label, ref, name, version, sha, zip_path, entry / ROOT_DIR, manifest)


def _find(store: Path, scope: str, name: str, version: str, label: str) -> Installed | None:
    entry = _entry_dir(store, scope, name, version)
    if not (entry / RECORD_FILE).is_file():
        return None
    return _load_entry(entry, label)


def resolve_in_store(store_dir: Path, name: str, version: str) -> Installed | None:
    """Look up one artifact in one store only (used by ``mur-roost --registry-path``).

    Args:
        store_dir (Path): a store directory (one holding ``<scope>/<name>/<version>/``).
        name (str): a bare capsule name (meaning ``local/<name>``) or ``<scope>/<name>``.
        version (str): the exact version; blank and reserved words resolve to nothing.

    Returns:
        Installed | None: the artifact (``scope="registry"``), or None when absent.

    Raises:
        DiagnosticError: ``E-REG-007`` for an invalid name; ``E-REG-002`` for an entry whose
        bytes no longer match its record.
    """
    scope, bare = split_ref(name, allow_bare=True)
    if not _version_ok(version):
        return None
    return _find(store_dir, scope, bare, version, "registry")


def _stores(project_dir: Path | None) -> list[tuple[str, Path]]:
    return [("project", paths.project_store(project_dir)), ("global", paths.global_store())]


def resolve(
    ref: str, version: str, *, project_dir: Path | None = None, check_lock: bool = True
) -> Installed:
    """Resolve ``<scope>/<name>`` at an exact version: project store, then global store.

    Args:
        ref (str): the scoped name, e.g. ``local/demo``.
        version (str): the exact version.
        project_dir (Path | None): the project (default: the current directory); its store
            and ``murmur.lock`` are used.
        check_lock (bool): check the project's ``murmur.lock`` (never written here).

    Raises:
        DiagnosticError: ``E-REG-007`` bare or invalid name; ``E-REG-004`` blank or reserved
        version; ``E-REG-001`` not installed; ``E-REG-002`` tampered entry; ``E-REG-005``
        disagreement with ``murmur.lock``; ``E-REG-008`` unreadable lock.
    """
    scope, name = split_ref(ref, allow_bare=False)
    if not _version_ok(version):
        if not version.strip() or version.strip().lower() in RESERVED_VERSIONS:
            raise _reserved_version(ref, version)
        raise DiagnosticError(error("E-REG-001", f"`{version}` is not a valid version of {ref}",
                                    hint="give an exact version such as `0.1.0`"))
    found: Installed | None = None
    for label, store in _stores(project_dir):
        found = _find(store, scope, name, version, label)
        if found is not None:
            break
    if found is None:
        others = sorted({i.version for i in list_installed(project_dir=project_dir) if i.ref == ref})
        hint = (f"installed versions of {ref}: {', '.join(others)}" if others else
                f"install it with `mur install <{name}-{version}.mur.zip>` (or -g for the global store)")
        raise DiagnosticError(error("E-REG-001", f"{ref}@{version} is not installed", hint=hint))
    if check_lock:
        lock = lock_path(project_dir)
        check_pin(read_lock(lock), ref, version, found.sha256, where=str(lock))
    return found


def list_installed(*, project_dir: Path | None = None) -> list[Installed]:
    """Every readable installed artifact: project store first, then global; by ref, version.

    Entries that fail verification are left out (``resolve`` reports them with a code;
    :func:`scan_installed` reports them too).
    """
    return list(scan_installed(project_dir=project_dir).items)


@attrs.frozen
class Listing:
    """What :func:`scan_installed` found.

    Attributes:
        items (tuple[Installed, ...]): every entry that verified, project store first, then
            global; each store's entries by ref, then version.
        problems (tuple[Diagnostic, ...]): ``E-IO-003`` for a store that cannot be read (a
            path part is not a directory), ``E-REG-002`` (or the packed manifest's code) for
            each entry that fails verification, in the order met.
    """

    items: tuple[Installed, ...]
    problems: tuple[Diagnostic, ...]


def scan_installed(*, project_dir: Path | None = None,
                   scopes: tuple[str, ...] = ("project", "global")) -> Listing:
    """Read the stores named by ``scopes`` (``"project"``, ``"global"``), reporting problems.

    Args:
        project_dir (Path | None): the project (default: the current directory).
        scopes (tuple[str, ...]): which stores to read, in the fixed order project, global.

    Returns:
        Listing: the verified entries and one diagnostic per unreadable store or entry.
    """
    items: list[Installed] = []
    problems: list[Diagnostic] = []
    for label, store in _stores(project_dir):
        if label not in scopes:
            continue
        blocked = _unreadable_store(label, store)
        if blocked is not None:
            problems.append(blocked)
            continue
        found = []
        for record in sorted(store.glob(f"*/*/*/{RECORD_FILE}")):
            entry = record.parent
            if any(p.startswith(".") for p in entry.relative_to(store).parts):
                continue
            try:
                found.append(_load_entry(entry, label))
            except DiagnosticError as exc:
                problems.extend(exc.diagnostics)
        found.sort(key=lambda i: (i.ref, _version_key(i.version)))
        items += found
    return Listing(tuple(items), tuple(problems))


def _unreadable_store(label: str, store: Path) -> Diagnostic | None:
    """``E-IO-003`` when an existing part of ``store``'s path is not a directory."""
    probe = store
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.exists() or probe.is_dir():
        return None
    hint = ("set MURMUR_HOME to a directory (or unset it for ~/.murmur)" if label == "global"
            else f"move {probe} out of the way")
    return error("E-IO-003", f"the {label} store {store} cannot be read: {probe} is not a directory",
                 path=str(probe), hint=hint)


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    parts: list[tuple[int, int | str]] = []
    for piece in version.replace("-", ".").replace("+", ".").split("."):
        parts.append((0, int(piece)) if piece.isdigit() else (1, piece))
    return tuple(parts)


# --- installing ------------------------------------------------------------------------------


def install(source: Path, *, global_: bool, project_dir: Path | None = None) -> Installed:
    """Install a ``.mur.zip`` (or build a capsule directory, then install its archive).

    Args:
        source (Path): a ``.mur.zip`` file or a capsule source directory.
        global_ (bool): install into the global store instead of the project store.
        project_dir (Path | None): the project whose store is used (default: the cwd).

    Returns:
        Installed: the new entry (``local/<name>``), scope ``"global"`` or ``"project"``.

    Raises:
        DiagnosticError: ``E-IO-001`` missing source; build codes for a directory; archive
        codes ``E-BLD-003..008``; manifest codes for the packed ``murmur.yaml``. On any
        failure the store is left as it was.
    """
    source_manifest: Path | None = None
    if source.is_dir():
        source_manifest = (source / archive.MANIFEST_ENTRY).resolve()
        source = build(source)
    where = str(source)
    try:
        # Never blocking, never unbounded: a FIFO or /dev/zero given as the archive is refused
        # without reading it (spec/diagnostics.md, E-IO-003).
        data = read_user_file(source, limit=archive.MAX_ARCHIVE_BYTES)
    except UserFileError as exc:
        if exc.kind == "missing":
            raise DiagnosticError(error("E-IO-001", f"no such file: {source}", path=where,
                                        hint="pass a .mur.zip made by `mur build`, or a capsule directory")) from None
        if exc.kind == "too_large":
            raise DiagnosticError(error(
                "E-BLD-006", f"the archive is larger than {archive.MAX_ARCHIVE_BYTES} bytes",
                path=where)) from None
        raise DiagnosticError(error("E-IO-003", str(exc), path=where,
                                    hint="pass a regular .mur.zip file or a capsule directory")) from None
    sha = sha256_bytes(data)
    with archive.open_archive(data, where=where) as zf:
        files = archive.check_entries(zf, where=where)
        raw = archive.read_member(zf, archive.MANIFEST_ENTRY, where=where, limit=MAX_MANIFEST_BYTES)
        if is_artifact_text(raw.decode("utf-8-sig", "replace"), path=where):
            raise ArtifactArchive(data, where)
        manifest = parse_manifest_bytes(raw, path=f"{where}!{archive.MANIFEST_ENTRY}")
        _check_packed_plan(zf, files, manifest, where=where)
        if source_manifest is None:
            source_manifest = _beside(source, raw)
        label = "global" if global_ else "project"
        store = paths.global_store() if global_ else paths.project_store(project_dir)
        try:
            entry = _place(zf, files, data, manifest, store, where=where, source=source_manifest)
        except OSError as exc:
            raise _store_write_error(exc, label, store) from None
    return Installed(label, f"{LOCAL_SCOPE}/{manifest.name}", manifest.name, manifest.version, sha,
                     entry / archive_name(manifest), entry / ROOT_DIR, manifest)


def _check_packed_plan(zf: zipfile.ZipFile, files: list[zipfile.ZipInfo], manifest: Manifest,
                       *, where: str) -> None:
    """Refuse an archive whose plan ``mur run`` would refuse (``E-PLN-*``); no-op without one."""
    if not manifest.plan:
        return
    name = PurePosixPath(manifest.plan).as_posix()
    if name not in {f.filename for f in files}:
        raise DiagnosticError(error(
            "E-PLN-001", f"the plan file `{manifest.plan}` is not in the archive", path=where,
            hint="rebuild the archive with `mur build` from the capsule directory"))
    data = archive.read_member(zf, name, where=where, limit=archive.MAX_TOTAL_BYTES)
    check_plan_text(data, manifest, where=f"{where}!{name}")


def _store_write_error(exc: OSError, label: str, store: Path) -> DiagnosticError:
    """A coded refusal for a store that cannot be written (the store is left as it was)."""
    code = "E-IO-002" if isinstance(exc, PermissionError) else "E-IO-003"
    reason = exc.strerror or type(exc).__name__
    hint = ("check that MURMUR_HOME names a writable directory"
            if label == "global" else "check that the project directory is writable")
    return DiagnosticError(error(code, f"cannot write the {label} store {store} ({reason})",
                                 path=str(exc.filename or store), hint=hint))


def _guard_store(store: Path, where: str) -> None:
    """Refuse a store path whose murmur-owned parts are symlinks (E-BLD-005)."""
    base = store.parent  # `.murmur` (project) or MURMUR_HOME (global)
    if store.parent.name == ".murmur":
        base = store.parent.parent
    archive.refuse_symlinks(base, store, where=where)


def _beside(archive_path: Path, packed: bytes) -> Path | None:
    """The ``murmur.yaml`` next to an archive when its bytes are the packed manifest's.

    That is the source directory the archive was built from (``mur build`` writes the archive
    into it); ``installed.json`` records it as ``source`` so a running session can tell when
    its source manifest was edited (``murmur.routing.profile``).
    """
    candidate = archive_path.resolve().parent / archive.MANIFEST_ENTRY
    try:
        return candidate if candidate.read_bytes() == packed else None
    except OSError:
        return None


def _place(zf: zipfile.ZipFile, files: list[zipfile.ZipInfo], data: bytes,
           manifest: Manifest, store: Path, *, where: str, source: Path | None = None) -> Path:
    _guard_store(store, where)
    final = _entry_dir(store, LOCAL_SCOPE, manifest.name, manifest.version)
    archive.refuse_symlinks(store, final, where=where)
    # Directories this install creates; a failed install removes them again (when empty).
    created = [d for d in (store.parent, store, final.parent.parent, final.parent) if not d.exists()]
    store.mkdir(parents=True, exist_ok=True)
    tmp = store / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    old: Path | None = None
    try:
        (tmp / ROOT_DIR).mkdir()
        archive.extract(zf, files, tmp / ROOT_DIR, where=where)
        (tmp / archive_name(manifest)).write_bytes(data)
        record = {"ref": f"{LOCAL_SCOPE}/{manifest.name}", "name": manifest.name,
                  "version": manifest.version, "sha256": sha256_bytes(data)}
        if source is not None:
            record["source"] = str(source)
        (tmp / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        final.parent.mkdir(parents=True, exist_ok=True)
        archive.refuse_symlinks(store, final, where=where)
        if final.exists():
            old = store / f".old-{uuid.uuid4().hex}"
            os.rename(final, old)
        os.rename(tmp, final)
    except BaseException:
        if old is not None and not final.exists():
            os.rename(old, final)
            old = None
        shutil.rmtree(tmp, ignore_errors=True)
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return final
