"""The warm starter: one pre-imported process that forks formation members on request.

Specification: ``spec/formation.md`` "The warm start path". A launcher keeps one
starter (:mod:`murmur.starter.server`, run as ``python -m murmur.starter.server``): it has
imported everything a member's ``mur run`` imports, runs no Trio loop and no thread, and
forks one process per request (:mod:`murmur.starter.child` is what the fork does before it
runs ``mur run``'s own ``main``). :mod:`murmur.starter.client` is the launcher's side, and
:mod:`murmur.starter.protocol` the messages between them.

The plain path (exec a new ``mur run``) is the default: the warm path is used only with
``MURMUR_STARTER=on``, never when ``MURMUR_MUR_BINARY`` names another binary, and a member
the starter cannot take (it is gone, or not ready) is started by exec.
"""

from __future__ import annotations

from collections.abc import Mapping

STARTER_ENV = "MURMUR_STARTER"
"""``on`` (or ``1``/``yes``/``true``) lets a launcher fork its members from a warm starter;
anything else (unset included) starts every member by exec. Off by default: a forked
member's ``/proc/<pid>/environ`` shows the starter's environment, not its own (see
spec/formation.md), and tools that find a formation's processes by their environment miss it."""

MUR_BINARY_ENV = "MURMUR_MUR_BINARY"  # the same name as murmur.formation.process's


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` allows the warm path (pure)."""
    if environ.get(MUR_BINARY_ENV, "").strip():
        return False
    return environ.get(STARTER_ENV, "").strip().lower() in ("on", "1", "yes", "true")
