"""The spawn envelope: a manifest lowered to what it grants, and the referee of two of them.

Specification: ``spec/roost.md``, "Spawn envelope" (the axis table), and ``spec/manifest.md``,
"``capabilities``" (the network entry forms). Both functions are pure: :func:`lower` reads only the
manifest it is given, :func:`referee` only its two envelopes.

Coverage on the network and peer-fetch axes is :func:`murmur.manifest.netallow.covers` (a bare
host covers every scheme and port, ``h:p`` that port, a scheme form only itself; an entry that
parses as none of these covers only an identical string).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

import attrs

from murmur.manifest import Containment, Manifest, covers

__all__ = ["Envelope", "EnvelopeRefusal", "lower", "referee"]

_MONOTONE = "a spawned capsule can never hold more capability than the capsule that spawned it"


@attrs.frozen
class Envelope:
    """What one capsule holds, axis by axis (spec/roost.md, "Spawn envelope").

    Attributes:
        capsule (str): the capsule name (used to name its default state store).
        network_allow (tuple[str, ...]): ``capabilities.network.allow``.
        unix_sockets (bool): ``capabilities.network.unix_sockets``.
        peer_fetch_allow (tuple[str, ...]): ``capabilities.peer_fetch.allow``.
        shell_allow (tuple[str, ...]): ``capabilities.shell.allow``.
        spawn_allow (tuple[str, ...]): ``capabilities.spawn.allow``.
        env_allow (tuple[str, ...]): ``capabilities.env.allow``.
        filesystem_scope (str | None): normalised ``capabilities.filesystem.scope``; None
            means no scope declared (the whole workdir, ``.`` included).
        workdir_exec (bool): ``capabilities.filesystem.workdir_exec``.
        state_stores (tuple[str, ...]): every store the capsule's artifacts would open,
            sorted; a ``state`` block without ``store`` opens one named after the capsule.
        containment (Containment | None): the declared floor; None is effectively advisory.
    """

    capsule: str
    network_allow: tuple[str, ...] = ()
    unix_sockets: bool = False
    peer_fetch_allow: tuple[str, ...] = ()
    shell_allow: tuple[str, ...] = ()
    spawn_allow: tuple[str, ...] = ()
    env_allow: tuple[str, ...] = ()
    filesystem_scope: str | None = None
    workdir_exec: bool = False
    state_stores: tuple[str, ...] = ()
    containment: Containment | None = None

    @property
    def containment_rank(self) -> int:
        """0 advisory (or undeclared), 1 scoped, 2 sealed."""
        return self.containment.rank if self.containment is not None else 0


@attrs.frozen
class EnvelopeRefusal:
    """Why a child exceeds its parent.

    Attributes:
        key (str): the manifest key of the axis, e.g. ``capabilities.network.allow``.
        entry (str): the child declaration that exceeded, as written.
        message (str): the full refusal sentence (``<key>: the child declares '<entry>', …``).
    """

    key: str
    entry: str
    message: str


def _normalise_scope(scope: str | None) -> str | None:
    if scope is None:
        return None
    norm = posixpath.normpath(scope.strip() or ".")
    return None if norm == "." else norm


def _scope_covers(parent: str | None, child: str | None) -> bool:
    if parent is None:
        return True
    if child is None or child.startswith(("/", "..")):
        return False
    return child == parent or child.startswith(parent + "/")


def _artifact_stores(manifest: Manifest) -> Iterable[str]:
    """Stores opened by per-artifact ``capabilities.state`` blocks (when the model has them)."""
    for art in manifest.artifacts:
        caps = getattr(art, "capabilities", None)
        state = getattr(caps, "state", None) if caps is not None else None
        if state is not None:
            store = getattr(state, "store", None)
            yield store if isinstance(store, str) and store else manifest.name


def lower(manifest: Manifest) -> Envelope:
    """Lower a manifest (references already resolved) to its spawn envelope.

    Args:
        manifest (Manifest): the capsule's registry manifest.

    Returns:
        Envelope: every axis of the spawn-envelope table, absent blocks lowered to "holds nothing".
    """
    caps = manifest.capabilities
    stores = set(_artifact_stores(manifest))
    if caps.state is not None:
        stores.add(caps.state.store or manifest.name)
    fs = caps.filesystem
    return Envelope(
        capsule=manifest.name,
        network_allow=caps.network.allow if caps.network else (),
        unix_sockets=bool(caps.network and caps.network.unix_sockets),
        peer_fetch_allow=caps.peer_fetch.allow if caps.peer_fetch else (),
        shell_allow=manifest.shell_allow,
        spawn_allow=manifest.spawn_allow,
        env_allow=manifest.env_allow,
        filesystem_scope=_normalise_scope(fs.scope) if fs else None,
        workdir_exec=bool(fs and fs.workdir_exec),
        state_stores=tuple(sorted(stores)),
        containment=caps.containment,
    )


def _refuse(key: str, entry: str) -> EnvelopeRefusal:
    return EnvelopeRefusal(
        key, entry, f"{key}: the child declares '{entry}', which its parent does not hold — {_MONOTONE}"
    )


def _first_uncovered_net(parent: tuple[str, ...], child: tuple[str, ...]) -> str | None:
    for entry in child:
        if not any(covers(p, entry) for p in parent):
            return entry
    return None


def _first_missing(parent: tuple[str, ...], child: tuple[str, ...]) -> str | None:
    held = set(parent)
    return next((c for c in child if c not in held), None)


def referee(parent: Envelope, child: Envelope) -> EnvelopeRefusal | None:
    """Judge a child envelope against its parent's, axis by axis in the spawn-envelope table's order.

    Args:
        parent (Envelope): the lowered manifest of the session asking ``POST /spawn``.
        child (Envelope): the lowered registry manifest of the capsule it asks for.

    Returns:
        EnvelopeRefusal | None: the first axis on which the child exceeds its parent (naming
        the manifest key and the child entry), or None when the child fits. Containment is
        the one axis where the child may differ in its favour: its floor may only rise.
    """
    miss = _first_uncovered_net(parent.network_allow, child.network_allow)
    if miss is not None:
        return _refuse("capabilities.network.allow", miss)
    if child.unix_sockets and not parent.unix_sockets:
        return _refuse("capabilities.network.unix_sockets", "true")
    miss = _first_uncovered_net(parent.peer_fetch_allow, child.peer_fetch_allow)
    if miss is not None:
        return _refuse("capabilities.peer_fetch.allow", miss)
    for key, p_list, c_list in (
        ("capabilities.shell.allow", parent.shell_allow, child.shell_allow),
        ("capabilities.spawn.allow", parent.spawn_allow, child.spawn_allow),
        ("capabilities.env.allow", parent.env_allow, child.env_allow),
    ):
        miss = _first_missing(p_list, c_list)
        if miss is not None:
            return _refuse(key, miss)
    if not _scope_covers(parent.filesystem_scope, child.filesystem_scope):
        entry = child.filesystem_scope if child.filesystem_scope is not None else "."
        return _refuse("capabilities.filesystem.scope", entry)
    if child.workdir_exec and not parent.workdir_exec:
        return _refuse("capabilities.filesystem.workdir_exec", "true")
    miss = _first_missing(parent.state_stores, child.state_stores)
    if miss is not None:
        return _refuse("capabilities.state.store", miss)
    if child.containment_rank < parent.containment_rank:
        return _containment_refusal(parent, child)
    return None


def _containment_refusal(parent: Envelope, child: Envelope) -> EnvelopeRefusal:
    key = "capabilities.containment"
    entry = child.containment.value if child.containment else "advisory"
    floor = parent.containment.value if parent.containment else "advisory"
    declared = f"'{entry}'" if child.containment else "no floor (effectively 'advisory')"
    return EnvelopeRefusal(
        key,
        entry,
        f"{key}: the child declares {declared}, below its parent's floor '{floor}' — a "
        "containment floor is a requirement, so a spawned capsule's may only rise",
    )
