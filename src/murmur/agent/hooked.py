"""Hook artifacts in an agent task: the lifecycle events a task fires, and their arms.

Per task (spec/components.md, "Hooks"): ``on-task-start`` before the first turn;
``on-inference`` after each driver reply (:class:`HookedTransport`); ``on-tool-call`` after
each tool call (:class:`HookedDispatcher`); ``on-shell`` after each shell command
(:func:`hooked_shell`); ``on-task-end`` with the outcome. Committed arms: ``artifact`` at
``on-inference`` is a ``hook_artifact`` record (the A2A artifact frame's seam);
``reopen-task`` at ``on-task-end`` runs the task again with the hook's text appended (at
most ``inference.max_task_reopens`` times, default 1, sharing one ``max_turns`` budget; a
hook still asking after that ends the task ``reopen_budget_exhausted``). An arm an event does
not honour is a ``hook_dispatch_error`` record; a handler's error is in
``logs/hook-<name>.log``. ``on-compaction`` (:func:`compact`) runs over a context
``--resume-mode compact`` reloads; the session-level events are :mod:`murmur.agent.lifecycle`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from murmur.agent.compaction import estimate_tokens, from_messages, to_messages
from murmur.agent.dispatch import ShellFn, ToolDispatcher, ToolOutcome
from murmur.agent.transports import InferenceRequest, InferenceResult, Item, ToolCall, Transport
from murmur.workload import TaskContext


async def fire(hooks: Sequence[Any], ctx: TaskContext, handler: str, fields: Mapping[str, Any]) -> list[Any]:
    """Dispatch one event to every hook in order; trace what they answered; the answers.

    ``ctx`` may be the session's own (an empty ``task_id``: session-level events), whose records
    then carry no ``task_id``."""
    answers = []
    ids = {"task_id": ctx.task_id} if ctx.task_id else {}
    for host in hooks:
        answer = await host.fire(handler, fields)
        if answer is None:
            continue
        answers.append(answer)
        if answer.dispatch_error:
            ctx.trace.emit("hook_dispatch_error", parent_id=ctx.task_event_id, **ids,
                           hook=answer.hook, handler=handler, arm=answer.arm)
        elif answer.committed and answer.arm == "artifact":
            ctx.trace.emit("hook_artifact", parent_id=ctx.task_event_id, **ids,
                           hook=answer.hook, text=str(answer.value))
        if answer.error is not None:
            ctx.trace.emit("hook_error", parent_id=ctx.task_event_id, **ids,
                           hook=answer.hook, handler=handler)
    return answers


@attrs.frozen
class Compacted:
    """What ``on-compaction`` did to a context.

    Attributes:
        items (tuple[Item, ...] | None): the replacement (None: nothing was replaced).
        error (str | None): ``<hook>: <err>`` of the first hook that failed (the caller fails
            the session; an error wins over another hook's replacement, as upstream).
        declined (str | None): ``no_hook_replacement`` | ``unresolved_tool_call``.
    """

    items: tuple[Item, ...] | None = None
    error: str | None = None
    declined: str | None = None


def has_compaction_hook(contracts: Sequence[Any]) -> bool:
    """Whether any hook can receive ``on-compaction``: its binding is absent or names it
    (upstream's test, read before anything runs; ``E-RUN-018`` otherwise)."""
    return any(getattr(c, "binding", None) in (None, "on-compaction") for c in contracts)


async def compact(hooks: Sequence[Any], ctx: TaskContext, items: Sequence[Item], *, turn: int,
                  threshold: float, model: str | None = None, system_prompt: str | None = None,
                  log: Any = None) -> Compacted:
    """Fire ``on-compaction`` over ``items``; commit the first ``replace-context`` (traced
    ``compaction`` with the token counts), or say why not (``compaction_declined``, a line in
    ``logs/bootstrap.log`` through ``log``). Takes no turn."""
    before = estimate_tokens(items)
    answers = await fire(hooks, ctx, "on-compaction", {
        "messages": to_messages(items), "session-tokens": before, "threshold": threshold,
        "model": model, "system-prompt": system_prompt})
    failed = next((a for a in answers if a.error is not None), None)
    if failed is not None:
        return Compacted(error=f"{failed.hook}: {failed.error}")
    chosen = next((a for a in answers if a.committed and a.arm == "replace-context"), None)
    reason = "no_hook_replacement"
    replaced: list[Item] = []
    if chosen is not None:
        replaced, declined = from_messages(chosen.value or [])
        reason = declined or ""
    if reason:
        note = {"no_hook_replacement": "no hook returned replace-context",
                "unresolved_tool_call": "compacted result has an unresolved tool_call"}[reason]
        if log is not None:
            log(f"[compaction] {note}; continuing without compaction")
        ctx.trace.emit("compaction_declined", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                       turn=turn, reason=reason)
        return Compacted(declined=reason)
    ctx.trace.emit("compaction", parent_id=ctx.task_event_id, task_id=ctx.task_id, turn=turn,
                   hook=chosen.hook if chosen else None, tokens_before=before, tokens_after=estimate_tokens(replaced))
    return Compacted(items=tuple(replaced))


@attrs.define
class HookedTransport:
    """A transport that fires ``on-inference`` after each reply."""

    inner: Transport
    hooks: Sequence[Any]
    ctx: TaskContext
    turn: int = 0

    async def infer(self, request: InferenceRequest) -> InferenceResult:
        result = await self.inner.infer(request)
        self.turn += 1
        first = result.tool_calls[0].name if result.tool_calls else None
        await fire(self.hooks, self.ctx, "on-inference", {
            "turn": self.turn, "input-tokens": result.input_tokens, "output-tokens": result.output_tokens,
            "decision": "tool_call" if result.tool_calls else "final", "tool-name": first,
            "prompt": None, "output": None, "tools": None})
        return result


@attrs.define
class HookedDispatcher(ToolDispatcher):
    """A dispatcher that fires ``on-tool-call`` after each call."""

    hooks: Sequence[Any] = ()

    async def run(self, call: ToolCall, *, turn: int, parent_id: str) -> ToolOutcome:
        started = time.monotonic()
        outcome = await super().run(call, turn=turn, parent_id=parent_id)
        raw = call.raw_arguments or ""
        await fire(self.hooks, self.ctx, "on-tool-call", {
            "turn": turn, "tool-name": call.name, "input-bytes": len(raw.encode()),
            "output-bytes": len(outcome.result.content.encode()),
            "duration-ms": int((time.monotonic() - started) * 1000),
            "status": "error" if outcome.result.is_error else "ok"})
        return outcome


def hooked_shell(shell: ShellFn, hooks: Sequence[Any], ctx: TaskContext) -> ShellFn:
    """``shell`` that fires ``on-shell`` after each command."""

    async def run(argv: Sequence[str], **kwargs: Any) -> Any:
        res = await shell(argv, **kwargs)
        await fire(hooks, ctx, "on-shell", {
            "turn": 0, "binary": res.binary, "command": " ".join(res.argv), "exit-code": res.exit_code,
            "stdout": res.stdout_text, "stderr": res.stderr_text, "stdout-bytes": res.stdout_bytes,
            "stderr-bytes": res.stderr_bytes, "duration-ms": res.duration_ms})
        return res

    return run
