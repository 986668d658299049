"""``mur doctor``: admit a roster (or load a capsule manifest) and report what would be refused.

Specification: ``spec/roster.md``, "``mur doctor``".

* ``mur doctor --roster [PATH]`` — admit ``PATH`` (a project directory or the ``roster.yaml``
  inside it; bare ``--roster`` means ``./roster.yaml``) exactly as ``mur run --roster`` would,
  and report one line per member (``<name> <capsule>@<ver> [entry] serves peers|refuses peers
  authenticated door|public door``), the ``reachability:`` edges, and every ``W-ROS-001``
  warning with a ``Fix:`` line.
* ``mur doctor`` in a directory — the roster when ``roster.yaml`` is there, and the capsule when
  ``murmur.yaml`` is there (it loads and validates; diagnostics otherwise).
* Plans: the capsule's plan, and each admitted member's installed plan, is loaded exactly as
  ``mur run`` loads it (:func:`murmur.plan.load_plan`); any ``E-PLN-*`` fault is an error.
* Capsules are checked as ``mur run`` checks them before its door opens
  (:func:`run_faults`): components this runtime does not run (``E-MAN-005``/``E-RUN-006``),
  the containment floor (``E-CAP-003``), the workload itself (driver, endpoint, prompt file,
  process command on ``PATH``, a ``${VAR}`` key reference that is unset: ``E-MAN-003``), and
  the plan. Upstream keys with no effect here (``W-SEC-019``) and ``mur_version`` mismatches
  (``W-MAN-001``) are listed as ``⚠`` warnings.
* ``--json`` — one JSON object on stdout instead of the text report.
* Every report ends with the sandbox line: the highest class this host backs and what it has
  or lacks (``murmur.sandbox.host``); a capsule's line says the class it runs at.
* ``mur doctor --escape [--class C] [--json]`` — the escape-conformance harness
  (``murmur.escape``; spec/containment.md "Verification"); its exit code is the
  harness's (0, 1, 2, 3, 4).

Exit status: 0 when everything checked is admitted / valid (warnings never change it), 1 on
any error (a refused roster included). The text report goes to stdout; each refusal's full
diagnostic also goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from murmur.containment import detect, force_problem
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.formation import ROSTER_FILENAME, AdmittedRoster, admit_file, resolve_roster_path
from murmur.manifest import Manifest

MANIFEST_FILENAME = "murmur.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--roster [PATH]`` and ``--json``."""
    parser.add_argument(
        "--roster",
        nargs="?",
        const=".",
        default=None,
        metavar="PATH",
        help="admit this roster (a project directory or its roster.yaml; bare: ./roster.yaml)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--escape", action="store_true",
        help="run the escape-conformance harness: real escape attempts against each sandbox class "
             "this host backs (exit 0 all held, 1 harness failed, 2 host cannot back the class, "
             "3 a boundary escaped, 4 a resource ceiling did not hold)",
    )
    parser.add_argument("--class", dest="klass", choices=("scoped", "sealed"), default=None,
                        help="with --escape: grade only this class")


