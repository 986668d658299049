"""The sandbox hook: what a confinement contributes to one start, and its wire form.

Specification: ``spec/architecture.md`` "Where a process starts". A sandbox builds
a :class:`Confinement` for a start; :mod:`murmur.procs` applies it and nowhere else applies
one. ``None`` means advisory (as before the sandbox): nothing is added.

Order in the child, on both start paths: the containment join first, then the
confinement's ``child_setup`` (exec path: in ``preexec_fn``, just before ``exec``; warm path:
in the forked child, after its descriptors are in place, before ``mur``'s ``main`` runs).

The warm starter is another process: a confinement crosses to it as JSON
(:meth:`Confinement.to_wire`), and the starter rebuilds it with :func:`from_wire`. The wire
object names its loader: ``{"kind": K, "module": M, ...}``; ``M`` (a module the starter can
import) registers ``K`` with :func:`register_loader` when it is imported, and the loader gets
the whole object back.

Errors: :func:`from_wire` raises ``ValueError`` for an object it cannot rebuild (no ``kind``,
an unknown kind, a module that does not import); the starter refuses that start.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Confinement", "Loader", "from_wire", "loader_for", "register_loader"]


@runtime_checkable
class Confinement(Protocol):
    """What a sandbox contributes to one start. None = advisory (as today)."""

    def argv(self, argv: Sequence[str]) -> list[str]:
        """The command as it starts (usually ``list(argv)``)."""

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """The command's whole environment (e.g. ``HTTP(S)_PROXY`` added)."""

    def pass_fds(self) -> tuple[int, ...]:
        """Descriptors the child must inherit, beside the caller's."""

    def child_setup(self) -> Callable[[], None] | None:
        """Runs in the child after fork, after the unit join, before exec (None: nothing).

        It must only make system calls (no locks, no imports, no threads): on the exec path it
        runs in ``preexec_fn`` of a process that has threads. An exception it raises fails the
        start (``OSError`` on the exec path; status 127 and a ``murmur:`` line on the warm path).
        """

    def to_wire(self) -> dict[str, Any]:
        """JSON for the warm starter: ``{"kind": K, "module": M, ...}`` (see the module text)."""


Loader = Callable[[Mapping[str, Any]], Confinement]
"""Rebuilds a confinement from its wire object (in the warm starter)."""

_LOADERS: dict[str, Loader] = {}


def register_loader(kind: str, loader: Loader) -> None:
    """Make ``kind``'s wire objects rebuildable by :func:`from_wire` (call it at import time)."""
    _LOADERS[kind] = loader


def from_wire(data: Mapping[str, Any] | None) -> Confinement | None:
    """The confinement a wire object describes; None for None (advisory).

    Raises:
        ValueError: no ``kind``, a ``module`` that does not import, or no loader for ``kind``.
    """
    if data is None:
        return None
    return loader_for(data)(data)


def loader_for(data: Mapping[str, Any]) -> Loader:
    """The loader of a wire object's ``kind``, importing the ``module`` it names first if need
    be (nothing is rebuilt: the warm starter's ``exec`` checks this before it clones, and the
    cloned child rebuilds it).

    Raises:
        ValueError: as :func:`from_wire`.
    """
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError("a confinement's wire object names no kind")
    module = data.get("module")
    if kind not in _LOADERS and isinstance(module, str) and module:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"the confinement module {module} does not import: {exc}") from None
    loader = _LOADERS.get(kind)
    if loader is None:
        raise ValueError(f"no confinement loader is registered for {kind!r}")
    return loader
