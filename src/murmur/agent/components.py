"""Artifact tools in the agent loop: WASM tools, native tools and skills (spec/components.md).

At launch (:func:`load_component_tools`) every ``artifacts[]`` entry of runtime ``tool`` or
``skill`` is resolved (the project store, then the global store; a skill may come from its
``source:``), its component is checked against the host's interface versions (refused before
anything runs), and it becomes one :class:`ComponentTool`. The model sees each as a tool:
its name, its manifest ``description`` (a skill: else the first non-empty line of
``skill.md``) and its ``input_schema`` (or an empty object schema). A skill named by
``inference.system_prompt_artifact`` is not a tool: it is read once as the system prompt
(:func:`system_prompt_skill`).

A call (:func:`call_component_tool`) hands the model's input JSON to the tool as
``tool-input.data`` and returns what the model reads: the result's ``data``, else ``summary``,
else "tool returned no data", fenced; a status other than ``passed`` marks it an error. The
dispatcher writes the call's ``tool_call`` record; skills also write ``skill_call``.

* **WASM**: through :mod:`murmur.components.host` (a fresh store, the workdir or the
  entry's ``filesystem.scope`` preopened, the identity environment, limits).
* **Native**: ``<root>/bin/<name>`` started by :func:`start_native` (the shell machinery:
  its own process group and containment, cleared environment, ``HOME=<workdir>/.capsule-home``,
  no ``MURMUR_*``), stdin ``{"data", "log_path"}``; stdout JSON with upstream's fallbacks.
* **Skill**: returns ``skill.md`` (status passed, summary "Skill <name> guidance").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from murmur.agent.fence import fence
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import Manifest
from murmur.manifest.artifact import EMPTY_SCHEMA, ArtifactManifest
from murmur.manifest.model import ArtifactRef
from murmur.workload import TaskContext

if TYPE_CHECKING:
    from murmur.agent.transports.wasm import WasmDriver
    from murmur.components.limits import Limits
    from murmur.components.outgoing_http import HttpPolicy

CAPSULE_HOME = ".capsule-home"
"""The native tool's ``HOME``, inside the workdir."""


@attrs.frozen
class ComponentTool:
    """One artifact offered as a tool.

    Attributes:
        name (str): the artifact's name (the tool's murmur name).
        kind (str): ``wasm`` | ``native`` | ``skill``.
        description (str): what the model is told.
        parameters (dict): the tool's input JSON Schema.
        root (Path): the installed (or local) artifact directory.
        entry (ArtifactRef): the capsule's ``artifacts[]`` entry (its grants).
        payload (str | None): the component or binary, relative to ``root``.
    """

    name: str
    kind: str
    description: str
    parameters: dict[str, object]
    root: Path
    entry: ArtifactRef
    payload: str | None = None
    sha256: str = ""


def _skill_file(source: Path) -> Path | None:
    if source.is_file():
        return source
    if source.is_dir():
        return next((p for p in sorted(source.iterdir()) if p.name.lower() == "skill.md"), None)
    return None


def _first_line(text: str) -> str:
    return next((ln.strip().lstrip("#").strip() for ln in text.splitlines() if ln.strip()), "")


def _resolve(entry: ArtifactRef, capsule_root: Path) -> tuple[ArtifactManifest | None, Path]:
    """(artifact manifest or None for a local skill file, its root directory)."""
    local = entry.local_source if entry.local_source is not None else entry.runtime == "skill"
    if entry.source and local:
        source = (capsule_root / entry.source).resolve() if not Path(entry.source).is_absolute() else Path(entry.source)
        if not source.exists():
            raise DiagnosticError(error("E-IO-001", f"skill source path not found: {source}",
                                        hint=f"fix `source:` of artifact `{entry.name}`"))
        skill = _skill_file(source)
        if skill is None:
            raise DiagnosticError(error("E-IO-001", f"skill source directory '{source}' contains no skill.md",
                                        hint="add a skill.md"))
        return None, skill.parent if source.is_dir() else source.parent
    from murmur.registry.artifacts import resolve_artifact

    installed = resolve_artifact(entry.name, entry.version or "", project_dir=None)
    return installed.manifest, installed.root


