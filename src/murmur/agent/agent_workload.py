"""The agent workload: what a session runs for a capsule with an ``inference`` block.

:class:`AgentWorkload` implements :class:`murmur.workload.Workload`. Built once per
session (:func:`make_agent_workload` checks the ``inference`` block and refuses the launch
with a coded diagnostic), it runs each task:

* ``transport: http`` — resolves the provider key from the capsule process's environment
  (now, at inference time, never earlier), opens an HTTP client for the task, picks the
  built-in driver and runs the :class:`~murmur.agent.loop.TaskLoop` (a session with capsule
  links gets the ``mur context`` text after its system prompt, spec/links.md);
* ``transport: process`` — runs the agent CLI once
  (:func:`~murmur.agent.transports.stdio.run_stdio_task`).

Design: spec/agent.md.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from murmur.agent.compaction import estimate_tokens
from murmur.agent.config import AgentConfig, agent_config
from murmur.agent.dispatch import ShellFn, ToolDispatcher
from murmur.agent.harness.choose import STDIO, protocol_for
from murmur.agent.loop import TaskLoop, initial_text
from murmur.agent.thread import Conversations
from murmur.agent.tools import Inventory, build_inventory
from murmur.agent.transports import (
    AssistantTurn,
    InferenceError,
    InferenceRequest,
    InferenceResult,
    Item,
    Transport,
    UserText,
)
from murmur.agent.transports.anthropic import DEFAULT_VERSION, AnthropicDriver
from murmur.agent.transports.http import (
    GATEWAY_PLACEHOLDER,
    REQUEST_TIMEOUT,
    RetryPolicy,
    resolve_api_key,
    via_gateway,
)
from murmur.agent.transports.openai import OpenAIDriver
from murmur.agent.transports.process import run_harness_task
from murmur.agent.transports.stdio import run_stdio_task
from murmur.manifest import Manifest
from murmur.shell import run_shell
from murmur.workload import TaskContext, TaskOutcome, TaskServices, context_for_prompt, with_context

__all__ = ["AgentWorkload", "make_agent_workload", "make_transport"]


def make_transport(
    config: AgentConfig,
    client: httpx.AsyncClient,
    api_key: str | None,
    *,
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]],
) -> Transport:
    """The built-in driver for ``config`` (``openai`` or ``anthropic``)."""
    assert config.endpoint is not None and config.model is not None
    if config.driver == "anthropic":
        version = config.driver_config.get("anthropic_version", DEFAULT_VERSION)
        return AnthropicDriver(
            client=client,
            endpoint=config.endpoint,
            model=config.model,
            max_tokens=config.max_tokens,
            api_key=api_key,
            key_name=config.key_name,
            version=str(version),
            policy=policy,
            sleep=sleep,
        )
    field = config.driver_config.get("token_limit_field", "max_tokens")
    return OpenAIDriver(
        client=client,
        endpoint=config.endpoint,
        model=config.model,
        max_tokens=config.max_tokens,
        api_key=api_key,
        key_name=config.key_name,
        token_field="max_completion_tokens" if field == "max_completion_tokens" else "max_tokens",
        policy=policy,
        sleep=sleep,
    )


class AgentWorkload:
    """Runs tasks of an agent capsule.

    Construction checks the ``inference`` block (the launch is refused on a problem); the
    provider key is not read until a task runs.

    Args:
        manifest (Manifest): the capsule's manifest (with an ``inference`` block).
        capsule_root (Path): the capsule's directory (``system_prompt_file`` is relative to it).
        environ (Mapping[str, str] | None): where the provider key is read at inference time
            and whose ``PATH`` finds a process command (default: the live ``os.environ``).
        system_prompt_override (str | None): ``mur run --system-prompt``.
        policy (RetryPolicy | None): retry bounds for 429 / 5xx (default :class:`RetryPolicy`).
        sleep: the backoff waiting function (tests record the waits).
        shell (ShellFn): the shell runner for shell tools and the process transport.

    Raises:
        DiagnosticError: ``E-MAN-003``, ``E-RUN-005``, ``E-RUN-006``, ``E-RUN-009``
            (see :func:`murmur.agent.config.agent_config`).
    """

    def __init__(
        self,
        manifest: Manifest,
        capsule_root: Path,
        *,
        environ: Mapping[str, str] | None = None,
        system_prompt_override: str | None = None,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = trio.sleep,
        shell: ShellFn = run_shell,
    ) -> None:
        self.manifest = manifest
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.config: AgentConfig = agent_config(
            manifest,
            capsule_root,
            environ=self.environ,
            system_prompt_override=system_prompt_override,
        )
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.shell = shell
        self.conversations = Conversations()
        from murmur.agent.components import load_component_tools, system_prompt_skill

        self.components = {t.name: t for t in load_component_tools(manifest, capsule_root)}
        self._hooks: list[object] | None = None
        from murmur.agent.components import load_hooks

        self.hook_specs = load_hooks(manifest, capsule_root)
        self.session_hooks = None
        self._compacted: set[str] = set()
        self._compaction_prompt = _compaction_prompt(manifest, capsule_root)
        if self.hook_specs:
            from murmur.agent.lifecycle import SessionHooks

            self.session_hooks = SessionHooks(self)
        self.driver_component = None
        if self.config.driver == "wasm":
            from murmur.agent.components import load_driver

            self.driver_component = load_driver(manifest, capsule_root)
        skill_prompt = system_prompt_skill(manifest, capsule_root) if system_prompt_override is None else None
        if skill_prompt is not None:
            self.config = attrs.evolve(self.config, system_prompt=skill_prompt)

    def use_conversations(self, conversations: Conversations) -> None:
        """Load and record contexts as ``conversations`` says (set at launch by the
        composition root; spec/conversations.md). Inert under ``transport: process``."""
        self.conversations = conversations

    def forget_session(self, context_id: str) -> str | None:
        """Drop ``context_id``'s agent CLI session (``x-murmur-forget-session``); returns the
        dropped session id, None when none was mapped."""
        harness = self.conversations.harness
        return harness.forget(context_id) if harness is not None else None

    def _inventory(self, manifest: Manifest, services: TaskServices) -> Inventory:
        extra = [(t.name, t.description, t.parameters) for t in self.components.values()]
        return build_inventory(manifest, services, extra)

    @property
    def has_compaction_hook(self) -> bool:
        """Whether a hook can receive ``on-compaction`` (``--resume-mode compact`` needs one)."""
        from murmur.agent.hooked import has_compaction_hook

        return has_compaction_hook([contract for _, _, contract in self.hook_specs])

    def tools_declared(self, services: TaskServices) -> tuple[str, ...]:
        """Tool names a task is offered with ``services`` (for ``session_start.tools_declared``)."""
        return self._inventory(self.manifest, services).names

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Run one task (see :class:`murmur.workload.Workload`).

        Returns:
            TaskOutcome: ``ok`` | ``failed`` | ``max_turns_reached`` | ``spend_ceiling_reached`` | ``no_answer``.

        Raises:
            trio.Cancelled: the task was cancelled; nothing it started is left running.
        """
        if self.config.transport == "process" and self.config.protocol not in (None, STDIO):
            return await run_harness_task(
                ctx,
                self.config,
                protocol_for(self.config.protocol),
                task_text=initial_text(ctx),
                environ=self.environ,
                thread=self.conversations.harness_thread(ctx.context_id),
            )
        if self.config.transport == "process":
            return await run_stdio_task(
                ctx,
                self.config.command,
                task_text=initial_text(ctx),
                system_prompt=self.config.system_prompt,
                shell=self.shell,
            )
        try:
            config, api_key = self._keyed(self.config)
        except InferenceError as exc:
            ctx.trace.emit(
                "task_failed",
                parent_id=ctx.task_event_id,
                task_id=ctx.task_id,
                turn=0,
                cause=exc.cause,
                reason=exc.message,
            )
            return TaskOutcome("failed", exc.message)
        inventory = self._inventory(ctx.manifest, ctx.services)
        # under the tree's gateway, each call names its task for the call's record (spec/gateway.md)
        labels = {"x-murmur-task": ctx.task_id} if api_key == GATEWAY_PLACEHOLDER else {}
        async with httpx.AsyncClient(
            timeout=REQUEST_TIMEOUT, trust_env=False, follow_redirects=False, headers=labels
        ) as client:
            transport: Transport
            if self.driver_component is not None:
                from murmur.agent.components import driver_transport

                transport = driver_transport(self.driver_component, ctx, self.config)
            else:
                transport = make_transport(
                    config, client, api_key, policy=self.policy, sleep=self.sleep
                )
            hooks = self.hooks_for(ctx)
            if not hooks:
                return await self._loop(ctx, transport, inventory, api_key, ToolDispatcher(
                    ctx=ctx, inventory=inventory, shell=self.shell, components=self.components))
            return await self._hooked_task(ctx, transport, inventory, api_key, hooks)

    def _keyed(self, config: AgentConfig) -> tuple[AgentConfig, str | None]:
        """``config`` with its endpoint and the provider key it is called with (read now).

        Raises:
            InferenceError: the key cannot be resolved.
        """
        gatewayed = via_gateway(config.endpoint, self.environ) if config.endpoint else None
        if gatewayed is not None:
            # Under the tree's gateway the key stays with the gateway (spec/gateway.md).
            return attrs.evolve(config, endpoint=gatewayed), GATEWAY_PLACEHOLDER
        return config, resolve_api_key(config.api_key_ref, self.environ)

    async def infer_once(self, ctx: TaskContext, request: InferenceRequest, model: str | None) -> InferenceResult:
        """One inference call through the session's driver (a hook's ``run-inference``):
        ``model`` or the manifest's, ``max_tokens`` 8192, no tools, the driver's own grants.

        Raises:
            InferenceError: no driver (``transport: process``), the key, or the call failed.
        """
        if self.config.transport == "process":
            raise InferenceError("runtime_error", "no inference driver is available to this hook")
        config = attrs.evolve(self.config, model=model or self.config.model, max_tokens=8192)
        if self.driver_component is not None:
            from murmur.agent.components import driver_transport

            return await driver_transport(self.driver_component, ctx, config).infer(request)
        config, api_key = self._keyed(config)
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT, trust_env=False, follow_redirects=False) as client:
            return await make_transport(config, client, api_key, policy=self.policy, sleep=self.sleep).infer(request)

    def _loop(self, ctx: TaskContext, transport: Transport, inventory: Inventory, api_key: str | None,
              dispatcher: ToolDispatcher, history: tuple[Item, ...] | None = None,
              compactor: Any = None) -> Awaitable[TaskOutcome]:
        """The task's loop; a reopened task shares one turn budget (``max_turns`` in all)."""
        return TaskLoop(
            ctx=ctx,
            transport=transport,
            inventory=inventory,
            dispatcher=dispatcher,
            system=with_context(self.config.system_prompt, context_for_prompt(ctx)),
            max_turns=max(1, self.config.max_turns - ctx.usage.turns),
            budget_tokens=self.config.budget_tokens,
            secret=api_key,
            history=self.conversations.history(ctx.context_id) if history is None else history,
            record=self.conversations.recorder(ctx.context_id, ctx.task_id),
            compactor=compactor,
        ).run()

    def hooks_for(self, ctx: TaskContext) -> list[object]:
        """The session's hook hosts, made once (at session start, else at the first task, from
        ``ctx``), each with its ``run-inference`` answered by :meth:`infer_once`."""
        if self._hooks is None:
            from murmur.agent.components import hook_hosts
            from murmur.agent.hook_inference import seam

            self._hooks = hook_hosts(self.hook_specs, ctx) if self.hook_specs else []
            for host in self._hooks:
                host.imports = seam(self, ctx, host.component.name)  # type: ignore[attr-defined]
        return self._hooks

    async def _hooked_task(self, ctx: TaskContext, transport: Transport, inventory: Inventory,
                           api_key: str | None, hooks: list[object]) -> TaskOutcome:
        """The task with its lifecycle events (murmur.agent.hooked)."""
        from murmur.agent.hooked import fire

        await fire(hooks, ctx, "on-task-start", {"task-id": ctx.task_id, "context-id": ctx.context_id,
                                                "source": ctx.origin, "input-bytes": len(ctx.text.encode())})
        try:
            return await self._attempts(ctx, transport, inventory, api_key, hooks)
        finally:
            if self.session_hooks is not None:
                self.session_hooks.add(ctx.usage)

    async def _resumed_history(self, ctx: TaskContext, hooks: list[object]) -> tuple[Item, ...] | TaskOutcome | None:
        """``--resume-mode compact``: the first task of the resumed context starts from what
        ``on-compaction`` made of the record (written beside it); a hook's err fails the task
        and the session. None: load as usual."""
        conv = self.conversations
        if not conv.compact or ctx.context_id != conv.load_context or ctx.context_id in self._compacted:
            return None
        self._compacted.add(ctx.context_id)
        history = conv.history(ctx.context_id)
        done = await self._compact(ctx, hooks, history, turn=0, threshold=self._threshold)
        if isinstance(done, TaskOutcome):
            return done
        return history if done is None else tuple(done)

    @property
    def _threshold(self) -> float:
        comp = self.manifest.inference.compaction if self.manifest.inference else None
        return comp.threshold if comp is not None else 0.98

    async def _compact(self, ctx: TaskContext, hooks: list[object], items: Sequence[Item], *, turn: int,
                       threshold: float) -> list[Item] | TaskOutcome | None:
        """Fire ``on-compaction`` over ``items``: the replacement (written into the record beside
        what it replaces, and to ``out/compaction-summaries.jsonl`` when asked), None (nothing
        replaced), or the failed outcome (a hook's err: the task fails, the session winds down)."""
        from murmur.agent.hooked import compact
        from murmur.ids import new_id

        comp = self.manifest.inference.compaction if self.manifest.inference else None
        done = await compact(hooks, ctx, items, turn=turn, threshold=threshold,
                             model=comp.model if comp else None, system_prompt=self._compaction_prompt,
                             log=functools.partial(_note, ctx.records_dir / "logs" / "bootstrap.log"))
        if done.error is not None:
            reason = f"compaction hook failed: {done.error}"
            ctx.trace.emit("task_failed", parent_id=ctx.task_event_id, task_id=ctx.task_id, turn=turn,
                           cause="compaction_hook", reason=reason)
            if self.session_hooks is not None:
                self.session_hooks.fail(reason)
            return TaskOutcome("failed", reason)
        if done.items is None:
            return None
        self.conversations.record_compaction(ctx.context_id, ctx.task_id, done.items, new_id("cmp"))
        if comp is not None and comp.dump_summaries:
            summary = "\n".join(i.text for i in done.items if isinstance(i, UserText | AssistantTurn) and i.text)
            _note(ctx.records_dir / "out" / "compaction-summaries.jsonl", json.dumps(
                {"turn": turn, "tokens_before": estimate_tokens(items), "tokens_after": estimate_tokens(done.items),
                 "summary": summary}))
        return list(done.items)

    def _mid_task(self, ctx: TaskContext, hooks: list[object]) -> Any:
        """The loop's compactor when ``context.max_tokens`` is set: ``on-compaction`` once the
        reply's tokens (input + output as reported, else an estimate of the context) reach
        the threshold of it. Takes no turn."""
        budget = self.manifest.context.max_tokens if self.manifest.context else None
        if not budget:
            return None

        async def compactor(items: list[Item], reply: InferenceResult, turn: int) -> list[Item] | TaskOutcome | None:
            used = (reply.input_tokens + reply.output_tokens) or estimate_tokens(items)
            if used / budget < self._threshold:
                return None
            return await self._compact(ctx, hooks, items, turn=turn, threshold=used / budget)

        return compactor

    async def _attempts(self, ctx: TaskContext, transport: Transport, inventory: Inventory,
                        api_key: str | None, hooks: list[object]) -> TaskOutcome:
        from murmur.agent.hooked import HookedDispatcher, HookedTransport, fire, hooked_shell

        history = await self._resumed_history(ctx, hooks)
        if isinstance(history, TaskOutcome):
            return history
        task, reopens = ctx, 0
        limit = max(0, ctx.manifest.inference.max_task_reopens if ctx.manifest.inference else 1)
        while True:
            dispatcher = HookedDispatcher(ctx=task, inventory=inventory, shell=hooked_shell(self.shell, hooks, task),
                                          components=self.components, hooks=hooks)
            outcome = await self._loop(task, HookedTransport(transport, hooks, task), inventory, api_key, dispatcher,
                                       history if task is ctx else None, self._mid_task(task, hooks))
            answers = await fire(hooks, task, "on-task-end", {"task-id": task.task_id, "exit-status": outcome.status})
            again = next((str(a.value) for a in answers if a.committed and a.arm == "reopen-task"), None)
            if again is None:
                return outcome
            if reopens >= limit or task.usage.turns >= self.config.max_turns:
                return TaskOutcome("reopen_budget_exhausted",
                                   f"a hook still asked to reopen the task after {reopens} reopening(s): {again}")
            reopens += 1
            task.trace.emit("task_reopened", parent_id=task.task_event_id, task_id=task.task_id,
                            ordinal=reopens, feedback=again)
            task = attrs.evolve(task, text=f"{task.text}\n\n{again}")


