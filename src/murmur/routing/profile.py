"""What a session started with, and whether its profile changed since (PROFILE EDITED SINCE START).

``spec/routing.md``. At start a session records, in its running record
(``murmur.session.running_record``):

=====================  ============================================================
``manifest_path``      the ``murmur.yaml`` it loaded (the installed copy, or the source)
``manifest_sha256``    sha256 of those bytes
``artifact``           the installed ``.mur.zip`` it runs (installed capsules only)
``artifact_sha256``    the sha256 recorded when that archive was installed
``source_manifest``    the source ``murmur.yaml`` the artifact was built from, when the
                       install recorded one (or the manifest itself for a source run)
=====================  ============================================================

:func:`edited` compares them with the files as they are now. The live grants of such a
session are what it started with, not what the files say now.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from murmur.manifest import MANIFEST_FILE

__all__ = ["edited", "file_sha256", "started_profile"]


def file_sha256(path: Path) -> str | None:
    """Hex sha256 of a file's bytes, or None when it cannot be read."""
    try:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def started_profile(root: Path, manifest_path: Path | None) -> dict[str, Any]:
    """The running-record fields for a session starting from ``root``.

    Args:
        root (Path): the capsule root (an installed entry's ``root/``, or a source directory).
        manifest_path (Path | None): the source manifest for a run from source; None for an
            installed capsule (then ``root/murmur.yaml`` is the packed manifest).

    Returns:
        dict: the fields above that apply (values are strings).
    """
    out: dict[str, Any] = {}
    if manifest_path is not None:
        path = manifest_path / MANIFEST_FILE if manifest_path.is_dir() else manifest_path
        path = path.resolve()
        out["source_manifest"] = str(path)
    else:
        path = root / MANIFEST_FILE
        record = _installed_record(root.parent)
        if record is not None:
            name, version = str(record.get("name", "")), str(record.get("version", ""))
            out["artifact"] = str(root.parent / f"{name}-{version}.mur.zip")
            out["artifact_sha256"] = str(record.get("sha256", ""))
            source = record.get("source")
            if isinstance(source, str) and source:
                out["source_manifest"] = source
    out["manifest_path"] = str(path)
    sha = file_sha256(path)
    if sha is not None:
        out["manifest_sha256"] = sha
    return out


def _installed_record(entry: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((entry / "installed.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def edited(fields: dict[str, Any]) -> str | None:
    """Why a session's profile no longer matches what it started with, or None.

    Args:
        fields (dict): a running record's fields (``RunningRecord.to_json()``).

    Returns:
        str | None: ``the installed artifact changed`` or ``the source manifest <path>
        changed`` (or ``… is gone``); None when nothing changed or nothing was recorded.
    """
    artifact, art_sha = fields.get("artifact"), fields.get("artifact_sha256")
    if isinstance(artifact, str) and isinstance(art_sha, str) and art_sha:
        now = file_sha256(Path(artifact))
        if now != art_sha:
            return f"the installed artifact {artifact} " + ("is gone" if now is None else "changed")
    source, sha = fields.get("source_manifest"), fields.get("manifest_sha256")
    if isinstance(source, str) and isinstance(sha, str) and sha:
        now = file_sha256(Path(source))
        if now != sha:
            return f"the source manifest {source} " + ("is gone" if now is None else "changed")
    return None
