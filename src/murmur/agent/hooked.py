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
``logs/hook-<name>.log``. Session-level events (``on-session-start``, ``on-session-end``,
``on-stage``) and ``on-compaction`` (no compaction runs here) are not dispatched yet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from murmur.agent.dispatch import ShellFn, ToolDispatcher, ToolOutcome
from murmur.agent.transports import InferenceRequest, InferenceResult, ToolCall, Transport
from murmur.workload import TaskContext


async def fire(hooks: Sequence[Any], ctx: TaskContext, handler: str, fields: Mapping[str, Any]) -> list[Any]:
    """Dispatch one event to every hook in order; trace what they answered; the answers."""
    answers = []
    for host in hooks:
        answer = await host.fire(handler, fields)
        if answer is None:
            continue
        answers.append(answer)
        if answer.dispatch_error:
            ctx.trace.emit("hook_dispatch_error", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                           hook=answer.hook, handler=handler, arm=answer.arm)
        elif answer.committed and answer.arm == "artifact":
            ctx.trace.emit("hook_artifact", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                           hook=answer.hook, text=str(answer.value))
        if answer.error is not None:
            ctx.trace.emit("hook_error", parent_id=ctx.task_event_id, task_id=ctx.task_id,
                           hook=answer.hook, handler=handler)
    return answers


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
