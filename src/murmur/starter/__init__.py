"""The warm starter: one pre-imported process that forks formation members and delegated children.

Specification: ``spec/formation.md`` and ``spec/delegation.md`` "The warm start path". A
launcher, and a session that delegates, keeps one starter (:mod:`murmur.starter.server`, run
as ``python -m murmur.cli.warm_starter``): it has imported what a member's ``mur run`` imports,
runs no Trio loop and no thread, and forks one process per request (:mod:`murmur.starter.child`
is what the fork does before it runs ``mur``'s own ``main``; :mod:`murmur.starter.procarea`
makes ``/proc`` show it as an exec'd ``mur run``). :mod:`murmur.starter.early` starts it,
:mod:`murmur.starter.client` is the owner's side, and :mod:`murmur.starter.protocol` the
messages between them.

The warm path is the default; the plain path (exec a new ``mur run``, :func:`mur_command`)
is used with ``MURMUR_STARTER=off``, whenever ``MURMUR_MUR_BINARY`` names another binary,
and for a member the starter cannot take (it is gone, or not ready).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

STARTER_ENV = "MURMUR_STARTER"
"""``off`` (or ``0``/``no``/``false``) starts every member and child by exec; anything else
(unset included) lets a launcher, or a session that delegates, fork them from a warm starter."""

MUR_BINARY_ENV = "MURMUR_MUR_BINARY"
"""A ``mur`` to exec for every member and child instead (the warm path is then not used)."""

_OFF = ("off", "0", "no", "false")


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` allows the warm path (pure): not when ``MURMUR_MUR_BINARY`` names a
    binary, not when ``MURMUR_STARTER`` says off."""
    if environ.get(MUR_BINARY_ENV, "").strip():
        return False
    return environ.get(STARTER_ENV, "").strip().lower() not in _OFF


def mur_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """The command that runs ``mur`` for a member or a delegated child.

    ``$MURMUR_MUR_BINARY`` when set and non-blank; else the ``mur`` script beside the
    current interpreter (or the ``mur`` on ``PATH`` when it lives there); else
    ``<python> -m murmur.cli.mur``.
    """
    env = os.environ if environ is None else environ
    explicit = env.get(MUR_BINARY_ENV, "").strip()
    if explicit:
        return [explicit]
    beside = Path(sys.executable).parent / "mur"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("mur")
    if found and Path(found).parent == Path(sys.executable).parent:
        return [found]
    return [sys.executable, "-m", "murmur.cli.mur"]
