"""Compaction's conversions (pure): a conversation as ``on-compaction`` sees it, and back.

``murmur:hook/lifecycle@0.5.0``'s ``message`` is ``{role, content}`` only, so the items are
handed over as upstream's agent loop hands them (spec/components.md "Compaction"):

* a user message: ``{"role": "user", "content": <JSON of [{"type": "text", "text"}]>}``;
* an assistant turn: ``content`` = the JSON of its blocks (``text``, then one
  ``{"type": "tool_call", "id", "name", "input"}`` per call);
* a tool result: ``{"role": "tool", "content": <JSON of {"__murmur_tool_msg__": true,
  "tool_call_id", "is_error", "body"}>}`` -- the marker lets a result the hook kept verbatim
  come back with its call id.

Back (:func:`from_messages`): ``content`` that parses as a block list is read as blocks, a JSON
string or any other text as one text block; ``assistant`` keeps its ``tool_call`` blocks, every
other role is a user message; a ``tool`` message survives only with the marker intact. A
replacement whose tool calls and tool results do not pair up is declined whole
(``unresolved_tool_call``), as upstream: the next request would be malformed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from murmur.agent.transports import AssistantTurn, Item, ToolCall, ToolResult, ToolResults, UserText

__all__ = ["TOOL_MARKER", "estimate_tokens", "from_messages", "to_messages"]

TOOL_MARKER = "__murmur_tool_msg__"


def to_messages(items: Iterable[Item]) -> list[dict[str, str]]:
    """The ``message`` list of ``items``, oldest first (see the module docstring)."""
    out: list[dict[str, str]] = []
    for item in items:
        if isinstance(item, UserText):
            out.append({"role": "user", "content": json.dumps([{"type": "text", "text": item.text}])})
        elif isinstance(item, AssistantTurn):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": item.text}] if item.text else []
            blocks += [{"type": "tool_call", "id": c.id, "name": c.name,
                        "input": dict(c.arguments) if c.arguments is not None else c.raw_arguments}
                       for c in item.tool_calls]
            out.append({"role": "assistant", "content": json.dumps(blocks)})
        else:
            out += [{"role": "tool", "content": json.dumps({TOOL_MARKER: True, "tool_call_id": r.call_id,
                                                            "is_error": r.is_error, "body": r.content})}
                    for r in item.results]
    return out


def estimate_tokens(items: Sequence[Item]) -> int:
    """A session-token estimate of ``items``: a quarter of the bytes of their message JSON
    (upstream counts the same JSON with tiktoken; no tokenizer is bundled here)."""
    return (len(json.dumps(to_messages(items)).encode()) + 3) // 4


def _blocks(content: str) -> list[Mapping[str, Any]]:
    try:
        parsed = json.loads(content)
    except ValueError:
        return [{"type": "text", "text": content}]
    if isinstance(parsed, list):
        return [b for b in parsed if isinstance(b, Mapping)]
    return [{"type": "text", "text": parsed if isinstance(parsed, str) else json.dumps(parsed)}]


def _call(block: Mapping[str, Any]) -> ToolCall | None:
    cid, name, args = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(cid, str) or not isinstance(name, str):
        return None
    if isinstance(args, Mapping):
        return ToolCall(cid, name, dict(args), json.dumps(dict(args)))
    return ToolCall(cid, name, None, args if isinstance(args, str) else "")


def _tool(content: str, names: Mapping[str, str]) -> ToolResult | None:
    try:
        parsed = json.loads(content)
    except ValueError:
        return None
    if not isinstance(parsed, Mapping) or parsed.get(TOOL_MARKER) is not True:
        return None
    cid = parsed.get("tool_call_id")
    if not isinstance(cid, str) or not cid:
        return None
    body = parsed.get("body")
    return ToolResult(cid, names.get(cid, ""), body if isinstance(body, str) else json.dumps(body),
                      is_error=bool(parsed.get("is_error")))


def from_messages(messages: Iterable[Mapping[str, Any]]) -> tuple[list[Item], str | None]:
    """The items of a ``replace-context`` list, or ``([], reason)`` when it is declined
    (``unresolved_tool_call``: a call without its result, or a result without its call)."""
    items: list[Item] = []
    names: dict[str, str] = {}
    results: list[ToolResult] = []
    issued: set[str] = set()
    for message in messages:
        role, content = str(message.get("role", "")), str(message.get("content", ""))
        if role == "tool":
            result = _tool(content, names)
            if result is not None:
                results.append(result)
            continue
        if results:
            items.append(ToolResults(tuple(results)))
            results = []
        blocks = _blocks(content)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        if role == "assistant":
            calls = tuple(c for c in (_call(b) for b in blocks if b.get("type") == "tool_call") if c is not None)
            names.update({c.id: c.name for c in calls})
            issued.update(c.id for c in calls)
            items.append(AssistantTurn(text, calls))
        else:
            items.append(UserText(text))
    if results:
        items.append(ToolResults(tuple(results)))
    answered = {r.call_id for item in items if isinstance(item, ToolResults) for r in item.results}
    if answered != issued:
        return [], "unresolved_tool_call"
    return items, None
