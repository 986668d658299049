"""A context's thread for the agent loop: the record's lines as conversation items, and back.

The loop (``transport: http``) starts a task from :meth:`Conversations.history` and hands
each item it adds to :meth:`Conversations.recorder`, which appends it to the durable record
(:mod:`murmur.conversation.record`) as it happens. Which tasks load their history
(spec/conversations.md "Threaded conversations"):

* ``lifecycle.conversation: threaded`` — every task, from its context's whole record;
* ``stateless`` — none, except the context ``mur run --resume`` named (``load_context``);
* every task is recorded (unless ``context.record: off``): the key governs loading, not
  recording.

Line shapes (pure :func:`to_lines` / :func:`from_lines`): ``{"role": "user", "content"}``;
``{"role": "assistant", "content", "tool_calls"?: [{"id", "name", "arguments"}]}``;
``{"role": "tool", "tool_call_id", "name", "content", "is_error"}`` (one line per result).
Each line also carries ``task_id``. A tool call left unanswered in the record (the session
was killed while the tool ran) is answered on reload with an error result, so the provider
always reads complete call/result pairs.

Compaction (``--resume-mode compact``, an ``on-compaction`` hook's ``replace-context``) writes
the replacement *beside* the lines it stands for: each of its lines carries the same
``"compaction": "cmp_..."`` id, and a reload starts from the newest such group (the lines
before it are kept in the file, byte for byte, and skipped when loading).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from murmur.agent.harness.sessions import HarnessMap, HarnessThread
from murmur.agent.transports import (
    AssistantTurn,
    Item,
    ToolCall,
    ToolResult,
    ToolResults,
    UserText,
)
from murmur.conversation.record import RecordStore

__all__ = ["UNFINISHED_TOOL", "Conversations", "from_lines", "to_lines"]

UNFINISHED_TOOL = "the tool call did not finish: the session ended while it ran"


def to_lines(item: Item, task_id: str) -> list[dict[str, Any]]:
    """The record lines of one item (pure)."""
    if isinstance(item, UserText):
        return [{"role": "user", "content": item.text, "task_id": task_id}]
    if isinstance(item, AssistantTurn):
        line: dict[str, Any] = {"role": "assistant", "content": item.text, "task_id": task_id}
        if item.tool_calls:
            line["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.raw_arguments or _args_text(c.arguments)}
                for c in item.tool_calls
            ]
        return [line]
    return [
        {"role": "tool", "tool_call_id": r.call_id, "name": r.name, "content": r.content,
         "is_error": r.is_error, "task_id": task_id}
        for r in item.results
    ]


def _args_text(arguments: Mapping[str, object] | None) -> str:
    return json.dumps(dict(arguments)) if arguments is not None else ""


def _call(raw: Mapping[str, Any]) -> ToolCall | None:
    cid, name, args = raw.get("id"), raw.get("name"), raw.get("arguments", "")
    if not isinstance(cid, str) or not isinstance(name, str):
        return None
    text = args if isinstance(args, str) else json.dumps(args)
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        parsed = None
    return ToolCall(cid, name, parsed if isinstance(parsed, dict) else None, text)


def from_lines(lines: Iterable[Mapping[str, Any]]) -> list[Item]:
    """The conversation items of record lines (pure).

    Lines of an unknown role or shape are skipped. Tool lines are grouped under the
    assistant turn that called them, in the order of its calls; a call without a result
    gets :data:`UNFINISHED_TOOL` as an error result; a tool line matching no open call is
    dropped.
    """
    items: list[Item] = []
    pending: list[ToolCall] = []
    answered: dict[str, ToolResult] = {}

    def close() -> None:
        nonlocal pending, answered
        if pending:
            items.append(ToolResults(tuple(
                answered.get(c.id) or ToolResult(c.id, c.name, UNFINISHED_TOOL, is_error=True)
                for c in pending
            )))
        pending, answered = [], {}

    group: object = None
    for line in lines:
        mark = line.get("compaction")
        if isinstance(mark, str) and mark != group:  # a compaction replaced what came before
            items, pending, answered = [], [], {}
        group = mark if isinstance(mark, str) else None
        role, content = line.get("role"), line.get("content", "")
        if not isinstance(content, str):
            content = json.dumps(content)
        if role == "tool":
            cid = line.get("tool_call_id")
            match = next((c for c in pending if c.id == cid), None)
            if match is not None:
                answered[match.id] = ToolResult(match.id, str(line.get("name") or match.name), content,
                                                is_error=bool(line.get("is_error", False)))
            continue
        close()
        if role == "user":
            items.append(UserText(content))
        elif role == "assistant":
            raw_calls = line.get("tool_calls") or []
            calls = tuple(c for c in (_call(r) for r in raw_calls if isinstance(r, Mapping)) if c is not None)
            items.append(AssistantTurn(content, calls))
            pending = list(calls)
    close()
    return items


@attrs.frozen
class Conversations:
    """How an agent workload loads and records its contexts.

    Attributes:
        store (RecordStore | None): the record store; None under ``context.record: off``.
        threaded (bool): ``lifecycle.conversation: threaded``.
        load_context (str | None): the context ``--resume`` named, loaded even when stateless.
        harness (HarnessMap | None): ``transport: process``: the context → CLI session map
            (None: every task runs a fresh CLI session in a home of its own).
        compact (bool): ``--resume-mode compact``: ``load_context`` is compacted by the
            ``on-compaction`` hook before its first task (murmur.agent.agent_workload).
    """

    store: RecordStore | None = None
    threaded: bool = False
    load_context: str | None = None
    harness: HarnessMap | None = None
    compact: bool = False

    def harness_thread(self, context_id: str) -> HarnessThread | None:
        """The CLI session a process-transport task of ``context_id`` runs in, or None
        (stateless, and not the resumed context)."""
        if self.harness is None or not (self.threaded or context_id == self.load_context):
            return None
        return self.harness.thread(context_id, resume=True)

    def history(self, context_id: str) -> tuple[Item, ...]:
        """The items a task of ``context_id`` starts from (empty when it does not load)."""
        if self.store is None or not (self.threaded or context_id == self.load_context):
            return ()
        return tuple(from_lines(self.store.load(context_id)))

    def recorder(self, context_id: str, task_id: str) -> Callable[[Item], None] | None:
        """A function appending each new item of the task to the record, or None (not recorded)."""
        store = self.store
        if store is None:
            return None

        def record(item: Item) -> None:
            for line in to_lines(item, task_id):
                store.append(context_id, line)

        return record

    def record_compaction(self, context_id: str, task_id: str, items: Iterable[Item], mark: str) -> None:
        """Append a compaction's replacement ``items``, every line marked ``compaction: mark``."""
        if self.store is None:
            return
        for item in items:
            for line in to_lines(item, task_id):
                self.store.append(context_id, {**line, "compaction": mark})