def load_component_tools(manifest: Manifest, capsule_root: Path) -> tuple[ComponentTool, ...]:
    """The tool and skill artifacts of ``manifest``, resolved and checked (launch time).

    Raises:
        DiagnosticError: ``E-REG-001`` (not installed), ``E-REG-002``, ``E-IO-001`` (a local
        skill source), ``E-CMP-001``/``E-CMP-002``/``E-CMP-004`` (a component this host
        cannot run), ``E-IO-003`` (a payload missing from the installed artifact).
    """
    from murmur.components.check import version_refusals
    from murmur.registry.artifacts import wasm_payload

    bound = manifest.inference.system_prompt_artifact if manifest.inference else None
    out: list[ComponentTool] = []
    for entry in manifest.artifacts:
        if entry.runtime not in ("tool", "skill") or entry.name == bound:
            continue
        art, root = _resolve(entry, capsule_root)
        if art is None or (art.execution == "static" and art.runtime == "skill"):
            skill = _skill_file(root / "skill.md") or _skill_file(root)
            text = skill.read_text(encoding="utf-8", errors="replace") if skill else ""
            desc = (art.description if art and art.description else None) or _first_line(text) or entry.name
            out.append(ComponentTool(entry.name, "skill", desc, dict(EMPTY_SCHEMA), root, entry,
                                     skill.name if skill else None))
            continue
        desc = art.description or f"the {art.name} tool"
        if art.execution == "native":
            payload = next((f for f in art.requires_files if f.startswith("bin/")), f"bin/{art.name}")
            if not (root / payload).is_file():
                raise DiagnosticError(error("E-IO-003", f"native tool `{art.name}` has no {payload}",
                                            hint="rebuild the artifact with its binary in `requires_files`"))
            out.append(ComponentTool(entry.name, "native", desc, art.parameters, root, entry, payload))
            continue
        payload = wasm_payload(list(art.requires_files)) or ""
        data = (root / payload).read_bytes() if payload and (root / payload).is_file() else b""
        refusals = version_refusals(data, "tool", name=art.name)
        if refusals:
            raise DiagnosticError(refusals)
        out.append(ComponentTool(entry.name, "wasm", desc, art.parameters, root, entry, payload,
                                 hashlib.sha256(data).hexdigest()))
    return tuple(out)


def system_prompt_skill(manifest: Manifest, capsule_root: Path) -> str | None:
    """The text of the skill ``inference.system_prompt_artifact`` names (None: none named).

    Raises:
        DiagnosticError: ``E-MAN-003`` when the named entry is missing or not a prompt payload;
        resolution codes as :func:`load_component_tools`.
    """
    name = manifest.inference.system_prompt_artifact if manifest.inference else None
    if name is None:
        return None
    entry = next((a for a in manifest.artifacts if a.name == name), None)
    payload = entry is not None and (entry.prompt_payload if entry.prompt_payload is not None
                                     else entry.runtime == "skill")
    if entry is None or not payload:
        raise DiagnosticError(error(
            "E-MAN-003", f"`inference.system_prompt_artifact` names `{name}`, which is not a prompt payload "
            "among `artifacts`", hint="declare it as a `runtime: skill` entry (or set `prompt_payload: true`)"))
    _, root = _resolve(entry, capsule_root)
    skill = _skill_file(root / "skill.md") or _skill_file(root)
    if skill is None:
        raise DiagnosticError(error("E-IO-003", f"skill `{name}` has no skill.md", hint="reinstall it"))
    return skill.read_text(encoding="utf-8", errors="replace")


def component_env(ctx: TaskContext) -> tuple[tuple[str, str], ...]:
    """The WASI environment of a tool or driver in an agent capsule: the identity variables
    (no provider key; the host environment is never inherited) and, in a formation member that
    may call others, ``MURMUR_FORMATION_PEERS``."""
    m = ctx.manifest
    pairs = [("MURMUR_CAPSULE_NAME", m.name), ("MURMUR_CAPSULE_VERSION", m.version),
             ("MURMUR_SESSION_ID", ctx.session_id)]
    inf = m.inference
    if inf is not None:
        pairs.append(("MURMUR_INFERENCE_TRANSPORT", inf.transport.value))
        if inf.endpoint:
            pairs.append(("MURMUR_INFERENCE_ENDPOINT", inf.endpoint))
        if inf.model:
            pairs.append(("MURMUR_INFERENCE_MODEL", inf.model))
        if inf.driver:
            pairs.append(("MURMUR_INFERENCE_DRIVER", inf.driver.artifact))
    peers = formation_peers(ctx.services.callees)
    if peers is not None:
        pairs.append(("MURMUR_FORMATION_PEERS", peers))
    return tuple(pairs)


