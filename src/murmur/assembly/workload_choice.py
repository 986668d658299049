"""Choosing a session's workload from its manifest (spec/session.md "Workloads").

``plan:`` → :class:`murmur.plan.PlanWorkload` over the validated plan file; ``inference:`` →
the agent loop (:func:`murmur.agent.make_agent_workload`). Each is imported only when the
manifest needs it, so a plan session never loads the agent side (nor the reverse).
A manifest with neither, or one that declares a component this runtime does not run, is
refused first (:func:`murmur.manifest.support.unsupported`: ``E-MAN-005``, ``E-RUN-006``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import Manifest, unsupported
from murmur.workload import Workload


def workload_kind(manifest: Manifest) -> str:
    """``plan`` or ``agent`` (the ``task_canceled.phase`` and ``session_start.workload``)."""
    return "plan" if manifest.plan else "agent"


def load_workload(
    manifest: Manifest,
    capsule_root: Path,
    environ: Mapping[str, str],
    *,
    system_prompt_override: str | None = None,
) -> Workload:
    """Build the workload the manifest declares.

    Args:
        manifest (Manifest): the capsule's manifest.
        capsule_root (Path): the directory holding the capsule's files.
        environ (Mapping[str, str]): the session's environment (agent credentials).
        system_prompt_override (str | None): ``mur run --system-prompt`` (agent capsules;
            a plan capsule refuses it with ``E-CLI-001``).

    Raises:
        DiagnosticError: the plan file is refused (``E-PLN-*``), the inference block is
            (``E-MAN-003``/``E-RUN-005``/``E-RUN-006``/``E-RUN-009``), or the manifest declares
            a component this runtime does not run, or no workload (``E-MAN-005``/``E-RUN-006``).
    """
    refusals = unsupported(manifest, root=capsule_root)
    if refusals:
        raise DiagnosticError(refusals)
    if manifest.plan and system_prompt_override is not None:
        raise DiagnosticError(error(
            "E-CLI-001", "--system-prompt applies to agent capsules; this capsule runs a plan",
            hint="remove --system-prompt"))
    if manifest.plan:
        from murmur.plan import PlanWorkload, load_plan  # only a plan capsule loads the plan side

        return PlanWorkload(load_plan(capsule_root, manifest), capsule_root)
    if manifest.inference is not None:
        from murmur.agent import make_agent_workload  # only an agent capsule loads the agent side

        return make_agent_workload(manifest, capsule_root, environ=environ,
                                   system_prompt_override=system_prompt_override)
    from murmur.agent.script import (  # a script capsule (spec/components.md)
        ScriptWorkload,
        script_payload,
    )

    if script_payload(manifest, capsule_root) is not None:
        return ScriptWorkload(manifest, capsule_root)
    raise DiagnosticError(
        error(
            "E-RUN-005",
            f"capsule {manifest.name} declares no workload: neither `plan:` nor `inference:`",
            hint="add `plan: plan.yaml` with a plan file (spec/plan.md), or an `inference:` block",
        )
    )
