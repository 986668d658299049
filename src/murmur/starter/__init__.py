"""The warm starter: one pre-imported process that forks formation members on request.

Specification: ``spec/formation.md`` "The warm start path" (issue 19). A launcher keeps one
starter (:mod:`murmur.starter.server`, run as ``python -m murmur.starter.server``): it has
imported everything a member's ``mur run`` imports, runs no Trio loop and no thread, and
forks one process per request (:mod:`murmur.starter.child` is what the fork does before it
runs ``mur run``'s own ``main``). :mod:`murmur.starter.client` is the launcher's side, and
:mod:`murmur.starter.protocol` the messages between them.

The plain path (exec a new ``mur run``) stays: it is used when ``MURMUR_MUR_BINARY`` names
another binary, when ``MURMUR_STARTER=off``, and whenever the starter cannot be started or
has gone away.
"""

from __future__ import annotations

from collections.abc import Mapping

STARTER_ENV = "MURMUR_STARTER"
"""``off`` (or ``0``/``no``/``false``) makes a launcher start every member by exec; anything
else (unset included) lets it use the warm starter where it can."""

MUR_BINARY_ENV = "MURMUR_MUR_BINARY"  # the same name as murmur.formation.process's


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` allows the warm path (pure)."""
    if environ.get(MUR_BINARY_ENV, "").strip():
        return False
    return environ.get(STARTER_ENV, "").strip().lower() not in ("off", "0", "no", "false")
