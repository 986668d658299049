"""``mur doctor`` in an artifact directory: the artifact manifest, its payload, and for a
WebAssembly component the interfaces (with versions) it imports and exports, refusing one
this host cannot run (``E-CMP-001``/``E-CMP-002``/``E-CMP-004``) exactly as a launch would.

The component is read, not compiled (:mod:`murmur.components.inspect`), so this is fast and
imports no wasmtime. Specification: ``spec/components.md`` ("mur doctor").
"""

from __future__ import annotations

from pathlib import Path

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError


def check_artifact(path: Path, text: str, shown: str, lines: list[str],
                   stderr: list[Diagnostic]) -> tuple[dict[str, object], bool]:
    """Check the artifact whose manifest text is ``text``; append report lines; (json, ok)."""
    from murmur.manifest.artifact import parse_artifact_manifest
    from murmur.registry.artifacts import wasm_payload

    lines.append(f"artifact: {shown}")
    warnings: list[Diagnostic] = []
    report: dict[str, object] = {"path": shown, "kind": "artifact"}
    try:
        art = parse_artifact_manifest(text, path=shown, warnings=warnings)
    except DiagnosticError as exc:
        return _refused(report, list(exc.diagnostics), warnings, lines, stderr)
    report.update(name=art.name, version=art.version, runtime=art.runtime, execution=art.execution)
    for w in warnings:
        lines.append(f"  ⚠ {w.render().splitlines()[0]}")
    faults: list[Diagnostic] = []
    root = path.parent
    for rel in art.requires_files:
        if not (root / rel).is_file():
            faults.append(error("E-IO-003", f"`requires_files` entry {rel} is missing", path=shown,
                                hint=f"create {root / rel}, or remove it from `requires_files`"))
    interfaces: dict[str, list[str]] = {"imports": [], "exports": []}
    if not faults and art.execution == "wasm":
        payload = wasm_payload(list(art.requires_files))
        if payload is None:
            faults.append(error("E-BLD-003", f"the wasm artifact {art.name} has no single component to run",
                                path=shown, hint="list exactly one root *.wasm in `requires_files`"))
        else:
            faults += _component(root / payload, art.role, art.name, interfaces, lines)
    report["interfaces"] = interfaces
    if faults:
        return _refused(report, faults, warnings, lines, stderr)
    lines.append(f"  ✓ {art.name} {art.version} {art.runtime} ({art.execution})")
    report.update(ok=True, diagnostics=[], warnings=[w.to_json() for w in warnings])
    return report, True


def _component(path: Path, role: str, name: str, interfaces: dict[str, list[str]],
               lines: list[str]) -> list[Diagnostic]:
    from murmur.components.check import interface_refusals
    from murmur.components.inspect import NotAComponent
    from murmur.components.inspect import interfaces as read

    try:
        found = read(path.read_bytes())
    except (OSError, NotAComponent) as exc:
        return [error("E-CMP-002", f"{path.name} is not a WebAssembly component: {exc}", path=str(path),
                      hint="build it as a component (wasm-tools component new, cargo-component, componentize-py)")]
    murmur_ifaces = [n for n in found.imports if n.startswith("murmur:")]
    interfaces["imports"] = list(found.imports)
    interfaces["exports"] = list(found.exports)
    shown_exports = ", ".join(found.exports) or "nothing"
    lines.append(f"  component {path.name}: exports {shown_exports}; imports "
                 f"{', '.join(murmur_ifaces) or 'no murmur interface'}")
    return interface_refusals(found, role, name=name)


def _refused(report: dict[str, object], faults: list[Diagnostic], warnings: list[Diagnostic],
             lines: list[str], stderr: list[Diagnostic]) -> tuple[dict[str, object], bool]:
    for d in faults:
        lines.append(f"  ✗ {d.render().splitlines()[0]}")
        if d.hint:
            lines.append(f"    Fix: {d.hint}")
    stderr.extend(faults)
    report.update(ok=False, diagnostics=[d.to_json() for d in faults],
                  warnings=[w.to_json() for w in warnings])
    return report, False


def capsule_components(manifest: object) -> tuple[list[str], list[dict[str, object]]]:
    """Report lines and JSON for the installed WASM artifacts a capsule uses (its tools,
    driver, hooks): each one's interfaces with their versions. Artifacts that do not resolve
    are left out (the launch check has already refused them)."""
    from murmur.components.inspect import NotAComponent, interfaces
    from murmur.errors import DiagnosticError
    from murmur.registry.artifacts import resolve_artifact, wasm_payload

    lines: list[str] = []
    report: list[dict[str, object]] = []
    for entry in getattr(manifest, "artifacts", ()):
        if entry.source or entry.version is None:
            continue
        try:
            art = resolve_artifact(entry.name, entry.version)
        except DiagnosticError:
            continue
        payload = wasm_payload(list(art.manifest.requires_files)) if art.manifest.execution == "wasm" else None
        if payload is None:
            continue
        try:
            found = interfaces((art.root / payload).read_bytes())
        except (OSError, NotAComponent):
            continue
        lines.append(f"  component {entry.name} {entry.version} ({art.manifest.runtime}): exports "
                     f"{', '.join(found.exports) or 'nothing'}; imports "
                     f"{', '.join(n for n in found.imports if n.startswith('murmur:')) or 'no murmur interface'}")
        report.append({"name": entry.name, "version": entry.version, "runtime": art.manifest.runtime,
                       "imports": list(found.imports), "exports": list(found.exports)})
    return lines, report
