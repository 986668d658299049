"""The one table of interface versions this host serves, per world (upstream v0.2.0).

A world is what a component of one role may import and must export. The host serves exactly
one version of each interface and keeps no fallback (upstream's rule), so a component built
against another version is refused before it runs (``E-CMP-001``, naming the interface, the
version it wants and the version served). A newer set (hook 0.9, tool 0.2, ...) is a new
:data:`SERVED` row set; callers ask :func:`world` and never name versions themselves.
Specification: ``spec/components.md`` ("Worlds and versions").
"""

from __future__ import annotations

import attrs

SERVED: dict[str, str] = {
    "murmur:task/task": "0.1.0",
    "murmur:text/chunks": "0.1.0",
    "murmur:tool/run": "0.1.0",
    "murmur:tool-registry/invoke": "0.1.0",
    "murmur:capsule/run": "0.1.0",
    "murmur:runtime/inference": "0.2.0",
    "murmur:hook/lifecycle": "0.5.0",
    "murmur:message/send": "0.1.0",
    "murmur:artifact-manager/manage": "0.1.0",
}
"""Interface (``ns:pkg/iface``) → the one version served (upstream v0.2.0, wit/VERSIONING.md)."""


@attrs.frozen
class World:
    """A world: the murmur interfaces a component may import and the one it must export."""

    name: str
    imports: tuple[str, ...]
    export: str


WORLDS: dict[str, World] = {
    "tool": World("tool", ("murmur:task/task", "murmur:text/chunks"), "murmur:tool/run"),
    "driver": World("driver", ("murmur:text/chunks",), "murmur:tool/run"),
    "capsule": World("capsule", ("murmur:tool-registry/invoke", "murmur:message/send",
                                 "murmur:artifact-manager/manage", "murmur:tool/run"),
                     "murmur:capsule/run"),
    # runtime/inference `use`s lifecycle's `message`, so a hook importing it also imports
    # murmur:hook/lifecycle (types only), as upstream's own hooks do
    "hook": World("hook", ("murmur:runtime/inference", "murmur:hook/lifecycle"), "murmur:hook/lifecycle"),
}


def world(role: str) -> World:
    """The world a component of ``role`` (tool, driver, capsule, hook) is hosted in."""
    return WORLDS[role]


def versioned(interface: str) -> str:
    """``ns:pkg/iface@<served version>``."""
    return f"{interface}@{SERVED[interface]}"


def split_name(name: str) -> tuple[str, str | None]:
    """``("ns:pkg/iface", "1.2.3")`` from an import or export name (version None when absent)."""
    base, sep, version = name.partition("@")
    return base, (version if sep else None)
