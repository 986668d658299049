"""Inference transports: the provider-neutral conversation and the drivers that carry it.

The agent loop speaks only the types in this module. A transport turns an
:class:`InferenceRequest` (system prompt, conversation items, tools) into one provider call
and the provider's reply into an :class:`InferenceResult`. Built-in HTTP drivers, chosen by
``inference.driver.artifact`` (``spec/agent.md`` "Drivers"):

* ``murmur-driver-openai`` — OpenAI-compatible Chat Completions with tool calls
  (:mod:`murmur.agent.transports.openai`);
* ``murmur-driver-anthropic`` — Anthropic Messages API with tool use
  (:mod:`murmur.agent.transports.anthropic`);
* ``murmur-driver-deepseek`` — the OpenAI driver (DeepSeek's API is Chat Completions).

``inference.transport: process`` runs an agent CLI per task instead
(:mod:`murmur.agent.transports.stdio`); it does not use these types.

Design: spec/agent.md, "Transports".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs

__all__ = [
    "AssistantTurn",
    "InferenceError",
    "InferenceRequest",
    "InferenceResult",
    "Item",
    "ToolCall",
    "ToolResult",
    "ToolResults",
    "ToolSpec",
    "Transport",
    "UserText",
]


@attrs.frozen
class ToolSpec:
    """One tool as offered to the model.

    Attributes:
        name (str): the wire name (``^[A-Za-z0-9_-]{1,64}$``, accepted by both providers).
        description (str): one paragraph for the model.
        input_schema (Mapping[str, object]): a JSON Schema object for the tool's input.
    """

    name: str
    description: str
    input_schema: Mapping[str, object]


@attrs.frozen
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        id (str): the provider's call id (echoed back with the result).
        name (str): the wire name the model used (may name no offered tool).
        arguments (Mapping[str, object] | None): the parsed input; ``None`` when the model's
            arguments were not a JSON object.
        raw_arguments (str): the arguments as received (JSON text), for the trace.
    """

    id: str
    name: str
    arguments: Mapping[str, object] | None
    raw_arguments: str = ""


@attrs.frozen
class ToolResult:
    """The answer to one :class:`ToolCall`, as the model will read it.

    Attributes:
        call_id (str): the :attr:`ToolCall.id` answered.
        name (str): the wire name of the tool called.
        content (str): the text the model reads (already fenced where untrusted).
        is_error (bool): true when the call was refused or failed.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False


@attrs.frozen
class UserText:
    """A user message: the task itself, or a continuation carrying member answers."""

    text: str


@attrs.frozen
class AssistantTurn:
    """What the model said in one turn: text and/or tool calls."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@attrs.frozen
class ToolResults:
    """The results of every tool call of the preceding :class:`AssistantTurn`, in order."""

    results: tuple[ToolResult, ...]


Item = UserText | AssistantTurn | ToolResults


@attrs.frozen
class InferenceRequest:
    """Everything one inference call sends.

    Attributes:
        system (str | None): the system prompt, or None.
        items (tuple[Item, ...]): the conversation so far, oldest first; starts with a
            :class:`UserText`.
        tools (tuple[ToolSpec, ...]): the tools the model may call this turn.
    """

    system: str | None
    items: tuple[Item, ...]
    tools: tuple[ToolSpec, ...] = ()


@attrs.frozen
class InferenceResult:
    """One provider reply, normalised.

    Attributes:
        text (str): the assistant's text (may be empty when it only called tools).
        tool_calls (tuple[ToolCall, ...]): the tool calls, in the order the model gave them.
        stop_reason (str): the provider's own stop word (``stop``, ``tool_calls``,
            ``length`` / ``end_turn``, ``tool_use``, ``max_tokens`` …), recorded as is.
        input_tokens (int): prompt tokens the provider counted (0 when not reported).
        output_tokens (int): completion tokens the provider counted (0 when not reported).
        truncated (bool): the reply was cut by ``max_tokens``.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False


class InferenceError(Exception):
    """An inference call that produced no usable reply; the task fails with it.

    The message never holds the provider key (transports build it from status codes and
    the endpoint only, and redact the key from anything the provider echoed).

    Attributes:
        cause (str): the ``task_failed`` cause: ``driver_error`` | ``credential_rejected`` |
            ``malformed_response`` | ``runtime_error``.
        message (str): one sentence for ``out/result.txt`` and the trace.
        status (int | None): the HTTP status, when there was one.
        code (str | None): a diagnostic code (``E-RUN-027`` for a rejected credential).
    """

    def __init__(
        self, cause: str, message: str, *, status: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message
        self.status = status
        self.code = code


class Transport(Protocol):
    """A provider driver: one call per turn."""

    async def infer(self, request: InferenceRequest) -> InferenceResult:
        """Send one turn and return the model's reply.

        Raises:
            InferenceError: the provider failed, refused the key or answered nonsense.
            trio.Cancelled: the task was cancelled; the request is abandoned.
        """
        ...