def run(args: argparse.Namespace) -> int:
    """Check what ``args`` names; print the report; 0 when nothing is refused, else 1."""
    if getattr(args, "escape", False):
        return run_escape(args)
    if getattr(args, "klass", None) is not None:
        bad = error("E-CLI-001", "--class needs --escape", hint="run `mur doctor --escape --class CLASS`")
        print(bad.render(), file=sys.stderr, flush=True)
        return 1
    cwd = Path.cwd()
    report: dict[str, object] = {"ok": True, "capsule": None, "roster": None, "diagnostics": []}
    lines: list[str] = []
    stderr: list[Diagnostic] = []

    roster_arg: Path | DiagnosticError | None = None
    manifest_path: Path | None = None
    if args.roster is not None:
        try:
            roster_arg = resolve_roster_path(args.roster, cwd=cwd)
        except DiagnosticError as exc:
            roster_arg = exc
    else:
        # Anything by those names is checked (a FIFO or a directory is then refused by name),
        # never skipped as if absent.
        if os.path.lexists(cwd / ROSTER_FILENAME):
            roster_arg = cwd / ROSTER_FILENAME
        if os.path.lexists(cwd / MANIFEST_FILENAME):
            manifest_path = cwd / MANIFEST_FILENAME

    ok = True
    if roster_arg is None and manifest_path is None:
        nothing = error(
            "E-IO-001",
            f"nothing to check: no {ROSTER_FILENAME} or {MANIFEST_FILENAME} in {cwd}",
            hint="run in a capsule or roster directory, or pass --roster PATH",
        )
        report["diagnostics"] = [nothing.to_json()]
        stderr.append(nothing)
        ok = False
    if manifest_path is not None:
        capsule, capsule_ok = _check_capsule(manifest_path, cwd, lines, stderr)
        report["capsule"] = capsule
        ok = ok and capsule_ok
    if isinstance(roster_arg, DiagnosticError):
        lines.append(f"roster: {args.roster}")
        lines.append(f"  ✗ {roster_arg.diagnostics[0].render().splitlines()[0]}")
        stderr.extend(roster_arg.diagnostics)
        report["roster"] = {"path": str(args.roster), "admitted": False,
                            "diagnostics": [d.to_json() for d in roster_arg.diagnostics]}
        ok = False
    elif roster_arg is not None:
        roster, roster_ok = _check_roster(roster_arg, cwd, lines, stderr)
        report["roster"] = roster
        ok = ok and roster_ok
    report["ok"] = ok
    host = detect(probe=True)  # the teardown class (spec/session.md "Containment")
    lines.append(host.doctor_line())
    lines.extend(host.doctor_notes())
    report["teardown"] = {"class": host.name, "detail": host.why, "favordynmods": host.dynmods}
    from murmur.sandbox.host import probe

    support = probe()
    lines.extend(support.doctor_lines())
    report["sandbox"] = {"best": support.best().value, "landlock_abi": support.landlock_abi,
                         "seccomp": support.seccomp, "userns": support.userns, "mountns": support.mountns,
                         "missing": list(support.notes)}
    capsule_info = report.get("capsule")
    if isinstance(capsule_info, dict) and capsule_info.get("achieved"):
        lines.append(f"sandbox: capsule {capsule_info.get('name')} runs at {capsule_info['achieved']}"
                     + (f" ({capsule_info['class_source']})" if capsule_info.get("class_source") else "")
                     + f": {capsule_info.get('class_meaning', '')}")
    problem = force_problem(os.environ)
    if problem is not None:
        bad = error("E-RUN-011", problem, hint="unset it to let the host decide, or set MURMUR_CONTAINMENT=groups")
        lines.append(f"  ✗ {bad.render().splitlines()[0]}")
        stderr.append(bad)
        report["diagnostics"] = [*report["diagnostics"], bad.to_json()]  # type: ignore[misc]
        report["ok"] = ok = False

    if args.json:
        print(json.dumps(report), flush=True)
    else:
        if lines:
            print("\n".join(lines), flush=True)
        for d in stderr:
            print(d.render(), file=sys.stderr, flush=True)
    return 0 if ok else 1


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _check_capsule(
    path: Path, cwd: Path, lines: list[str], stderr: list[Diagnostic]
) -> tuple[dict[str, object], bool]:
    from murmur.manifest import load_manifest

    shown = _shown(path, cwd)
    from murmur.registry.artifacts import manifest_text

    artifact = manifest_text(path.parent) if path.is_file() else None
    if artifact is not None:
        from murmur.cli.doctor_artifact import check_artifact

        return check_artifact(path, artifact, shown, lines, stderr)
    lines.append(f"capsule: {shown}")
    warnings: list[Diagnostic] = []
    try:
        manifest = load_manifest(path, env=os.environ, warnings=warnings)
    except DiagnosticError as exc:
        for d in exc.diagnostics:
            lines.append(f"  ✗ {d.render().splitlines()[0]}")
        stderr.extend(exc.diagnostics)
        return (
            {"path": shown, "ok": False, "diagnostics": [d.to_json() for d in exc.diagnostics]},
            False,
        )
    from murmur.assembly import mur_version_warning

    door = "authenticated door" if manifest.authentication is not None else "public door"
    peers = "serves peers" if manifest.accepts_peer_tasks else "refuses peers"
    from murmur.components.netpolicy import narrowing_warnings

    warnings.extend(narrowing_warnings(manifest, path=shown))
    version_warning = mur_version_warning(manifest)
    if version_warning is not None:
        warnings.append(version_warning)
    for w in warnings:
        lines.append(f"  ⚠ {w.render().splitlines()[0]}")
    faults = run_faults(path.parent, manifest, os.environ)
    if faults:
        for d in faults:
            lines.append(f"  ✗ {d.render().splitlines()[0]}")
            if d.hint:
                lines.append(f"    Fix: {d.hint}")
        stderr.extend(faults)
        return (
            {"path": shown, "ok": False, "name": manifest.name, "version": manifest.version,
             "diagnostics": [d.to_json() for d in faults],
             "warnings": [w.to_json() for w in warnings]},
            False,
        )
    lines.append(f"  ✓ {manifest.name} {manifest.version} {peers} {door}")
    from murmur.sandbox.classes import class_source, meaning, resolve_class

    klass = resolve_class(manifest.capabilities.containment, None, os.environ)
    achieved = klass.value
    source = class_source(manifest.capabilities.containment, None, os.environ)
    from murmur.cli.doctor_artifact import capsule_components

    component_lines, components = capsule_components(manifest)
    lines.extend(component_lines)
    return (
        {
            "path": shown,
            "ok": True,
            "achieved": achieved,
            "class_source": source[0] if source else None,
            "class_meaning": meaning(klass),
            "components": components,
            "name": manifest.name,
            "version": manifest.version,
            "serves_peers": manifest.accepts_peer_tasks,
            "authenticated": manifest.authentication is not None,
            "diagnostics": [],
            "warnings": [w.to_json() for w in warnings],
        },
        True,
    )


