"""A scripted OpenAI Responses API server on loopback, for driving the real Codex CLI.

Codex (``codex exec``, 0.171) sends every model call as ``POST <base_url>/responses`` with
``"stream": true`` and reads Server-Sent Events. :class:`ScriptedResponses` answers each
such request with the next :class:`ModelReply` of its script, streamed as the Responses API
streams it (``response.created``, one ``response.output_item.added`` /
``response.output_item.done`` pair per output item, text deltas for messages, then
``response.completed`` carrying the usage), and records every request it read
(:attr:`ScriptedResponses.requests`) so a test can check the instructions, the tool results
and the key header Codex sent. Any other path gets 404 (and is recorded).

Raw Trio streams, HTTP/1.1 with keep-alive and ``content-length`` on every answer, like
``tests/agent/scripted.py``, and like it ``keys`` (opt-in) checks the credential as the
OpenAI API does: a request whose ``Authorization: Bearer`` is none of ``keys`` is answered
401 ``invalid_api_key`` and recorded in ``refused`` only.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
import trio

from .scripted import carried_key, refusal_401, serve_requests

__all__ = [
    "ModelReply",
    "Received",
    "ScriptedResponses",
    "exec_call",
    "function_outputs",
    "input_texts",
    "message",
]


@attrs.frozen
class ModelReply:
    """One scripted model call: output items and the usage to report.

    Attributes:
        items: Responses API output items (:func:`message`, :func:`exec_call`).
        input_tokens / output_tokens / cached_tokens: the usage sent in
            ``response.completed`` (``input_tokens_details.cached_tokens``).
        status: anything but 200 answers with a JSON error body instead of a stream.
    """

    items: Sequence[Mapping[str, object]] = ()
    input_tokens: int = 100
    output_tokens: int = 10
    cached_tokens: int = 0
    status: int = 200
    error: Mapping[str, object] = attrs.field(factory=dict)


@attrs.frozen
class Received:
    """One request the server read (body parsed as JSON when it is JSON)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: object


def message(text: str, *, item_id: str = "msg_1") -> dict[str, object]:
    """An assistant message output item."""
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def exec_call(cmd: str, *, call_id: str = "call_1", item_id: str = "fc_1") -> dict[str, object]:
    """A call of Codex's ``exec_command`` tool running ``cmd`` (a shell command line)."""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": "exec_command",
        "arguments": json.dumps({"cmd": cmd, "yield_time_ms": 10000}),
        "status": "completed",
    }


def input_texts(body: object, role: str) -> list[str]:
    """The ``input_text`` parts of the request's ``input`` messages with ``role``."""
    out: list[str] = []
    if not isinstance(body, dict):
        return out
    for item in body.get("input", []):
        if item.get("type") == "message" and item.get("role") == role:
            out += [c.get("text", "") for c in item.get("content", []) if "text" in c]
    return out


def function_outputs(body: object) -> dict[str, str]:
    """``call_id`` → output text of the request's ``function_call_output`` items."""
    out: dict[str, str] = {}
    if not isinstance(body, dict):
        return out
    for item in body.get("input", []):
        if item.get("type") == "function_call_output":
            value = item.get("output")
            if isinstance(value, list):  # content parts
                value = "".join(str(p.get("text", "")) for p in value if isinstance(p, dict))
            out[str(item.get("call_id"))] = str(value)
    return out


def _sse(events: list[dict[str, object]]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
    )


def _stream(reply: ModelReply, n: int) -> bytes:
    rid = f"resp_{n}"
    events: list[dict[str, object]] = [
        {"type": "response.created", "response": {"id": rid, "status": "in_progress"}},
    ]
    for index, item in enumerate(reply.items):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item.get("type") == "message":
            for part in item.get("content", []):  # type: ignore[attr-defined]
                events.append({"type": "response.output_text.delta", "output_index": index,
                               "item_id": item.get("id"), "content_index": 0,
                               "delta": part.get("text", "")})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({
        "type": "response.completed",
        "response": {
            "id": rid,
            "status": "completed",
            "output": list(reply.items),
            "usage": {
                "input_tokens": reply.input_tokens,
                "input_tokens_details": {"cached_tokens": reply.cached_tokens},
                "output_tokens": reply.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": reply.input_tokens + reply.output_tokens,
            },
        },
    })
    return _sse(events)


class ScriptedResponses:
    """Serves :class:`ModelReply` objects in order on ``POST …/responses``; records requests.

    When the script runs out the server answers 400 with ``script ended`` (not retried by
    Codex), so a test that scripted too few replies fails instead of hanging.
    """

    def __init__(self, script: Sequence[ModelReply] = (), *, keys: Collection[str] | None = None) -> None:
        self.script: list[ModelReply] = list(script)
        self.keys = keys
        self.refused: list[Received] = []  # answered 401 for their key (``keys`` set)
        self.requests: list[Received] = []
        self.port = 0
        self._served = 0

    @property
    def base_url(self) -> str:
        """What Codex's provider ``base_url`` should be (it appends ``/responses``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_calls(self) -> list[Received]:
        return [r for r in self.requests if r.path.endswith("/responses")]

    def add(self, *replies: ModelReply) -> None:
        self.script.extend(replies)

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._connection, listeners)

    def _answer(self, req: Received) -> tuple[int, str, bytes]:
        if req.method != "POST" or not req.path.endswith("/responses"):
            return 404, "application/json", b'{"error":{"message":"not found"}}'
        if not self.script:
            body = {"error": {"message": "script ended", "type": "invalid_request_error"}}
            return 400, "application/json", json.dumps(body).encode()
        reply = self.script.pop(0)
        self._served += 1
        if reply.status != 200:
            return reply.status, "application/json", json.dumps({"error": dict(reply.error)}).encode()
        return 200, "text/event-stream", _stream(reply, self._served)

    async def _connection(self, stream: trio.SocketStream) -> None:
        async def respond(stream: trio.SocketStream, r: Any) -> bool:
            return await self.respond(stream, Received(r.method, r.path, r.headers, r.body))

        await serve_requests(stream, respond)

    async def respond(self, stream: trio.SocketStream, req: Received) -> bool:
        """Answer one request read from ``stream`` (always True: the connection stays)."""
        if self.keys is not None and carried_key(req.headers) not in self.keys:
            self.refused.append(req)
            status, ctype, payload = 401, "application/json", refusal_401(req.path, req.headers)
        else:
            self.requests.append(req)
            status, ctype, payload = self._answer(req)
        out = [f"HTTP/1.1 {status} X", f"content-type: {ctype}", f"content-length: {len(payload)}"]
        await stream.send_all(("\r\n".join(out) + "\r\n\r\n").encode() + payload)
        return True
