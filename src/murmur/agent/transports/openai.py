"""``murmur-driver-openai``: OpenAI-compatible Chat Completions with tool calls.

Serves the OpenAI API and the many servers that speak its Chat Completions dialect (vLLM,
llama.cpp server, Ollama, LM Studio …). One ``POST <endpoint>/chat/completions`` per turn,
non-streaming, ``Authorization: Bearer <key>`` when a key is configured.

``driver.config`` keys understood:

* ``token_limit_field`` — the body field carrying ``inference.max_tokens``: ``max_tokens``
  (default; what compatible servers read) or ``max_completion_tokens`` (newer OpenAI models).

Pure translation (:func:`request_body`, :func:`parse_reply`) is separate from the I/O
(:class:`OpenAIDriver`). Design: spec/agent.md, "Transports".
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

ARTIFACT = "murmur-driver-openai"


def completions_url(endpoint: str) -> str:
    """The request URL for ``endpoint``: a base URL (``…/v1``) gets ``/chat/completions``."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


def request_body(
    request: InferenceRequest, *, model: str, max_tokens: int, token_field: str = "max_tokens"
) -> dict[str, object]:
    """The Chat Completions body for one turn (pure).

    Args:
        request (InferenceRequest): system prompt, conversation, tools.
        model (str): ``inference.model``.
        max_tokens (int): per-turn output cap.
        token_field (str): ``max_tokens`` or ``max_completion_tokens``.

    Returns:
        dict: ``{"model", "messages", token_field, "tools"?}``.
    """
    messages: list[dict[str, object]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for item in request.items:
        if isinstance(item, UserText):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantTurn):
            msg: dict[str, object] = {"role": "assistant", "content": item.text or None}
            if item.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _arguments_text(c)},
                    }
                    for c in item.tool_calls
                ]
            elif not item.text:
                msg["content"] = ""
            messages.append(msg)
        elif isinstance(item, ToolResults):
            for r in item.results:
                messages.append({"role": "tool", "tool_call_id": r.call_id, "content": r.content})
    body: dict[str, object] = {"model": model, "messages": messages, token_field: max_tokens}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.input_schema),
                },
            }
            for t in request.tools
        ]
    return body


def _arguments_text(call: ToolCall) -> str:
    if call.raw_arguments:
        return call.raw_arguments
    return json.dumps(dict(call.arguments or {}), separators=(",", ":"))


def _malformed(why: str) -> InferenceError:
    return malformed_reply("OpenAI", why)


def _parse_arguments(raw: object) -> tuple[Mapping[str, object] | None, str]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, separators=(",", ":"))
    if raw is None or raw == "":
        return {}, ""
    if not isinstance(raw, str):
        return None, str(raw)
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None, raw
    return (parsed if isinstance(parsed, dict) else None), raw


def _text_of(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer content parts
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    raise _malformed("message.content is neither text nor a list of parts")


def parse_reply(data: Mapping[str, Any]) -> InferenceResult:
    """Normalise a Chat Completions reply (pure).

    Args:
        data (Mapping): the JSON object answered.

    Returns:
        InferenceResult: the first choice's text and tool calls, ``finish_reason`` as the
        stop reason, ``usage.prompt_tokens`` / ``completion_tokens``.

    Raises:
        InferenceError: (``malformed_response``) no choices, no message, or tool calls that
            are not function calls with a name.
    """
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _malformed("no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed("the first choice has no message")
    text = _text_of(message.get("content"))
    calls: list[ToolCall] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _malformed("message.tool_calls is not a list")
    for n, raw in enumerate(raw_calls, start=1):
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise _malformed("a tool call has no function name")
        args, raw_args = _parse_arguments(fn.get("arguments"))
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else f"call_{n}"
        calls.append(ToolCall(id=str(call_id), name=fn["name"], arguments=args, raw_arguments=raw_args))
    finish = choice.get("finish_reason")
    stop_reason = finish if isinstance(finish, str) else ""
    input_tokens, output_tokens = usage_tokens(data, "prompt_tokens", "completion_tokens")
    return InferenceResult(
        text=text,
        tool_calls=tuple(calls),
        stop_reason=stop_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        truncated=stop_reason == "length",
    )


@attrs.define
class OpenAIDriver:
    """One task's OpenAI-compatible transport.

    Attributes:
        client (httpx.AsyncClient): the task's HTTP client.
        endpoint (str): ``inference.endpoint`` (base URL or full completions URL).
        model (str): ``inference.model``.
        max_tokens (int): per-turn output cap.
        api_key (str | None): the resolved key (never logged), or None for keyless servers.
        key_name (str | None): the variable the key came from, for messages.
        token_field (str): body field carrying ``max_tokens``.
        policy (RetryPolicy): retry bounds.
        sleep: the backoff waiting function.
    """

    client: httpx.AsyncClient
    endpoint: str
    model: str
    max_tokens: int
    api_key: str | None = attrs.field(default=None, repr=False)
    key_name: str | None = None
    token_field: str = "max_tokens"
    policy: RetryPolicy = attrs.field(factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = trio.sleep

    async def infer(self, request: InferenceRequest) -> InferenceResult:
        """One Chat Completions call; see :class:`murmur.agent.transports.Transport`."""
        headers = dict(JSON_HEADERS)
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        body = request_body(
            request, model=self.model, max_tokens=self.max_tokens, token_field=self.token_field
        )
        data = await post_json(
            self.client,
            completions_url(self.endpoint),
            headers=headers,
            body=body,
            secret=self.api_key,
            policy=self.policy,
            sleep=self.sleep,
            key_name=self.key_name,
        )
        return parse_reply(data)
