"""Artifact archives: ``mur build`` and ``mur install`` for tools, drivers, hooks and skills.

An artifact directory holds an artifact manifest (:mod:`murmur.manifest.artifact`) and the
files it names. ``mur build`` packs, exactly as upstream: ``murmur.yaml`` first, then every
``requires_files`` entry in the order written (Deflate, fixed timestamps, so the same sources
give the same bytes). ``requires_files`` defaults to ``[skill.md]`` for skills. A ``wasm``
artifact must pack ``capsule.wasm`` or exactly one root ``*.wasm`` (``E-BLD-003``).

Installed artifacts live beside capsules in the same two stores, under the scope directory
``artifact/``::

    <store>/artifact/<name>/<version>/
        <name>-<version>.mur.zip   the archive bytes exactly as installed
        root/                      murmur.yaml + its files
        artifact.json              {"name", "version", "runtime", "execution", "sha256"}

(``artifact.json``, not ``installed.json``, so a capsule listing never mistakes one for a
capsule.) Specification: ``spec/components.md``.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import stat
import uuid
import zipfile
from pathlib import Path

import attrs

from murmur import paths
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.manifest.artifact import ArtifactManifest, is_artifact_text, parse_artifact_manifest
from murmur.registry import archive

SCOPE_DIR = "artifact"
RECORD = "artifact.json"


@attrs.frozen
class InstalledArtifact:
    """One installed artifact: its manifest, unpacked root, archive and sha256."""

    manifest: ArtifactManifest
    root: Path
    archive: Path
    sha256: str
    scope: str

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def version(self) -> str:
        return self.manifest.version


def manifest_text(src_dir: Path) -> str | None:
    """The text of ``src_dir/murmur.yaml`` when it is an artifact manifest, else None."""
    path = src_dir / archive.MANIFEST_ENTRY
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    return text if is_artifact_text(text, path=str(path)) else None


def root_wasm(names: list[str]) -> list[str]:
    """The root ``*.wasm`` entries among archive names, in order."""
    return [n for n in names if "/" not in n and n.endswith(".wasm")]


def wasm_payload(names: list[str]) -> str | None:
    """The component a wasm artifact runs: ``capsule.wasm``, else its single root ``*.wasm``."""
    if "capsule.wasm" in names:
        return "capsule.wasm"
    roots = root_wasm(names)
    return roots[0] if len(roots) == 1 else None


def build_artifact_bytes(src_dir: Path, text: str, *,
                         warnings: list[Diagnostic] | None = None) -> tuple[ArtifactManifest, bytes]:
    """Validate an artifact directory and return its manifest and archive bytes.

    Raises:
        DiagnosticError: artifact-manifest codes; ``E-BLD-002`` for an absolute, ``..``,
        duplicate or symlinked entry; ``E-IO-003`` naming the first missing file;
        ``E-BLD-003`` for a wasm artifact without one payload.
    """
    where = str(src_dir / archive.MANIFEST_ENTRY)
    manifest = parse_artifact_manifest(text, path=where, warnings=warnings)
    entries: list[tuple[str, bytes]] = [(archive.MANIFEST_ENTRY, text.encode("utf-8"))]
    seen = {archive.MANIFEST_ENTRY}
    for rel in manifest.requires_files:
        name = rel.removeprefix("./")
        problem = archive.name_problem(name)
        if problem is not None or name in seen:
            raise DiagnosticError(error(
                "E-BLD-002", f"`requires_files` entry {rel} {problem or 'is listed twice'}",
                path=where, hint="list plain relative paths to files beside murmur.yaml, each once"))
        path = src_dir
        for part in name.split("/"):
            path = path / part
            if path.is_symlink():
                raise DiagnosticError(error(
                    "E-BLD-002", f"`requires_files` entry {rel} passes through the symlink {path}",
                    path=where, hint="replace the link with the file it points to"))
        if not path.is_file():
            raise DiagnosticError(error(
                "E-IO-003", f"`requires_files` entry {rel} is missing (no file {path})",
                path=where, hint=f"create {path}, or remove it from `requires_files`"))
        seen.add(name)
        entries.append((name, path.read_bytes()))
    names = [n for n, _ in entries]
    if manifest.execution == "wasm" and wasm_payload(names) is None:
        roots = root_wasm(names)
        why = (f"it packs several root .wasm files ({', '.join(roots)}) and none is capsule.wasm"
               if roots else "it packs no root .wasm file (capsule.wasm or exactly one root *.wasm)")
        raise DiagnosticError(error(
            "E-BLD-003", f"the wasm artifact {manifest.name} has no single component to run: {why}",
            path=where, hint="list exactly one compiled component (a root *.wasm) in `requires_files`"))
    if warnings is not None and "capsule.wasm" in names and len(root_wasm(names)) > 1:
        others = [n for n in root_wasm(names) if n != "capsule.wasm"]
        warnings.append(error(
            "W-BLD-002", f"capsule.wasm is always the payload, so {', '.join(others)} ships but never runs",
            path=where, hint="keep exactly one root *.wasm"))
    return manifest, _pack_in_order(entries)


def _pack_in_order(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=archive.FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = (stat.S_IFREG | archive.FILE_MODE) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def _store(global_: bool, project_dir: Path | None) -> tuple[str, Path]:
    if global_:
        return "global", paths.global_store()
    return "project", paths.project_store(project_dir)


def install_artifact(data: bytes, *, where: str, global_: bool,
                     project_dir: Path | None = None) -> InstalledArtifact:
    """Install an artifact archive's bytes into the project (or global) store.

    Raises:
        DiagnosticError: archive codes (``E-BLD-003..008``); artifact-manifest codes for the
        packed ``murmur.yaml``. A failed install leaves the store as it was.
    """
    sha = hashlib.sha256(data).hexdigest()
    with archive.open_archive(data, where=where) as zf:
        files = archive.check_entries(zf, where=where)
        raw = archive.read_member(zf, archive.MANIFEST_ENTRY, where=where, limit=1 << 20)
        manifest = parse_artifact_manifest(raw.decode("utf-8-sig", "replace"),
                                           path=f"{where}!{archive.MANIFEST_ENTRY}")
        label, store = _store(global_, project_dir)
        final = store / SCOPE_DIR / manifest.name / manifest.version
        archive.refuse_symlinks(store, final, where=where)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{uuid.uuid4().hex}"
        try:
            (tmp / "root").mkdir(parents=True)
            archive.extract(zf, files, tmp / "root", where=where)
            if manifest.execution == "native":  # the binary runs (archives carry no modes)
                for rel in manifest.requires_files:
                    if rel.startswith("bin/") and (tmp / "root" / rel).is_file():
                        (tmp / "root" / rel).chmod(0o755)
            (tmp / f"{manifest.name}-{manifest.version}{archive.ARCHIVE_SUFFIX}").write_bytes(data)
            (tmp / RECORD).write_text(json.dumps({
                "name": manifest.name, "version": manifest.version, "runtime": manifest.runtime,
                "execution": manifest.execution, "sha256": sha}, indent=2) + "\n", encoding="utf-8")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return _entry(final, label)


def _entry(entry: Path, label: str) -> InstalledArtifact:
    record = json.loads((entry / RECORD).read_text(encoding="utf-8"))
    zpath = entry / f"{record['name']}-{record['version']}{archive.ARCHIVE_SUFFIX}"
    data = zpath.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    if sha != record["sha256"]:
        raise DiagnosticError(error(
            "E-REG-002", f"artifact {record['name']}@{record['version']} no longer matches its "
            f"recorded sha256", path=str(zpath), hint="reinstall it with `mur install`"))
    text = (entry / "root" / archive.MANIFEST_ENTRY).read_text(encoding="utf-8-sig")
    manifest = parse_artifact_manifest(text, path=str(entry / "root" / archive.MANIFEST_ENTRY))
    return InstalledArtifact(manifest, entry / "root", zpath, sha, label)


def resolve_artifact(name: str, version: str, *,
                     project_dir: Path | None = None) -> InstalledArtifact:
    """Find an installed artifact by exact version: project store, then global store.

    Raises:
        DiagnosticError: ``E-REG-001`` when neither store holds it; ``E-REG-002`` when its
        archive no longer matches its record.
    """
    for label, store in (_store(False, project_dir), _store(True, project_dir)):
        entry = store / SCOPE_DIR / name / version
        if (entry / RECORD).is_file():
            return _entry(entry, label)
    raise DiagnosticError(error(
        "E-REG-001", f"artifact {name}@{version} is not installed",
        hint=f"build and install it: `mur install <dir of {name}>` (or its .mur.zip)"))


def list_artifacts(*, project_dir: Path | None = None) -> list[InstalledArtifact]:
    """Every readable installed artifact (project store first), by name and version."""
    out: list[InstalledArtifact] = []
    for label, store in (_store(False, project_dir), _store(True, project_dir)):
        for record in sorted((store / SCOPE_DIR).glob(f"*/*/{RECORD}")):
            try:
                out.append(_entry(record.parent, label))
            except (DiagnosticError, OSError, ValueError, KeyError):
                continue
    return out
