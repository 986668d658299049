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

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import attrs
import httpx
import trio

from murmur.agent.config import AgentConfig, agent_config
from murmur.agent.dispatch import ShellFn, ToolDispatcher
from murmur.agent.harness.choose import STDIO, protocol_for
from murmur.agent.loop import TaskLoop, initial_text
from murmur.agent.thread import Conversations
from murmur.agent.tools import Inventory, build_inventory
from murmur.agent.transports import InferenceError, Transport
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
        config = self.config
        gatewayed = via_gateway(config.endpoint, self.environ) if config.endpoint else None
        try:
            if gatewayed is not None:
                # Under the tree's gateway the key stays with the gateway (spec/gateway.md).
                config = attrs.evolve(config, endpoint=gatewayed)
                api_key: str | None = GATEWAY_PLACEHOLDER
            else:
                api_key = resolve_api_key(config.api_key_ref, self.environ)
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
        async with httpx.AsyncClient(
            timeout=REQUEST_TIMEOUT, trust_env=False, follow_redirects=False
        ) as client:
            transport: Transport
            if self.driver_component is not None:
                from murmur.agent.components import driver_transport

                transport = driver_transport(self.driver_component, ctx, self.config)
            else:
                transport = make_transport(
                    config, client, api_key, policy=self.policy, sleep=self.sleep
                )
            hooks = self._hook_hosts(ctx)
            if not hooks:
                return await self._loop(ctx, transport, inventory, api_key, ToolDispatcher(
                    ctx=ctx, inventory=inventory, shell=self.shell, components=self.components))
            return await self._hooked_task(ctx, transport, inventory, api_key, hooks)

    def _loop(self, ctx: TaskContext, transport: Transport, inventory: Inventory, api_key: str | None,
              dispatcher: ToolDispatcher) -> Awaitable[TaskOutcome]:
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
            history=self.conversations.history(ctx.context_id),
            record=self.conversations.recorder(ctx.context_id, ctx.task_id),
        ).run()

    def _hook_hosts(self, ctx: TaskContext) -> list[object]:
        """The session's hook hosts (made at its first task, whose records dir holds logs/)."""
        if self._hooks is None:
            from murmur.agent.components import hook_hosts

            self._hooks = hook_hosts(self.hook_specs, ctx) if self.hook_specs else []
        return self._hooks

    async def _hooked_task(self, ctx: TaskContext, transport: Transport, inventory: Inventory,
                           api_key: str | None, hooks: list[object]) -> TaskOutcome:
        """The task with its lifecycle events (murmur.agent.hooked)."""
        from murmur.agent.hooked import (
            HookedDispatcher,
            HookedTransport,
            fire,
            hooked_shell,
        )

        await fire(hooks, ctx, "on-task-start", {"task-id": ctx.task_id, "context-id": ctx.context_id,
                                                "source": ctx.origin, "input-bytes": len(ctx.text.encode())})
        task, reopens = ctx, 0
        limit = max(0, ctx.manifest.inference.max_task_reopens if ctx.manifest.inference else 1)
        while True:
            dispatcher = HookedDispatcher(ctx=task, inventory=inventory, shell=hooked_shell(self.shell, hooks, task),
                                          components=self.components, hooks=hooks)
            outcome = await self._loop(task, HookedTransport(transport, hooks, task), inventory, api_key, dispatcher)
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
