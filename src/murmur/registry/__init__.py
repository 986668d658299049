"""Artifacts: deterministic ``.mur.zip`` builds, project and global stores, ``murmur.lock``.

The public API other pieces code against (specification: ``spec/artifacts.md``)::

    Installed, resolve, resolve_in_store, rehash, install, build, list_installed
"""

from murmur.registry.build import build
from murmur.registry.store import (
    Installed,
    install,
    list_installed,
    rehash,
    resolve,
    resolve_in_store,
)

__all__ = ["Installed", "build", "install", "list_installed", "rehash", "resolve", "resolve_in_store"]