def hook_env(ctx: TaskContext) -> tuple[tuple[str, str], ...]:
    """A hook's WASI environment, as upstream's: ``MURMUR_OTEL_ENDPOINT`` (the manifest's
    ``observability.otel_endpoint``) and ``MURMUR_FORMATION_ID`` when set, and
    ``MURMUR_FORMATION_PEERS`` in a member that may call others; never the identity variables
    (spec/components.md "What uses the host")."""
    obs = ctx.manifest.observability
    pairs = [("MURMUR_OTEL_ENDPOINT", obs.otel_endpoint)] if obs is not None and obs.otel_endpoint else []
    if ctx.formation_id:
        pairs.append(("MURMUR_FORMATION_ID", ctx.formation_id))
    peers = formation_peers(ctx.services.callees)
    if peers is not None:
        pairs.append(("MURMUR_FORMATION_PEERS", peers))
    return tuple(pairs)


def formation_peers(callees: Sequence[str]) -> str | None:
    """``MURMUR_FORMATION_PEERS``: ``name=http://<name>.formation.invalid`` per member this
    member may call, space-separated in roster order; None (the variable absent, never empty)
    when it may call nobody (spec/components.md, "Formation peers")."""
    if not callees:
        return None
    return " ".join(f"{name}=http://{name}.formation.invalid" for name in callees)


def http_policy(ctx: TaskContext, entry: ArtifactRef) -> HttpPolicy:
    """The component's effective ``network.allow`` (its narrowing clamped by the ceiling)."""
    from murmur.components.netpolicy import entry_allow
    from murmur.components.outgoing_http import HttpPolicy

    return HttpPolicy(entry_allow(ctx.manifest, entry)[0])


@asynccontextmanager
async def peer_policy(ctx: TaskContext, entry: ArtifactRef) -> AsyncIterator[Any]:
    """The component's HTTP policy for one call; in a member that may call others, with a
    relay per callee for its virtual addresses (closed when the call ends)."""
    async with with_peers(ctx, http_policy(ctx, entry)) as policy:
        yield policy


@asynccontextmanager
async def with_peers(ctx: TaskContext, policy: HttpPolicy) -> AsyncIterator[Any]:
    """``policy`` with a relay per callee for virtual addresses (in a member that may call
    others; closed when the block ends)."""
    from murmur.components.peers import PeerAccess, relays

    route = ctx.services.peer_route
    if not ctx.services.callees or route is None:
        yield policy
        return

    async def door(name: str) -> str | None:
        found = await route(name)
        return found[0] if found is not None else None

    def resolve(name: str) -> str | None:
        import trio

        try:
            return trio.from_thread.run(door, name)  # from the component's worker thread
        except (trio.Cancelled, trio.RunFinishedError):
            return None

    async with relays(ctx.services.callees, route) as by_name:
        yield attrs.evolve(policy, peers=PeerAccess(by_name, resolve))


def http_recorder(ctx: TaskContext, name: str) -> Callable[[Any], None]:
    """Where a component's outgoing-HTTP decisions go: one trace record each, written from the
    worker thread before the request is refused or sent (``component_http``)."""

    import functools

    import trio

    def record(decision: Any) -> None:
        emit = functools.partial(ctx.trace.emit, "component_http", parent_id=ctx.task_event_id,
                                 task_id=ctx.task_id, component=name, url=decision.url,
                                 allowed=decision.allowed, reason=decision.reason)
        try:
            trio.from_thread.run_sync(emit)  # on the Trio thread, as every trace record
        except RuntimeError:
            emit()  # not in a Trio worker thread (a direct, synchronous call)

    return record


def preopen_for(entry: ArtifactRef, workdir: Path) -> Path:
    """The workdir, or ``<workdir>/<scope>`` when the entry narrows it (checked at load)."""
    caps = entry.capabilities
    scope = caps.filesystem.scope if caps and caps.filesystem else None
    return workdir if scope in (None, ".") else workdir / str(scope)


