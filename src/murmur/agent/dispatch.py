"""Running one tool call of an agent's turn, and tracing it.

:class:`ToolDispatcher` answers each :class:`~murmur.agent.transports.ToolCall` of a task:
it looks the wire name up in the task's :class:`~murmur.agent.tools.Inventory` (a name not
there is refused naming the missing grant), validates the input, runs the tool, and writes
the ``tool_call`` trace record (and a ``shell`` record for a command that ran). Every tool's
output reaches the model fenced (:mod:`murmur.agent.fence`). Cancellation of the task
propagates out of a running tool; a shell command's process group is killed by
:func:`murmur.shell.run_shell` first.

Design: spec/agent.md, "Tools" and "Trace".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping

import attrs

from murmur.agent.components import ComponentTool, call_component_tool
from murmur.agent.fence import fence
from murmur.agent.members import MemberCalls, call_result
from murmur.agent.tools import (
    CALL_MEMBER,
    DELEGATE_TASK,
    END_WITHOUT_ANSWER,
    RESERVED,
    Inventory,
    Tool,
    json_text,
    missing_grant,
    shell_args,
    shell_result_text,
    string_fields,
)
from murmur.agent.transports import ToolCall, ToolResult
from murmur.errors import MurmurError
from murmur.grants import denied_binary, is_binary_name
from murmur.shell import ShellRefused, ShellResult, run_shell
from murmur.workload import TaskContext

__all__ = ["ShellFn", "ToolDispatcher", "ToolOutcome"]


# The shape of murmur.shell.run_shell(argv, *, allow, cwd, env) -> ShellResult.
ShellFn = Callable[..., Awaitable[ShellResult]]


@attrs.frozen
class ToolOutcome:
    """One answered call.

    Attributes:
        result (ToolResult): what the model reads.
        end_reason (str | None): set when ``end-without-answer`` was accepted (the reason).
    """

    result: ToolResult
    end_reason: str | None = None


@attrs.define
class ToolDispatcher:
    """Answers the tool calls of one task.

    Attributes:
        ctx (TaskContext): the task.
        inventory (Inventory): the task's tools.
        members (MemberCalls): this task's outstanding member calls.
        shell (ShellFn): the shell runner (:func:`murmur.shell.run_shell`).
        ended (bool): ``end-without-answer`` was accepted; later calls are refused.
    """

    ctx: TaskContext
    inventory: Inventory
    members: MemberCalls = attrs.field(factory=MemberCalls)
    shell: ShellFn = run_shell
    ended: bool = False
    components: Mapping[str, ComponentTool] = attrs.field(factory=dict)

    async def run(self, call: ToolCall, *, turn: int, parent_id: str) -> ToolOutcome:
        """Answer ``call`` and write its ``tool_call`` record (parent: the turn's ``inference``).

        Returns:
            ToolOutcome: the result for the model, and the end reason when the task ends.

        Raises:
            trio.Cancelled: the task was cancelled while the tool ran.
        """
        started = time.monotonic()
        self.ctx.usage.tool_calls += 1
        tool = self.inventory.by_wire_name(call.name)
        end_reason: str | None = None
        if self.ended:
            text, is_error = "refused: this task already ended with end-without-answer", True
        elif tool is None:
            text, is_error = self._missing(call.name), True
        elif tool.kind == "shell":
            text, is_error = await self._shell(tool, call, turn=turn, parent_id=parent_id)
        elif tool.kind == "component":
            text, is_error = await call_component_tool(
                self.components[tool.name], self.ctx, call.arguments, call.raw_arguments)
        elif tool.kind == DELEGATE_TASK:
            text, is_error = await self._delegate(call)
        elif tool.kind == CALL_MEMBER:
            text, is_error = await self._call_member(call)
        else:
            assert tool.kind == END_WITHOUT_ANSWER
            text, is_error, end_reason = self._end(call)
        name = tool.name if tool is not None else call.name
        result = ToolResult(call_id=call.id, name=call.name, content=text, is_error=is_error)
        self._trace(call, name, result, turn=turn, parent_id=parent_id, started=started)
        return ToolOutcome(result, end_reason)

    def _missing(self, name: str, *, kernel: bool = False) -> str:
        """A call to a tool that does not exist (or, ``kernel``, an ``exec`` the sandbox
        refused): a binary gets the route (spec/routing.md)."""
        if not kernel and (name in RESERVED or not is_binary_name(name)):
            return missing_grant(name, self.ctx.manifest.shell_allow)
        deny = self.ctx.services.denied_binary
        if deny is not None:
            return deny(name, kernel=True) if kernel else deny(name)
        return denied_binary(name, self.ctx.manifest.name, self.ctx.manifest.shell_allow, kernel=kernel)

    # --- the tools ----------------------------------------------------------------------

    async def _shell(
        self, tool: Tool, call: ToolCall, *, turn: int, parent_id: str
    ) -> tuple[str, bool]:
        args = shell_args(call.arguments)
        if isinstance(args, str):
            return f"refused: {args}", True
        try:
            res = await self.shell(
                [tool.name, *args],
                allow=self.ctx.manifest.shell_allow,
                cwd=self.ctx.workdir,
                env=self.ctx.shell_env,
            )
        except ShellRefused as exc:
            return f"refused: {exc}", True
        self.ctx.usage.shell_calls += 1
        self.ctx.trace.emit(
            "shell",
            parent_id=parent_id,
            turn=turn,
            task_id=self.ctx.task_id,
            **res.trace_fields(),
        )
        text = shell_result_text(
            tool.name, res.exit_code, res.stdout_text, res.stderr_text, truncated=res.truncated
        )
        if res.denied is not None:  # the denied-binary message says it all, the grant line last
            text += "\n" + self._missing(res.denied, kernel=True)
        elif res.sandbox is not None:
            text += f"\n[sandbox] {res.sandbox}"
        return text, res.exit_code != 0

    async def _delegate(self, call: ToolCall) -> tuple[str, bool]:
        fields = string_fields(call.arguments, ("capsule", "version", "task"))
        if isinstance(fields, str):
            return f"refused: {fields}", True
        allow = self.ctx.manifest.spawn_allow
        if fields["capsule"] not in allow:
            return (
                f"refused: `{fields['capsule']}` is not in capabilities.spawn.allow "
                f"({', '.join(allow)})",
                True,
            )
        delegate = self.ctx.services.delegate
        assert delegate is not None  # the tool exists only with the service
        try:
            data = await delegate(fields["capsule"], fields["version"], fields["task"], False)
        except MurmurError as exc:
            return f"failed: {exc}", True
        status = str(data.get("status", "failed"))
        if status == "refused":  # a refusal is a plain sentence, no JSON around it
            return str(data.get("output") or data.get("reason") or "the delegation was refused"), True
        return fence(json_text(data), "tool:delegate-task"), status != "started"

    async def _call_member(self, call: ToolCall) -> tuple[str, bool]:
        fields = string_fields(call.arguments, ("member", "task"))
        if isinstance(fields, str):
            return f"refused: {fields}", True
        refusal = self.members.refusal(fields["member"], self.ctx.services.callees)
        if refusal is not None:
            return f"refused: {refusal}", True
        call_member = self.ctx.services.call_member
        assert call_member is not None  # the tool exists only with the service
        try:
            data = await call_member(fields["member"], fields["task"])
        except MurmurError as exc:
            return f"failed: Called {fields['member']}: failed ({exc})", True
        text, is_error, outstanding = call_result(data)
        if outstanding:
            self.members.add(str(data.get("call_id", "")), fields["member"])
        return text, is_error

    def _end(self, call: ToolCall) -> tuple[str, bool, str | None]:
        fields = string_fields(call.arguments, ("reason",))
        if isinstance(fields, str):
            return f"refused: {fields}", True, None
        reason = fields["reason"].strip()
        if not reason:
            return "refused: the reason must not be blank", True, None
        if self.ctx.services.entry_member:
            return "refused: the entry member's task must end with an answer", True, None
        if self.members:
            return (
                "refused: member calls are still outstanding; end your turn to receive them first",
                True,
                None,
            )
        self.ended = True
        return "accepted: the task ends without an answer", False, reason

    # --- trace --------------------------------------------------------------------------

    def _trace(
        self,
        call: ToolCall,
        name: str,
        result: ToolResult,
        *,
        turn: int,
        parent_id: str,
        started: float,
    ) -> None:
        raw = call.raw_arguments or json.dumps(dict(call.arguments or {}), separators=(",", ":"))
        tool_input: object = dict(call.arguments) if call.arguments is not None else raw
        out = result.content.encode("utf-8")
        self.ctx.trace.emit(
            "tool_call",
            parent_id=parent_id,
            turn=turn,
            task_id=self.ctx.task_id,
            tool_name=name,
            tool_call_id=call.id,
            input=tool_input,
            input_bytes=len(raw.encode("utf-8")),
            output_bytes=len(out),
            output_sha256=hashlib.sha256(out).hexdigest(),
            duration_ms=int((time.monotonic() - started) * 1000),
            status="error" if result.is_error else "ok",
        )
