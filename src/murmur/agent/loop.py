"""The agent loop: one task, turn by turn, under ``inference.max_turns``.

Each turn is one inference call (a ``Transport.infer``); a reply with tool calls has every
call answered (:class:`~murmur.agent.dispatch.ToolDispatcher`) and the loop goes round
again; a reply without tool calls ends the turn. When it ends with turns left and member
calls outstanding, the task waits for every answer and continues once with all of them
(``spec/agent.md`` "Member answers and the continuation"); otherwise the reply's text is
the task's answer. Running out of turns while the model still calls tools ends
``max_turns_reached``.

Every inference call and tool call runs inside the task's cancel scope, so CancelTask,
wind-down and the deadline abandon whatever is in flight (an HTTP request, a shell
process group, a wait for member answers) and ``trio.Cancelled`` propagates.

Trace records written here (``spec/agent.md`` "Trace"): ``inference`` per turn (parent: the
task), ``tool_call`` / ``shell`` per call (parent: the turn's ``inference``),
``task_continued`` per continuation, ``task_failed`` when the task fails. Counters go to
``ctx.usage``. The session writes ``task_start`` / ``task_end`` / ``task_canceled``.

Design: spec/agent.md, "The loop".
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping

import attrs
import trio

from murmur.agent.dispatch import ToolDispatcher
from murmur.agent.fence import fence
from murmur.agent.members import continuation_text
from murmur.agent.tools import Inventory
from murmur.agent.transports import (
    AssistantTurn,
    InferenceError,
    InferenceRequest,
    InferenceResult,
    Item,
    ToolResults,
    Transport,
    UserText,
)
from murmur.agent.transports.http import redact
from murmur.errors import MurmurError
from murmur.workload import TaskContext, TaskOutcome

__all__ = ["TaskLoop", "initial_text"]

_EMPTY_TASK = "(the task has no text)"
_REASON_MAX = 2000  # bytes of a task_failed reason


def initial_text(ctx: TaskContext) -> str:
    """The task's first user message: the text, fenced under ``task:<origin>`` when untrusted."""
    text = ctx.text if ctx.text.strip() else _EMPTY_TASK
    if ctx.trust == "untrusted":
        return fence(text, f"task:{ctx.origin}")
    return text


def _decision(result: InferenceResult) -> str:
    if result.tool_calls:
        return "tool_call"
    return "text" if result.truncated else "end_turn"


