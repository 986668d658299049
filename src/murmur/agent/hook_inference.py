"""A hook's ``murmur:runtime/inference@0.2.0`` ``run-inference``: one call through the session's
driver (spec/components.md "Hooks").

:func:`seam` gives a hook host the :class:`~murmur.components.host.Hooks` its import calls. The
request's ``messages`` (``{role, content}``) become the conversation (``assistant`` a model
turn, every other role a user message), ``system-prompt`` the system prompt (none: no system
prompt), ``model`` the model (none: the manifest's); ``max_tokens`` is 8192 and no tools are
offered (:meth:`AgentWorkload.infer_once`). Each call is an ``inference`` record with
``origin: hook:<name>``; a failure (no driver, a refused key, the provider) is the import's
``err`` with the reason, never a trap.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from murmur.agent.transports import (
    AssistantTurn,
    InferenceError,
    InferenceRequest,
    InferenceResult,
    Item,
    UserText,
)
from murmur.workload import TaskContext

if TYPE_CHECKING:
    from murmur.agent.config import AgentConfig
    from murmur.components.host import Hooks

__all__ = ["InferringWorkload", "seam"]


class InferringWorkload(Protocol):
    """What a hook's ``run-inference`` needs of the agent workload
    (:class:`murmur.agent.agent_workload.AgentWorkload` is one)."""

    config: AgentConfig

    async def infer_once(self, ctx: TaskContext, request: InferenceRequest,
                         model: str | None) -> InferenceResult: ...


def seam(workload: InferringWorkload, ctx: TaskContext, hook: str) -> Hooks:
    """The imports of hook ``hook``: ``run_inference`` through ``workload``'s driver, and its
    outgoing-HTTP decisions as ``component_http`` records."""
    from murmur.agent.components import http_recorder
    from murmur.components.host import Hooks

    return Hooks(run_inference=_runner(workload, ctx, hook), on_http=http_recorder(ctx, hook))


def _runner(workload: InferringWorkload, ctx: TaskContext, hook: str) -> Callable[[Any], Awaitable[Mapping[str, Any]]]:
    async def run(request: Any) -> Mapping[str, Any]:
        items: tuple[Item, ...] = tuple(
            AssistantTurn(str(m.content)) if str(m.role) == "assistant" else UserText(str(m.content))
            for m in getattr(request, "messages", None) or [])
        model = getattr(request, "model", None)
        used = model or workload.config.model or ""
        started = time.monotonic()
        fields: dict[str, Any] = {"origin": f"hook:{hook}", "model": used}
        if ctx.task_id:
            fields["task_id"] = ctx.task_id
        try:
            result = await workload.infer_once(ctx, InferenceRequest(getattr(request, "system-prompt", None), items),
                                               model)
        except InferenceError as exc:
            ctx.trace.emit("inference", parent_id=ctx.task_event_id, decision="error", error=exc.message,
                           duration_ms=int((time.monotonic() - started) * 1000), **fields)
            raise RuntimeError(exc.message) from None
        ctx.trace.emit("inference", parent_id=ctx.task_event_id, decision="end_turn",
                       input_tokens=result.input_tokens, output_tokens=result.output_tokens,
                       duration_ms=int((time.monotonic() - started) * 1000), **fields)
        return {"text": result.text, "model-used": used, "input-tokens": result.input_tokens,
                "output-tokens": result.output_tokens}

    return run