async def call_component_tool(tool: ComponentTool, ctx: TaskContext,
                              arguments: Mapping[str, object] | None, raw: str | None) -> tuple[str, bool]:
    """Run one call of ``tool``; (what the model reads, is_error)."""
    data = raw if raw is not None else json.dumps(dict(arguments or {}), separators=(",", ":"))
    if tool.kind == "skill":
        text = (tool.root / tool.payload).read_text(encoding="utf-8", errors="replace") if tool.payload else ""
        ctx.trace.emit("skill_call", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                       skill=tool.name, summary=f"Skill {tool.name} guidance", bytes=len(text.encode()))
        return fence(text, f"tool:{tool.name}"), False
    if tool.kind == "native":
        status, summary, out = await start_native(tool, ctx, data)
    else:
        status, summary, out = await _wasm(tool, ctx, data)
    text = out if out is not None else (summary or "tool returned no data")
    return fence(text, f"tool:{tool.name}"), status != "passed"


async def _wasm(tool: ComponentTool, ctx: TaskContext, data: str) -> tuple[str, str | None, str | None]:
    from murmur.components.host import Component, ComponentFault, Grant, Hooks, call_tool

    assert tool.payload is not None
    comp = Component(tool.name, "tool", (tool.root / tool.payload).read_bytes(), tool.sha256)
    chunks: list[int] = []
    grant = Grant(env=component_env(ctx), preopen=preopen_for(tool.entry, ctx.workdir),
                  limits=_limits(ctx), http=http_policy(ctx, tool.entry))
    # chunks go to the task's A2A stream (TaskServices.emit_chunk); request-input asks the
    # task's user through TaskContext.request_input (spec/conversations.md), where one can answer
    emit = ctx.services.emit_chunk
    ask = ctx.request_input if ctx.ask is not None else None

    def on_chunk(text: str, thinking: bool) -> None:
        chunks.append(len(text))
        if emit is not None:
            emit(text, thinking, tool.name)

    try:
        async with peer_policy(ctx, tool.entry) as policy:
            result = await call_tool(comp, attrs.evolve(grant, http=policy), data, hooks=Hooks(
                on_chunk=on_chunk, request_input=ask, on_http=http_recorder(ctx, tool.name)))
    except ComponentFault as exc:
        ctx.trace.emit("component_fault", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                       component=tool.name, code=exc.diagnostic.code, reason=exc.diagnostic.message)
        return "error", f"{exc.diagnostic.code}: {exc.diagnostic.message}", None
    if chunks:
        ctx.trace.emit("component_chunks", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                       component=tool.name, chunks=len(chunks), bytes=sum(chunks))
    return result.status, result.summary, result.data


def _limits(ctx: TaskContext) -> Limits:
    from murmur.components.limits import limits_of

    return limits_of(ctx.capsule_root)


async def start_native(tool: ComponentTool, ctx: TaskContext, data: str) -> tuple[str, str | None, str | None]:
    """Start a native tool and read its answer: the one place a native tool's process starts
    (through :func:`murmur.shell.run_shell`: own process group, containment, captured output).

    Returns:
        (status, summary, data) with upstream's fallbacks: empty stdout → status from the exit
        code, summary "native tool '<n>' exited with <status>", data = stderr; non-JSON stdout →
        status from the exit code, summary "native tool '<n>' completed", data = stdout.
    """
    from murmur.shell import ShellRefused, run_shell

    assert tool.payload is not None
    binary = Path(tool.payload).name
    home = ctx.workdir / CAPSULE_HOME
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in ctx.shell_env.items() if not k.startswith("MURMUR_")}
    env["PATH"] = f"{(tool.root / tool.payload).parent}:{env.get('PATH', '')}".rstrip(":")
    env["HOME"] = env["USERPROFILE"] = str(home)
    stdin = json.dumps({"data": data, "log_path": None}).encode()
    try:
        res = await run_shell([binary], allow=[binary], cwd=ctx.workdir, env=env, stdin=stdin)
    except ShellRefused as exc:
        return "error", f"native tool '{tool.name}' could not start: {exc}", None
    by_exit = "passed" if res.exit_code == 0 else "failed"
    out = res.stdout_text.strip()
    if not out:
        return by_exit, f"native tool '{tool.name}' exited with {res.exit_code}", res.stderr_text
    try:
        reply = json.loads(out)
    except ValueError:
        return by_exit, f"native tool '{tool.name}' completed", res.stdout_text
    if not isinstance(reply, dict):
        return by_exit, f"native tool '{tool.name}' completed", res.stdout_text
    status = reply.get("status")
    status = status if status in ("passed", "failed") else "error"
    body = reply.get("data")
    body = body if body is None or isinstance(body, str) else json.dumps(body)
    summary = reply.get("summary")
    return status, summary if isinstance(summary, str) else None, body