@attrs.define
class TaskLoop:
    """One task's conversation with the model.

    Attributes:
        ctx (TaskContext): the task.
        transport (Transport): the provider driver.
        inventory (Inventory): the tools offered.
        dispatcher (ToolDispatcher): answers tool calls.
        system (str | None): the system prompt.
        max_turns (int): inference calls allowed for this task.
        budget_tokens (int | None): the task's spending ceiling (input + output tokens over
            its turns, as reported); None for no ceiling.
        secret (str | None): the provider key, only to redact it from messages.
        history (tuple[Item, ...]): the context's earlier messages (threaded conversations,
            spec/conversations.md); the task's own message follows them.
        record (Callable[[Item], None] | None): called with each item the task adds, as it
            is added (the durable record); None when not recorded.
        compactor: ``await compactor(items, reply, turn)`` after each reply, before the reply
            is added (``on-compaction`` past ``context.max_tokens``' threshold): the items to go
            on from, a :class:`TaskOutcome` that ends the task (the hook failed), or None.
    """

    ctx: TaskContext
    transport: Transport
    inventory: Inventory
    dispatcher: ToolDispatcher
    system: str | None
    max_turns: int
    budget_tokens: int | None = None
    secret: str | None = attrs.field(default=None, repr=False)
    continuations: int = 0
    history: tuple[Item, ...] = ()
    record: Callable[[Item], None] | None = None
    compactor: Callable[[list[Item], InferenceResult, int], Awaitable[list[Item] | TaskOutcome | None]] | None = None

    async def run(self) -> TaskOutcome:
        """Run the task to an outcome.

        Returns:
            TaskOutcome: ``ok`` (the final text), ``failed`` (the inference failure),
            ``max_turns_reached``, ``spend_ceiling_reached`` (see :meth:`_spent`) or
            ``no_answer`` (``end-without-answer``'s reason).

        Raises:
            trio.Cancelled: the task's scope was cancelled.
        """
        items: list[Item] = list(self.history)
        add = self._adder(items)
        add(UserText(initial_text(self.ctx)))
        for turn in range(1, self.max_turns + 1):
            spent = self._spent(before_turn=True)
            if spent is not None:
                return spent
            self.ctx.usage.turns += 1
            try:
                result, turn_id = await self._infer(turn, items)
            except InferenceError as exc:
                return self._fail(turn, exc)
            spent = self._spent(before_turn=False)
            if spent is not None:
                return spent
            if self.compactor is not None:
                compacted = await self.compactor(items, result, turn)
                if isinstance(compacted, TaskOutcome):
                    return compacted
                if compacted is not None:
                    items[:] = compacted
            add(AssistantTurn(result.text, result.tool_calls))
            if result.tool_calls:
                results = []
                end_reason: str | None = None
                for call in result.tool_calls:
                    outcome = await self.dispatcher.run(call, turn=turn, parent_id=turn_id)
                    results.append(outcome.result)
                    end_reason = end_reason or outcome.end_reason
                if end_reason is not None:
                    return TaskOutcome("no_answer", end_reason)
                add(ToolResults(tuple(results)))
                continue
            if self.dispatcher.members and turn < self.max_turns:
                add(UserText(await self._continue(turn)))
                continue
            return TaskOutcome("ok", result.text)
        return TaskOutcome(
            "max_turns_reached",
            f"the task used all {self.max_turns} turns of inference.max_turns "
            "without a final answer",
        )

    def _adder(self, items: list[Item]) -> Callable[[Item], None]:
        """Append to ``items`` and to the record (when recorded)."""
        record = self.record

        def add(item: Item) -> None:
            items.append(item)
            if record is not None:
                record(item)

        return add

    def _spent(self, *, before_turn: bool) -> TaskOutcome | None:
        """``spend_ceiling_reached`` when the task's tokens reach ``budget_tokens``.

        Before a turn: the tokens used so far already equal (or pass) the ceiling, so any
        further turn would pass it. After a turn: its reported usage passed the ceiling; the
        turn's tool calls are not run and its text is not the answer. None otherwise.
        """
        if self.budget_tokens is None:
            return None
        used = self.ctx.usage.input_tokens + self.ctx.usage.output_tokens
        if used > self.budget_tokens or (before_turn and used >= self.budget_tokens):
            return TaskOutcome(
                "spend_ceiling_reached",
                f"the task used {used} tokens (input + output) against its ceiling of "
                f"{self.budget_tokens} (inference.budget_tokens)",
            )
        return None

    async def _infer(self, turn: int, items: list[Item]) -> tuple[InferenceResult, str]:
        request = InferenceRequest(self.system, tuple(items), self.inventory.specs)
        started = time.monotonic()
        try:
            result = await self.transport.infer(request)
        except InferenceError as exc:
            fields: dict[str, object] = {
                "turn": turn,
                "task_id": self.ctx.task_id,
                "input_tokens": 0,
                "output_tokens": 0,
                "decision": "error",
                "stop_reason": "error",
                "duration_ms": _ms(started),
                "error_code": exc.code or exc.cause,
                "error": redact(exc.message, self.secret),
            }
            if exc.status is not None:
                fields["http_status"] = exc.status
            self.ctx.trace.emit("inference", parent_id=self.ctx.task_event_id, **fields)
            raise
        self.ctx.usage.input_tokens += result.input_tokens
        self.ctx.usage.output_tokens += result.output_tokens
        fields = {
            "turn": turn,
            "task_id": self.ctx.task_id,
            "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens,
            "decision": _decision(result),
            "stop_reason": result.stop_reason,
            "duration_ms": _ms(started),
            "response_sha256": hashlib.sha256(result.text.encode("utf-8")).hexdigest(),
        }
        if result.tool_calls:
            first = self.inventory.by_wire_name(result.tool_calls[0].name)
            fields["tool_name"] = first.name if first is not None else result.tool_calls[0].name
            fields["tool_calls"] = len(result.tool_calls)
        turn_id = self.ctx.trace.emit("inference", parent_id=self.ctx.task_event_id, **fields)
        return result, turn_id

    async def _continue(self, turn: int) -> str:
        asked = self.dispatcher.members.take()
        started = time.monotonic()
        answers = await self._await_answers(asked)
        self.continuations += 1
        self.ctx.trace.emit(
            "task_continued",
            parent_id=self.ctx.task_event_id,
            task_id=self.ctx.task_id,
            continuation_number=self.continuations,
            member_calls=[call_id for call_id, _ in asked],
            delegations=[],
            waited_ms=_ms(started),
            turns_remaining=self.max_turns - turn,
        )
        return continuation_text(asked, answers)

    async def _await_answers(
        self, asked: list[tuple[str, str]]
    ) -> dict[str, Mapping[str, object]]:
        answers: dict[str, Mapping[str, object]] = {}
        member_answer = self.ctx.services.member_answer
        if member_answer is None:
            return {
                call_id: {"status": "unreachable", "output": "this session cannot receive answers"}
                for call_id, _ in asked
            }

        async def one(call_id: str) -> None:
            try:
                answers[call_id] = await member_answer(call_id)
            except MurmurError as exc:
                answers[call_id] = {"status": "unreachable", "output": str(exc)}

        async with trio.open_nursery() as nursery:
            for call_id, _ in asked:
                nursery.start_soon(one, call_id)
        return answers

    def _fail(self, turn: int, exc: InferenceError) -> TaskOutcome:
        reason = redact(exc.message, self.secret)
        self.ctx.trace.emit(
            "task_failed",
            parent_id=self.ctx.task_event_id,
            task_id=self.ctx.task_id,
            turn=turn,
            cause=exc.cause,
            reason=reason.encode("utf-8")[:_REASON_MAX].decode("utf-8", "ignore"),
        )
        return TaskOutcome("failed", reason)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