def _check_roster(
    path: Path, cwd: Path, lines: list[str], stderr: list[Diagnostic]
) -> tuple[dict[str, object], bool]:
    shown = _shown(path, cwd)
    lines.append(f"roster: {shown}")
    try:
        admitted = admit_file(path, display=shown)
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        lines.append(f"  ✗ {first.render().splitlines()[0]}")
        stderr.extend(exc.diagnostics)
        return (
            {"path": shown, "admitted": False,
             "diagnostics": [d.to_json() for d in exc.diagnostics]},
            False,
        )
    lines.extend(member_lines(admitted))
    faults = member_plan_faults(admitted)
    for name, diagnostics in faults:
        for d in diagnostics:
            lines.append(f"  ✗ {name}: {d.render().splitlines()[0]}")
            stderr.append(d)
    lines.append(f"  {reachability_line(admitted)}")
    for overflow in admitted.overflows:
        lines.append(f"  ⚠ {overflow.warning().render()}")
        lines.append(f"    Fix: {overflow.fix()}")
    report = roster_json(admitted, shown)
    if faults:
        k = len(faults)
        lines.append(f"  ✗ admitted, but {k} member plan{'s' if k != 1 else ''} "
                     "would be refused by `mur run`")
        report["diagnostics"] = [d.to_json() for _, ds in faults for d in ds]
        return (report, False)
    n, e = len(admitted.members), len(admitted.edges)
    lines.append(
        f"  ✓ admitted: {n} member{'s' if n != 1 else ''}, {e} edge{'s' if e != 1 else ''}"
    )
    return (report, True)


def run_faults(capsule_root: Path, manifest: Manifest, environ: Mapping[str, str]) -> list[Diagnostic]:
    """Every refusal ``mur run`` would give this capsule before its door opens.

    Args:
        capsule_root (Path): the directory holding ``murmur.yaml``.
        manifest (Manifest): the capsule's validated manifest.
        environ (Mapping[str, str]): the environment ``mur run`` would see (``PATH``, keys).

    Returns:
        list[Diagnostic]: the component refusals all together, else the first refusal of
        the containment check, then of the workload (plan faults are all listed); empty
        when ``mur run`` would start the capsule.
    """
    from murmur.assembly import check_containment, load_workload
    from murmur.manifest import unsupported

    missing = unsupported(manifest, root=capsule_root)
    if missing:
        return missing
    try:
        check_containment(manifest, None, environ)
        load_workload(manifest, capsule_root, environ)
    except DiagnosticError as exc:
        return list(exc.diagnostics)
    return []