def load_driver(manifest: Manifest, capsule_root: Path) -> object:
    """The WASM driver ``inference.driver.artifact`` names, resolved and checked (launch time).

    Returns:
        murmur.components.host.Component: the driver (role ``driver``).

    Raises:
        DiagnosticError: as :func:`load_component_tools` (``E-REG-001``, ``E-CMP-*``).
    """
    from murmur.components.check import version_refusals
    from murmur.components.host import Component
    from murmur.registry.artifacts import resolve_artifact, wasm_payload

    entry = manifest.driver_entry
    assert entry is not None
    art = resolve_artifact(entry.name, entry.version or "", project_dir=None)
    payload = wasm_payload(list(art.manifest.requires_files))
    data = (art.root / payload).read_bytes() if payload and (art.root / payload).is_file() else b""
    refusals = version_refusals(data, "driver", name=entry.name)
    if refusals:
        raise DiagnosticError(refusals)
    return Component(entry.name, "driver", data, hashlib.sha256(data).hexdigest())


def driver_transport(component: object, ctx: TaskContext, config: object) -> WasmDriver:
    """The task's :class:`murmur.agent.transports.wasm.WasmDriver` (the entry's grants)."""
    from murmur.components.host import Grant

    entry = ctx.manifest.driver_entry
    assert entry is not None
    grant = Grant(env=component_env(ctx), preopen=preopen_for(entry, ctx.workdir), limits=_limits(ctx),
                  http=http_policy(ctx, entry))
    import functools

    from murmur.agent.transports.wasm import WasmDriver

    emit = ctx.services.emit_chunk
    return WasmDriver(component, grant, str(getattr(config, "model", "") or ""),
                      int(getattr(config, "max_tokens", 8192)),
                      policy=functools.partial(peer_policy, ctx, entry),
                      on_http=http_recorder(ctx, entry.name),
                      on_chunk=(lambda text, thinking: emit(text, thinking, entry.name)) if emit else None)


def load_hooks(manifest: Manifest, capsule_root: Path) -> tuple[tuple[ArtifactRef, object, object], ...]:
    """The capsule's hook artifacts, resolved and checked at launch: ``(entry, component,
    contract)`` each (the contract from the hook's own manifest).

    Raises:
        DiagnosticError: ``E-REG-001``/``E-REG-002``; ``E-CMP-*`` for a component this host
        cannot run as a hook.
    """
    from murmur.components.check import version_refusals
    from murmur.components.host import Component
    from murmur.manifest.artifact import HookContract
    from murmur.registry.artifacts import resolve_artifact, wasm_payload

    out: list[tuple[ArtifactRef, object, object]] = []
    for entry in manifest.artifacts:
        if entry.runtime != "hook":
            continue
        art = resolve_artifact(entry.name, entry.version or "", project_dir=None)
        payload = wasm_payload(list(art.manifest.requires_files))
        data = (art.root / payload).read_bytes() if payload and (art.root / payload).is_file() else b""
        refusals = version_refusals(data, "hook", name=entry.name)
        if refusals:
            raise DiagnosticError(refusals)
        out.append((entry, Component(entry.name, "hook", data, hashlib.sha256(data).hexdigest()),
                    art.manifest.hook or HookContract()))
    return tuple(out)


def hook_hosts(specs: Sequence[tuple[ArtifactRef, object, object]], ctx: TaskContext) -> list[object]:
    """A :class:`murmur.components.hooks.HookHost` per hook: no directory unless the entry's
    ``filesystem.scope`` grants one, only its own network grant, errors in ``logs/``."""
    from murmur.components.hooks import HookHost
    from murmur.components.host import Grant

    hosts: list[object] = []
    for entry, component, contract in specs:
        caps = entry.capabilities
        scope = caps.filesystem.scope if caps and caps.filesystem else None
        grant = Grant(env=hook_env(ctx), preopen=(ctx.workdir / scope) if scope else None,
                      limits=_limits(ctx), http=http_policy(ctx, entry))
        hosts.append(HookHost(component, contract, grant, ctx.records_dir / "logs"))  # type: ignore[arg-type]
    return hosts