def _compaction_prompt(manifest: Manifest, capsule_root: Path) -> str | None:
    """``inference.compaction.system_prompt``, or its ``_file`` read now (launch).

    Raises:
        DiagnosticError: ``E-IO-001`` when the file cannot be read.
    """
    comp = manifest.inference.compaction if manifest.inference else None
    if comp is None or comp.system_prompt_file is None:
        return comp.system_prompt if comp is not None else None
    path = capsule_root / comp.system_prompt_file
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        from murmur.diagnostics import error
        from murmur.errors import DiagnosticError

        raise DiagnosticError(error("E-IO-001", f"inference.compaction.system_prompt_file {path} cannot be read: "
                                    f"{exc.strerror or exc}", hint="fix the path (relative to the manifest)")) from None


def _note(path: Path, line: str) -> None:
    """Append one line to ``path`` (its directory made); a failure is ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


def make_agent_workload(
    manifest: Manifest,
    capsule_root: Path,
    *,
    environ: Mapping[str, str] | None = None,
    system_prompt_override: str | None = None,
) -> AgentWorkload:
    """Check an agent capsule's ``inference`` block and build its workload.

    The session calls this at launch; see :class:`AgentWorkload` for the arguments.

    Raises:
        DiagnosticError: ``E-MAN-003``, ``E-RUN-005``, ``E-RUN-006``, ``E-RUN-009``.
    """
    return AgentWorkload(
        manifest, capsule_root, environ=environ, system_prompt_override=system_prompt_override
    )
