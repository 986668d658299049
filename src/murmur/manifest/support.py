"""What a valid manifest asks for that this runtime does not run: the component check.

Upstream murmur runs WASM and native components (tools, hooks, drivers, a capsule's own
``capsule.wasm``); this runtime runs a capsule's ``plan:`` or its ``inference:`` agent, with
three built-in drivers. A manifest that loads may still declare a component; :func:`unsupported`
names each one, so ``mur build``, ``mur doctor`` and ``mur run`` refuse the same capsules with
the same words instead of dropping a component without a word. Pure (manifest in,
diagnostics out) but for :func:`component_beside`, which lists a directory. Specification: ``spec/manifest.md`` ("What runs here").
"""

from __future__ import annotations

from pathlib import Path

from murmur.diagnostics import Diagnostic, error
from murmur.manifest.model import Manifest, Transport

BUILTIN_DRIVERS: tuple[str, ...] = ("murmur-driver-openai", "murmur-driver-anthropic", "murmur-driver-deepseek")
"""Driver artifact names this runtime provides itself (bare names; a scope prefix is allowed)."""

def is_builtin_driver(artifact: str) -> bool:
    """True for a built-in driver name, bare or scoped (``murmur/murmur-driver-openai``)."""
    return artifact.rsplit("/", 1)[-1] in BUILTIN_DRIVERS


def unsupported(manifest: Manifest, *, path: str | None = None, root: Path | None = None) -> list[Diagnostic]:
    """One diagnostic per component the manifest needs that this runtime does not run.

    * an ``inference.driver.artifact`` that is neither a built-in driver nor a declared
      ``driver`` entry (a WASM driver, installed with ``mur install``) → ``E-RUN-006``;
    * neither ``plan:`` nor ``inference:`` and no component of its own: none packed
      (``requires_files``) and, when ``root`` is given, none beside the manifest
      (:func:`component_beside`) → ``E-MAN-005``.

    Args:
        manifest (Manifest): a loaded manifest.
        path (str | None): the manifest file the diagnostics name.
        root (Path | None): the capsule's directory (``mur run`` / ``mur doctor``), where a
            script capsule's component may sit unlisted; None: the manifest alone.
    """
    out: list[Diagnostic] = []
    inf = manifest.inference
    if inf is not None and inf.transport is Transport.HTTP and inf.driver is not None:
        declared = {a.name for a in manifest.artifacts if a.runtime == "driver"}
        if not is_builtin_driver(inf.driver.artifact) and inf.driver.artifact not in declared:
            out.append(_foreign_driver(inf.driver.artifact, path))
    if manifest.plan is None and inf is None and not _script_payload(manifest) and (
            root is None or component_beside(root) is None):
        out.append(error(
            "E-MAN-005",
            f"capsule `{manifest.name}` declares neither `plan:` nor `inference:`; upstream would "
            "run the capsule's own WASM component, and this one packs none",
            hint="add `plan: plan.yaml` with a plan file (spec/plan.md), an `inference:` block, or "
                 "the capsule's component as capsule.wasm beside the manifest",
            path=path))
    return out


def _foreign_driver(name: str, path: str | None) -> Diagnostic:
    return error(
        "E-RUN-006",
        f"the inference driver `{name}` is neither a built-in driver nor a declared driver "
        "artifact, which this runtime does not run",
        hint=f"use a built-in driver ({', '.join(BUILTIN_DRIVERS)}), or declare the WASM driver "
             f"as an `artifacts:` entry with `runtime: driver`", path=path)


def _script_payload(manifest: Manifest) -> bool:
    """True when the capsule packs its own component: ``capsule.wasm`` or one root ``*.wasm``
    (a script capsule, spec/components.md)."""
    files = list(manifest.requires_files or ())
    roots = [f for f in files if "/" not in f.removeprefix("./") and f.endswith(".wasm")]
    return "capsule.wasm" in files or len(roots) == 1


def component_beside(root: Path) -> str | None:
    """The script capsule component upstream's ``mur run`` finds in the capsule's directory
    when ``requires_files`` lists none: ``capsule.wasm``, else the one root ``*.wasm`` file
    (several, or none: None). Reads the directory listing only (spec/components.md)."""
    try:
        if (root / "capsule.wasm").is_file():
            return "capsule.wasm"
        roots = sorted(p.name for p in root.iterdir() if p.suffix == ".wasm" and p.is_file())
    except OSError:
        return None
    return roots[0] if len(roots) == 1 else None
