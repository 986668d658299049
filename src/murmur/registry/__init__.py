"""Artifacts: deterministic ``.mur.zip`` builds, project and global stores, ``murmur.lock``.

The public API other pieces code against (specification: ``spec/artifacts.md``)::

    Installed, resolve, resolve_in_store, rehash, install, build, list_installed

and for the command line: ``check_plan`` (``mur doctor``), ``scan_installed`` and
``ROOT_DIR`` (``mur list``, routing), ``Pin``, ``lock_path`` and ``write_pin`` (``mur install``).
"""

from murmur.registry.build import build, check_plan
from murmur.registry.lock import Pin, lock_path, write_pin
from murmur.registry.store import (
    ROOT_DIR,
    Installed,
    install,
    list_installed,
    rehash,
    resolve,
    resolve_in_store,
    scan_installed,
)

__all__ = [
    "ROOT_DIR",
    "Installed",
    "Pin",
    "build",
    "check_plan",
    "install",
    "list_installed",
    "lock_path",
    "rehash",
    "resolve",
    "resolve_in_store",
    "scan_installed",
    "write_pin",
]
