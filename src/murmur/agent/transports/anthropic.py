"""``murmur-driver-anthropic``: the Anthropic Messages API with tool use.

One ``POST <endpoint>/v1/messages`` per turn, non-streaming, with ``x-api-key: <key>`` when a
key is configured and ``anthropic-version: 2023-06-01``.

``driver.config`` keys understood:

* ``anthropic_version`` — the ``anthropic-version`` header (default ``2023-06-01``).

Pure translation (:func:`request_body`, :func:`parse_reply`) is separate from the I/O
(:class:`AnthropicDriver`). Design: spec/agent.md, "Transports".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import httpx
import trio

from murmur.agent.transports import (
    AssistantTurn,
    InferenceError,
    InferenceRequest,
    InferenceResult,
    ToolCall,
    ToolResults,
    UserText,
)
from murmur.agent.transports.http import (
    JSON_HEADERS,
    RetryPolicy,
    malformed_reply,
    post_json,
    usage_tokens,
)

ARTIFACT = "murmur-driver-anthropic"
DEFAULT_VERSION = "2023-06-01"
_EMPTY_TURN = "(no text)"  # the API refuses an assistant message with no content


def messages_url(endpoint: str) -> str:
    """The request URL: ``https://host`` → ``…/v1/messages``; ``…/v1`` → ``…/v1/messages``."""
    base = endpoint.rstrip("/")
    if base.endswith("/messages"):
        return base
    if base.endswith("/v1"):
        return base + "/messages"
    return base + "/v1/messages"


def request_body(
    request: InferenceRequest, *, model: str, max_tokens: int
) -> dict[str, object]:
    """The Messages API body for one turn (pure).

    Consecutive user-side items (tool results, then a continuation) merge into one user
    message, so roles alternate as the API requires.

    Args:
        request (InferenceRequest): system prompt, conversation, tools.
        model (str): ``inference.model``.
        max_tokens (int): per-turn output cap.

    Returns:
        dict: ``{"model", "max_tokens", "messages", "system"?, "tools"?}``.
    """
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, object]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for item in request.items:
        if isinstance(item, UserText):
            add("user", [{"type": "text", "text": item.text}])
        elif isinstance(item, AssistantTurn):
            blocks: list[dict[str, object]] = []
            if item.text:
                blocks.append({"type": "text", "text": item.text})
            for c in item.tool_calls:
                blocks.append(
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments or {})}
                )
            add("assistant", blocks or [{"type": "text", "text": _EMPTY_TURN}])
        elif isinstance(item, ToolResults):
            results: list[dict[str, object]] = []
            for r in item.results:
                block: dict[str, object] = {
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": r.content,
                }
                if r.is_error:
                    block["is_error"] = True
                results.append(block)
            add("user", results)
    body: dict[str, object] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
            for t in request.tools
        ]
    return body


def _malformed(why: str) -> InferenceError:
    return malformed_reply("Anthropic", why)


def parse_reply(data: Mapping[str, Any]) -> InferenceResult:
    """Normalise a Messages API reply (pure).

    Args:
        data (Mapping): the JSON object answered.

    Returns:
        InferenceResult: text blocks joined, ``tool_use`` blocks as tool calls, the
        ``stop_reason``, ``usage.input_tokens`` / ``output_tokens``.

    Raises:
        InferenceError: (``malformed_response``) no content list, or a ``tool_use`` block
            without an id or name.
    """
    content = data.get("content")
    if not isinstance(content, list):
        raise _malformed("no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            raise _malformed("a content block is not an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise _malformed("a tool_use block has no id or name")
            raw_input = block.get("input", {})
            args = raw_input if isinstance(raw_input, dict) else None
            calls.append(
                ToolCall(
                    id=call_id,
                    name=name,
                    arguments=args,
                    raw_arguments=json.dumps(raw_input, separators=(",", ":")),
                )
            )
        # other block kinds (thinking, …) carry nothing the loop uses
    stop = data.get("stop_reason")
    stop_reason = stop if isinstance(stop, str) else ""
    input_tokens, output_tokens = usage_tokens(data, "input_tokens", "output_tokens")
    return InferenceResult(
        text="".join(texts),
        tool_calls=tuple(calls),
        stop_reason=stop_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        truncated=stop_reason == "max_tokens",
    )


@attrs.define
class AnthropicDriver:
    """One task's Anthropic Messages transport.

    Attributes:
        client (httpx.AsyncClient): the task's HTTP client.
        endpoint (str): ``inference.endpoint`` (host URL, ``…/v1`` or the full messages URL).
        model (str): ``inference.model``.
        max_tokens (int): per-turn output cap.
        api_key (str | None): the resolved key (never logged), or None.
        key_name (str | None): the variable the key came from, for messages.
        version (str): the ``anthropic-version`` header.
        policy (RetryPolicy): retry bounds.
        sleep: the backoff waiting function.
    """

    client: httpx.AsyncClient
    endpoint: str
    model: str
    max_tokens: int
    api_key: str | None = attrs.field(default=None, repr=False)
    key_name: str | None = None
    version: str = DEFAULT_VERSION
    policy: RetryPolicy = attrs.field(factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = trio.sleep

    async def infer(self, request: InferenceRequest) -> InferenceResult:
        """One Messages call; see :class:`murmur.agent.transports.Transport`."""
        headers = {**JSON_HEADERS, "anthropic-version": self.version}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        data = await post_json(
            self.client,
            messages_url(self.endpoint),
            headers=headers,
            body=request_body(request, model=self.model, max_tokens=self.max_tokens),
            secret=self.api_key,
            policy=self.policy,
            sleep=self.sleep,
            key_name=self.key_name,
        )
        return parse_reply(data)