def plan_faults(capsule_root: Path, manifest: Manifest) -> list[Diagnostic]:
    """Every diagnostic ``mur run`` would give for the capsule's plan (empty when it loads).

    Args:
        capsule_root (Path): the directory holding ``murmur.yaml`` and its plan file.
        manifest (Manifest): the capsule's validated manifest.
    """
    from murmur.registry import check_plan

    try:
        check_plan(capsule_root, manifest)
    except DiagnosticError as exc:
        return list(exc.diagnostics)
    return []


def member_plan_faults(admitted: AdmittedRoster) -> list[tuple[str, list[Diagnostic]]]:
    """``(member, diagnostics)`` for each member whose installed plan ``mur run`` would refuse.

    A member's plan is read from its installed root (``<entry>/root/`` beside the archive);
    members without an installed root on disk are skipped (admission already resolved them).
    """
    from murmur.registry import ROOT_DIR

    out: list[tuple[str, list[Diagnostic]]] = []
    for m in admitted.members:
        if m.archive is None or not (m.archive.parent / ROOT_DIR).is_dir():
            continue
        faults = plan_faults(m.archive.parent / ROOT_DIR, m.manifest)
        if faults:
            out.append((m.name, faults))
    return out


def member_line(admitted: AdmittedRoster, name: str) -> str:
    """``<name> <capsule>@<ver> [entry] serves peers|refuses peers authenticated door|public door``."""
    m = admitted.member(name)
    parts = [m.name, m.coordinate]
    if m.entry:
        parts.append("entry")
    parts.append("serves peers" if m.serves_peers else "refuses peers")
    parts.append("authenticated door" if m.authenticated else "public door")
    return " ".join(parts)


def member_lines(admitted: AdmittedRoster) -> list[str]:
    """One indented line per member, in roster order."""
    return [f"  {member_line(admitted, m.name)}" for m in admitted.members]


def reachability_line(admitted: AdmittedRoster) -> str:
    """``reachability: a → b, …`` (``reachability: none`` without edges)."""
    if not admitted.edges:
        return "reachability: none"
    return "reachability: " + ", ".join(f"{e.caller} → {e.callee}" for e in admitted.edges)


def roster_json(admitted: AdmittedRoster, shown: str) -> dict[str, object]:
    """The ``roster`` object of ``mur doctor --json``."""
    return {
        "path": shown,
        "admitted": True,
        "reachability": admitted.reachability.value,
        "members": [
            {
                "name": m.name,
                "capsule": m.capsule,
                "version": m.version,
                "sha256": m.sha256,
                "entry": m.entry,
                "serves_peers": m.serves_peers,
                "authenticated": m.authenticated,
                "callees": list(m.callees),
            }
            for m in admitted.members
        ],
        "edges": [{"from": e.caller, "to": e.callee} for e in admitted.edges],
        "warnings": [w.to_json() for w in admitted.warnings],
        "diagnostics": [],
    }


def run_escape(args: argparse.Namespace) -> int:
    """``mur doctor --escape [--class C] [--json]``: the escape-conformance harness (spec/containment.md).

    Returns:
        int: the harness's exit code (0 held, 1 harness failed, 2 host cannot back, 3 escape, 4 ceiling).
    """
    from murmur.escape import run_sync
    from murmur.manifest import Containment

    classes = [Containment(args.klass)] if args.klass else None
    if not args.json:
        print("escape: running real escape attempts (each beside its advisory control) ...",
              file=sys.stderr, flush=True)
    report = run_sync(classes)
    if args.json:
        print(json.dumps(report.to_json()), flush=True)
    else:
        print("\n".join(report.lines()), flush=True)
    return report.exit_code
