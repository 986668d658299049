"""Script capsules: a capsule whose work is its own component's ``murmur:capsule/run@0.1.0``.

A capsule with neither ``plan:`` nor ``inference:`` whose ``requires_files`` packs
``capsule.wasm`` (or exactly one root ``*.wasm``), or that has one beside its manifest, is a
script capsule (upstream's rule). Each
task runs the component's ``run()`` once, in a fresh store, with the workdir preopened, no
environment (upstream hands a script capsule only the inference variables, and it has no
``inference:``), and ``murmur:tool-registry/invoke`` answered by the capsule's tool and skill
artifacts (:mod:`murmur.agent.components`; each invocation is a ``tool_call`` record). The
task's answer is what the component wrote to stdout; a trap fails the task with its code.
Specification: ``spec/components.md`` ("What uses the host").
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import attrs

from murmur.agent.components import ComponentTool, load_component_tools
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import Manifest
from murmur.workload import TaskContext, TaskOutcome


def script_payload(manifest: Manifest, capsule_root: Path | None = None) -> str | None:
    """The capsule's own component, a path relative to its directory, or None: the
    ``capsule.wasm`` or one root ``*.wasm`` that ``requires_files`` packs, else (given
    ``capsule_root``) the one upstream's ``mur run`` finds beside the manifest
    (:func:`murmur.manifest.support.component_beside`)."""
    from murmur.manifest.support import component_beside
    from murmur.registry.artifacts import wasm_payload

    if manifest.plan or manifest.inference is not None:
        return None
    packed = wasm_payload(list(manifest.requires_files or ()))
    if packed is not None or capsule_root is None:
        return packed
    return component_beside(capsule_root)


class ScriptWorkload:
    """Runs tasks of a script capsule (see the module docstring).

    Raises:
        DiagnosticError: ``E-IO-003`` when the component is missing; ``E-CMP-*`` when this
        host cannot run it; the tool-resolution codes of :func:`load_component_tools`.
    """

    def __init__(self, manifest: Manifest, capsule_root: Path) -> None:
        from murmur.components.check import version_refusals
        from murmur.components.host import Component

        payload = script_payload(manifest, capsule_root)
        path = capsule_root / (payload or "capsule.wasm")
        if payload is None or not path.is_file():
            raise DiagnosticError(error("E-IO-003", f"the script capsule's component {path.name} is missing",
                                        path=str(path), hint="build the component and list it in `requires_files`"))
        data = path.read_bytes()
        refusals = version_refusals(data, "capsule", name=manifest.name)
        if refusals:
            raise DiagnosticError(refusals)
        self.component = Component(manifest.name, "capsule", data, hashlib.sha256(data).hexdigest())
        self.tools: dict[str, ComponentTool] = {t.name: t for t in load_component_tools(manifest, capsule_root)}
        self.manifest = manifest

    def tools_declared(self, services: object) -> tuple[str, ...]:
        return tuple(self.tools)

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Run ``capsule/run`` once; ``ok`` with its stdout, else ``failed`` with the fault."""
        from murmur.agent.components import call_component_tool
        from murmur.components.host import ComponentFault, Grant, Hooks, ToolResult, run_capsule
        from murmur.components.limits import limits_of

        out: list[str] = []

        async def invoke(name: str, data: str | None) -> ToolResult:
            tool = self.tools.get(name)
            if tool is None:
                raise ComponentFault(error("E-CMP-002", f"no tool `{name}` is installed for this capsule",
                                           hint="declare it in `artifacts:` and `mur install` it"))
            started = time.monotonic()
            text, is_error = await call_component_tool(tool, ctx, None, data or "")
            ctx.usage.tool_calls += 1
            ctx.trace.emit("tool_call", parent_id=ctx.task_event_id, task_id=ctx.task_id, turn=0,
                           tool_name=name, input_bytes=len((data or "").encode()),
                           output_bytes=len(text.encode()), duration_ms=int((time.monotonic() - started) * 1000),
                           status="error" if is_error else "ok")
            return ToolResult(status="failed" if is_error else "passed", data=text)

        from murmur.agent.components import formation_peers

        peers = formation_peers(ctx.services.callees)
        env = (("MURMUR_FORMATION_PEERS", peers),) if peers is not None else ()
        from murmur.agent.components import http_recorder, with_peers
        from murmur.components.outgoing_http import HttpPolicy

        grant = Grant(env=env, preopen=ctx.workdir, limits=limits_of(ctx.capsule_root))
        try:
            async with with_peers(ctx, HttpPolicy(ctx.manifest.network_allow)) as policy:  # the ceiling
                await run_capsule(self.component, attrs.evolve(grant, http=policy), hooks=Hooks(
                    invoke=invoke, log=out.append, on_http=http_recorder(ctx, ctx.manifest.name)))
        except ComponentFault as exc:
            message = f"{exc.diagnostic.code}: {exc.diagnostic.message}"
            ctx.trace.emit("task_failed", parent_id=ctx.task_event_id, task_id=ctx.task_id, turn=0,
                           cause="runtime_error", reason=message)
            return TaskOutcome("failed", message)
        return TaskOutcome("ok", "".join(out).strip())
