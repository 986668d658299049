"""A WASM driver artifact as the agent's transport: upstream's JSON protocol over ``tool/run``.

Each turn calls the driver component's ``murmur:tool/run@0.1.0#run`` once (a fresh store)
with ``tool-input.data`` = the request::

    {"model", "max_tokens", "system", "messages": [...], "tools": [{name, description,
     parameters}], "params": {}}

messages: ``{"role": "user"|"assistant"|"tool", "content": [blocks], "tool_call_id"?,
"is_error"?}``; blocks ``{"type": "text", "text"}`` and ``{"type": "tool_call", "id",
"name", "input"}``. The reply's status must be ``passed`` (otherwise the turn fails with its
data or summary); its data (or summary) is ``{"stop_reason", "content", "error"?, "usage"?}``:

==================  ===============================================================
stop_reason         here
==================  ===============================================================
``tool_call``       the ``tool_call`` blocks run; none present fails the turn
``end_turn``        the text blocks are the answer
``max_tokens``      the same, marked truncated
``error``           fails with the reply's ``error``
anything else       fails: "unsupported stop_reason '<x>'"
==================  ===============================================================

``usage.input_tokens`` / ``output_tokens`` are counted when they are whole numbers.
Specification: ``spec/components.md`` ("Drivers").
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from murmur.agent.transports import (
    AssistantTurn,
    InferenceError,
    InferenceRequest,
    InferenceResult,
    ToolCall,
    ToolResults,
    UserText,
)


def request_payload(request: InferenceRequest, *, model: str, max_tokens: int) -> dict[str, Any]:
    """The driver's JSON request for one turn (pure)."""
    messages: list[dict[str, Any]] = []
    for item in request.items:
        if isinstance(item, UserText):
            messages.append({"role": "user", "content": [{"type": "text", "text": item.text}]})
        elif isinstance(item, AssistantTurn):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": item.text}] if item.text else []
            blocks += [{"type": "tool_call", "id": c.id, "name": c.name, "input": dict(c.arguments or {})}
                       for c in item.tool_calls]
            messages.append({"role": "assistant", "content": blocks})
        elif isinstance(item, ToolResults):
            for r in item.results:
                messages.append({"role": "tool", "content": [{"type": "text", "text": r.content}],
                                 "tool_call_id": r.call_id, "is_error": r.is_error})
    return {
        "model": model, "max_tokens": max_tokens, "system": request.system, "messages": messages,
        "tools": [{"name": t.name, "description": t.description, "parameters": dict(t.input_schema)}
                  for t in request.tools],
        "params": {},
    }


def parse_reply(status: str, data: str | None, summary: str | None) -> InferenceResult:
    """The turn's result from the driver's tool-result (pure).

    Raises:
        InferenceError: ``driver_error`` for a failed status or ``stop_reason: error``;
        ``malformed_response`` for a reply that is not the protocol.
    """
    body = data if data is not None else summary
    if status != "passed":
        raise InferenceError("driver_error", f"the driver failed: {body or status}")
    try:
        reply = json.loads(body or "")
    except ValueError:
        raise InferenceError("malformed_response", "the driver's reply is not JSON") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("content", []), list):
        raise InferenceError("malformed_response", "the driver's reply is not {stop_reason, content}")
    stop = reply.get("stop_reason")
    blocks = [b for b in reply.get("content", []) if isinstance(b, dict)]
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    raw_usage = reply.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    tokens = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    base = InferenceResult(text=text, stop_reason=str(stop), input_tokens=tokens.get("input_tokens", 0),
                           output_tokens=tokens.get("output_tokens", 0))
    if stop == "tool_call":
        calls = tuple(ToolCall(id=str(b.get("id", "")), name=str(b.get("name", "")),
                               arguments=b.get("input") if isinstance(b.get("input"), dict) else None,
                               raw_arguments=json.dumps(b.get("input", {}), separators=(",", ":")))
                      for b in blocks if b.get("type") == "tool_call")
        if not calls:
            raise InferenceError("malformed_response",
                                 "response stop_reason=tool_call but no tool_call blocks were present")
        return attrs.evolve(base, tool_calls=calls)
    if stop in ("end_turn", "max_tokens"):
        return attrs.evolve(base, truncated=stop == "max_tokens")
    if stop == "error":
        raise InferenceError("driver_error", str(reply.get("error") or "the driver reported an error"))
    raise InferenceError("malformed_response", f"unsupported stop_reason '{stop}'")


@attrs.define
class WasmDriver:
    """The :class:`~murmur.agent.transports.Transport` over a driver component.

    Attributes:
        component: the driver (:class:`murmur.components.host.Component`, role ``driver``).
        grant: its :class:`murmur.components.host.Grant`.
        model (str): ``inference.model``.
        max_tokens (int): ``inference.max_tokens``.
    """

    component: Any
    grant: Any
    model: str
    max_tokens: int
    policy: Any = None  # () -> async context manager giving the turn's HttpPolicy (peer relays)
    on_http: Any = None  # each outgoing-HTTP decision (a trace record)
    on_chunk: Any = None  # (text, thinking): the driver's streamed chunks (the task's A2A stream)

    async def infer(self, request: InferenceRequest) -> InferenceResult:
        """One turn through the driver (off the Trio loop; cancellable)."""
        from murmur.components.host import ComponentFault, Hooks, call_tool

        payload = json.dumps(request_payload(request, model=self.model, max_tokens=self.max_tokens))
        try:
            if self.policy is None:
                out = await call_tool(self.component, self.grant, payload,
                                      hooks=Hooks(on_http=self.on_http, on_chunk=self.on_chunk))
            else:
                async with self.policy() as http:
                    out = await call_tool(self.component, attrs.evolve(self.grant, http=http), payload,
                                          hooks=Hooks(on_http=self.on_http, on_chunk=self.on_chunk))
        except ComponentFault as exc:
            raise InferenceError("driver_error", f"{exc.diagnostic.code}: {exc.diagnostic.message}",
                                 code=exc.diagnostic.code) from None
        return parse_reply(out.status, out.data, out.summary)
