"""Whether this host can run a component in a role: interface versions and the world's export.

Pure: the component's bytes (read by :mod:`murmur.components.inspect`) and its role in, the
refusals out, in import-then-export order. Used before any call (the component never runs
when refused) and by ``mur doctor``. Codes: ``E-CMP-001`` a murmur interface at a version
this host does not serve, naming the interface and both versions; ``E-CMP-002`` not a
component, or the world's export missing; ``E-CMP-004`` a murmur interface the role's world
does not offer. Specification: ``spec/components.md`` ("Worlds and versions").
"""

from __future__ import annotations

from murmur.components.inspect import Interfaces, NotAComponent, interfaces
from murmur.components.versions import SERVED, split_name, versioned, world
from murmur.diagnostics import Diagnostic, error


def describe(data: bytes) -> Interfaces:
    """The component's imports and exports (raises :class:`NotAComponent`)."""
    return interfaces(data)


def version_refusals(data: bytes, role: str, *, name: str) -> list[Diagnostic]:
    """Every reason this host refuses to run ``data`` as a ``role`` component (empty: runnable)."""
    try:
        found = interfaces(data)
    except NotAComponent as exc:
        return [error("E-CMP-002", f"`{name}` is not a WebAssembly component: {exc}",
                      hint="build it as a component (e.g. `wasm-tools component new`, cargo-component, componentize-py)")]
    return interface_refusals(found, role, name=name)


def interface_refusals(found: Interfaces, role: str, *, name: str) -> list[Diagnostic]:
    """:func:`version_refusals` for already-read interfaces."""
    w = world(role)
    out: list[Diagnostic] = []
    for kind, names in (("imports", found.imports), ("exports", found.exports)):
        for full in names:
            base, version = split_name(full)
            if not base.startswith("murmur:"):
                continue
            served = SERVED.get(base)
            if served is None:
                out.append(error(
                    "E-CMP-001", f"component `{name}` {kind} {full}, an interface this host does not serve",
                    hint=f"rebuild it against upstream v0.2.0's interfaces (the `{role}` world)"))
            elif version != served:
                out.append(error(
                    "E-CMP-001", f"component `{name}` {kind} {base}@{version}; this host serves "
                    f"{base}@{served}", hint=f"rebuild it against {base}@{served} (upstream v0.2.0)"))
            elif kind == "imports" and base not in w.imports:
                out.append(error(
                    "E-CMP-004", f"component `{name}` imports {full}, which the `{role}` world does not offer",
                    hint=f"a {role} may import: {', '.join(versioned(i) for i in w.imports) or 'no murmur interface'}"))
    exported = {split_name(n)[0] for n in found.exports}
    if w.export not in exported:
        out.append(error(
            "E-CMP-002", f"component `{name}` does not export {versioned(w.export)}",
            hint=f"a {role} component exports {versioned(w.export)}"))
    return out
