"""Where mur-roost reads capsules from: the registry seam and its store-backed implementation.

Specification: ``spec/roost.md``, "Registry" and "Starting it" (``${VAR}`` references).
The app asks a :class:`Registry` for ``name@version`` and gets back the artifact's content hash and manifest; :class:`Lowerer` turns
that into the :class:`~murmur.roost.ledger.Artifact` the ledger judges, resolving the manifest's
``${VAR}`` references against the daemon's environment and never ``inference.api_key``.

:class:`StoreRegistry` wraps :func:`murmur.registry.resolve_in_store` (which re-reads and
re-hashes the archive and re-parses the manifest) with a cache keyed by the identity of the
entry's files on disk (inode, size, mtime of ``installed.json`` and the archive): an install
replaces an entry by renaming a new one into place, so a reinstalled version -- the "same
coordinates resolving to different bytes" case -- always misses the cache and is re-hashed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import attrs

from murmur.manifest import Manifest, resolve_refs
from murmur.registry import Installed, resolve_in_store
from murmur.roost.envelope import lower
from murmur.roost.ledger import Artifact

__all__ = ["Lowerer", "Registry", "ResolvedArtifact", "StoreRegistry"]

_NO_RESOLVE = ("inference.api_key",)


@attrs.frozen
class ResolvedArtifact:
    """One artifact as the registry holds it.

    Attributes:
        name (str): its bare name.
        version (str): its exact version.
        sha256 (str): hex sha256 of its ``.mur.zip`` bytes.
        manifest (Manifest): its packed manifest, ``${VAR}`` references unresolved.
    """

    name: str
    version: str
    sha256: str
    manifest: Manifest


class Registry(Protocol):
    """What the daemon needs from a registry."""

    def resolve(self, name: str, version: str) -> ResolvedArtifact | None:
        """The artifact ``name@version``, or None when it is not there.

        Raises:
            DiagnosticError: when an entry exists but cannot be read or verified.
        """
        ...


_FileId = tuple[int, int, int]


_PATHS_KEPT = 1024  # coordinates whose entry paths are remembered (client input: bounded)


def _file_id(path: str) -> _FileId | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the coordinates
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class StoreRegistry:
    """A :class:`Registry` over one artifact store directory (``--registry-path``).

    Args:
        store_dir (Path): the store, laid out ``<scope>/<name>/<version>/``.
        resolve_fn (Callable): the uncached lookup (default
            :func:`murmur.registry.resolve_in_store`; injectable for tests).
    """

    def __init__(
        self,
        store_dir: Path,
        resolve_fn: Callable[[Path, str, str], Installed | None] = resolve_in_store,
    ) -> None:
        self.store_dir = store_dir
        self._resolve_fn = resolve_fn
        self._cache: dict[tuple[str, str], tuple[tuple[_FileId, _FileId], ResolvedArtifact]] = {}
        self._paths: dict[tuple[str, str], tuple[str, str] | None] = {}

    def _files(self, name: str, version: str) -> tuple[str, str] | None:
        """The entry's ``installed.json`` and archive paths (a pure function of the coordinates,
        so remembered; only the files' identities are read again at each resolve)."""
        key = (name, version)
        if key in self._paths:
            return self._paths[key]
        files: tuple[str, str] | None = None
        scope, _, bare = name.rpartition("/")
        valid_name = bare and "/" not in scope and bare not in (".", "..") and scope not in (".", "..")
        if valid_name and version and "/" not in version and version not in (".", ".."):
            entry = self.store_dir / (scope or "local") / bare / version
            files = (str(entry / "installed.json"), str(entry / f"{bare}-{version}.mur.zip"))
        if len(self._paths) >= _PATHS_KEPT:
            self._paths.clear()
        self._paths[key] = files
        return files

    def resolve(self, name: str, version: str) -> ResolvedArtifact | None:
        """See :meth:`Registry.resolve`; a cache hit costs two ``stat`` calls."""
        files = self._files(name, version)
        ids = (_file_id(files[0]), _file_id(files[1])) if files else (None, None)
        key = (name, version)
        hit = self._cache.get(key)
        if hit is not None and ids[0] is not None and ids[1] is not None and hit[0] == ids:
            return hit[1]
        installed = self._resolve_fn(self.store_dir, name, version)
        if installed is None:
            self._cache.pop(key, None)
            return None
        resolved = ResolvedArtifact(
            installed.name, installed.version, installed.sha256, installed.manifest
        )
        if ids[0] is not None and ids[1] is not None:
            self._cache[key] = ((ids[0], ids[1]), resolved)
        return resolved


class Lowerer:
    """Turn resolved artifacts into judged :class:`Artifact` values, memoised by content hash.

    Args:
        environ (Mapping[str, str]): the daemon's own environment (``${VAR}`` values).
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = dict(environ)
        self._memo: dict[tuple[str, str, str], Artifact] = {}

    def __call__(self, resolved: ResolvedArtifact) -> Artifact:
        """Resolve references (never ``inference.api_key``) and lower the manifest.

        Raises:
            DiagnosticError: ``E-MAN-003`` when a reference names a variable this daemon's
            environment does not hold.
        """
        key = (resolved.name, resolved.version, resolved.sha256)
        art = self._memo.get(key)
        if art is None:
            manifest = resolve_refs(resolved.manifest, self.environ, skip=_NO_RESOLVE)
            art = Artifact(resolved.name, resolved.version, resolved.sha256, lower(manifest))
            self._memo[key] = art
        return art
