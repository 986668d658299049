"""Test doubles for the agent loop: a scripted HTTP provider, a trace sink, a task context.

:class:`ScriptedServer` is a tiny HTTP/1.1 server on ``127.0.0.1:0`` (raw Trio streams, so
a test can see exactly when a client abandons a request). It answers each request with the
next :class:`Reply` of its script and records what it received.

A request whose JSON body has ``"stream": true`` (Claude Code's Messages API calls) gets the
reply's Anthropic message as Server-Sent Events, the way the Messages API streams it
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``). Requests a
test does not script (a CLI's side traffic) can be answered by ``side`` instead of the script.

``keys`` (opt-in) makes it check the credential as a real provider does: a request whose
``x-api-key`` (or ``Authorization: Bearer``) is none of ``keys`` is answered 401 in the
provider's own error shape (:func:`refusal_401`: Anthropic's for a Messages API request,
OpenAI's otherwise), recorded in ``refused`` and never given a scripted reply. Without
``keys`` every request is answered (a keyless provider).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path

import attrs
import trio

from murmur.ids import new_id
from murmur.manifest.model import (
    Capabilities,
    DriverRef,
    Inference,
    Manifest,
    ShellCaps,
    SpawnCaps,
    Transport,
)
from murmur.workload import TaskContext, TaskServices


@attrs.frozen
class Reply:
    """One scripted answer: a JSON body with a status, or ``hold`` (never answer)."""

    body: object = None
    status: int = 200
    headers: Mapping[str, str] = attrs.field(factory=dict)
    hold: bool = False
    # Called when the request arrives (before answering): lets a test synchronise on a turn.
    arrived: trio.Event | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Received:
    """One request the server read."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: object


def carried_key(headers: Mapping[str, str]) -> str | None:
    """The credential a request carries: ``x-api-key``, else ``Authorization: Bearer``."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth[len("Bearer "):] if auth.startswith("Bearer ") else None


def refusal_401(path: str, headers: Mapping[str, str]) -> bytes:
    """A provider's answer to a wrong or missing key, in its own shape (the Anthropic API's for
    a Messages API request or one carrying ``anthropic-version``; OpenAI's otherwise)."""
    if "anthropic-version" in headers or path.split("?")[0].rstrip("/").endswith("/messages"):
        body: dict[str, object] = {"type": "error", "error": {"type": "authentication_error",
                                                              "message": "invalid x-api-key"}}
    else:
        body = {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                          "param": None, "code": "invalid_api_key"}}
    return json.dumps(body).encode()


class ScriptedServer:
    """Serves :class:`Reply` objects in order; records every request (see the module docstring
    for ``keys``)."""

    def __init__(
        self, side: Callable[[Received], Reply | None] | None = None, *, keys: Collection[str] | None = None
    ) -> None:
        self.side = side  # answers unscripted requests (returns None to use the script)
        self.keys = keys
        self.refused: list[Received] = []  # requests answered 401 for their key (``keys`` set)
        self.answered: list[Received] = []  # every request answered otherwise, side traffic included
        self.script: list[Reply] = []
        self.requests: list[Received] = []
        self.port = 0
        self.holding = trio.Event()  # a held request arrived
        self.abandoned = trio.Event()  # the client closed a held request's connection

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Reply) -> None:
        self.script.extend(replies)

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        await serve_requests(stream, self.respond)

    async def respond(self, stream: trio.SocketStream, received: Received) -> bool:
        """Answer one request read from ``stream``; False when the connection is done (a held
        request the client abandoned)."""
        method, path, headers, body = received.method, received.path, received.headers, received.body
        if self.keys is not None and carried_key(headers) not in self.keys:
            self.refused.append(received)
            payload = refusal_401(path, headers)
            head = ["HTTP/1.1 401 Unauthorized", "content-type: application/json",
                    f"content-length: {len(payload)}"]
            await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
            return True
        self.answered.append(received)
        reply = self.side(received) if self.side is not None else None
        if reply is None:
            self.requests.append(received)
            reply = self.script.pop(0) if self.script else Reply({"error": "script ended"}, 500)
        if reply.arrived is not None:
            reply.arrived.set()
        if reply.hold:
            self.holding.set()
            while await stream.receive_some(65536):
                pass
            self.abandoned.set()
            return False
        streamed = isinstance(body, dict) and body.get("stream") is True and reply.status == 200
        if streamed:
            payload = anthropic_sse(reply.body)
            kind = "text/event-stream"
        else:
            payload = json.dumps(reply.body).encode()
            kind = "application/json"
        out = [f"HTTP/1.1 {reply.status} X", f"content-type: {kind}",
               f"content-length: {len(payload)}"]
        out += [f"{k}: {v}" for k, v in reply.headers.items()]
        # a reply to HEAD has no body (RFC 9110): bytes after it would be read as the
        # next reply by a client that keeps the connection (the gateway's pool does)
        await stream.send_all(("\r\n".join(out) + "\r\n\r\n").encode() + (b"" if method == "HEAD" else payload))
        return True


async def serve_requests(
    stream: trio.SocketStream, respond: Callable[[trio.SocketStream, Received], Awaitable[bool]]
) -> None:
    """Answer each request of one kept-alive connection with ``respond`` until the client
    closes it, the stream breaks, or ``respond`` returns False (it closed the connection)."""
    buf = b""
    try:
        while True:
            got = await read_request(stream, buf)
            if got is None:
                return
            received, buf = got
            if not await respond(stream, received):
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def read_request(stream: trio.SocketStream, buf: bytes) -> tuple[Received, bytes] | None:
    """The next HTTP/1.1 request on ``stream`` (``buf``: bytes read already) and the bytes
    after it; None when the client closed the connection. A body that is not JSON is kept
    as bytes."""
    while b"\r\n\r\n" not in buf:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0"))
    while len(buf) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buf += chunk
    raw, buf = buf[:length], buf[length:]
    try:
        body: object = json.loads(raw) if raw else None
    except ValueError:
        body = raw
    return Received(method, path, headers, body), buf


def anthropic_sse(message: object) -> bytes:
    """A whole Messages API reply (``an_text`` / ``an_tools``) as its SSE stream."""
    assert isinstance(message, dict)
    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 1}}
    events: list[tuple[str, dict[str, object]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message.get("content") or []):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": first}),
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": None},
                           "usage": {"output_tokens": usage.get("output_tokens", 0)}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class FakeTrace:
    """A TraceSink that keeps records in memory and, optionally, writes them as JSON lines."""

    def __init__(self, path: Path | None = None) -> None:
        self.records: list[dict[str, object]] = []
        self.path = path

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        event_id = new_id("evt")
        record = {"event_type": event_type, "event_id": event_id, "parent_id": parent_id, **fields}
        self.records.append(record)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        return event_id

    def of(self, event_type: str) -> list[dict[str, object]]:
        return [r for r in self.records if r["event_type"] == event_type]


# --- OpenAI / Anthropic reply builders ---------------------------------------------------


def oa_text(text: str, *, prompt: int = 10, completion: int = 5, finish: str = "stop") -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def oa_tools(*calls: tuple[str, str, object], prompt: int = 10, completion: int = 5) -> dict[str, object]:
    """calls: (id, name, arguments-object-or-raw-string)."""
    tool_calls = [
        {"id": cid, "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for cid, name, args in calls
    ]
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                             "tool_calls": tool_calls},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def an_text(
    text: str, *, inp: int = 10, out: int = 5, stop: str = "end_turn", msg_id: str = "msg_1"
) -> dict[str, object]:
    return {"id": msg_id, "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": text}], "stop_reason": stop,
            "usage": {"input_tokens": inp, "output_tokens": out}}


def an_tools(
    *calls: tuple[str, str, object], text: str = "", inp: int = 10, out: int = 5, msg_id: str = "msg_2"
) -> dict[str, object]:
    content: list[dict[str, object]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
    return {"id": msg_id, "type": "message", "role": "assistant", "content": content,
            "stop_reason": "tool_use", "usage": {"input_tokens": inp, "output_tokens": out}}


# --- manifests and contexts ------------------------------------------------------------


def agent_manifest(
    endpoint: str,
    *,
    driver: str = "murmur-driver-openai",
    api_key: str | None = "${API_KEY}",
    shell: tuple[str, ...] = (),
    spawn: tuple[str, ...] = (),
    max_turns: int = 10,
    system_prompt: str | None = None,
) -> Manifest:
    caps = Capabilities(
        shell=ShellCaps(allow=shell) if shell else None,
        spawn=SpawnCaps(allow=spawn) if spawn else None,
    )
    return Manifest(
        name="agent",
        version="0.1.0",
        capabilities=caps,
        inference=Inference(
            transport=Transport.HTTP,
            endpoint=endpoint,
            model="test-model",
            api_key=api_key,
            driver=DriverRef(driver),
            max_turns=max_turns,
            max_tokens=256,
            system_prompt=system_prompt,
        ),
    )


def task_context(
    manifest: Manifest,
    tmp: Path,
    trace: FakeTrace,
    *,
    text: str = "do the thing",
    trust: str = "trusted",
    origin: str = "user",
    services: TaskServices | None = None,
    env: Mapping[str, str] | None = None,
) -> TaskContext:
    workdir = tmp / "work"
    records = tmp / "records"
    workdir.mkdir(exist_ok=True)
    records.mkdir(exist_ok=True)
    return TaskContext(
        session_id=new_id("ses"),
        task_id=new_id("tsk"),
        context_id=new_id("ctx"),
        text=text,
        origin=origin,
        trust=trust,
        manifest=manifest,
        capsule_root=tmp,
        workdir=workdir,
        records_dir=records,
        trace=trace,
        task_event_id=new_id("evt"),
        shell_env=dict(env) if env is not None else {"PATH": "/usr/bin:/bin"},
        services=services or TaskServices(),
    )


def files_under(root: Path) -> list[Path]:
    """Every regular file below ``root`` (sync helper for async tests)."""
    return [p for p in root.rglob("*") if p.is_file()]


def live_in_group(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are alive (not zombies), read from /proc."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


async def group_gone(pgid: int, polls: int = 250) -> bool:
    """True once no live process is left in ``pgid`` (SIGKILL lands asynchronously, so this
    polls /proc every 20 ms, at most ``polls`` times; False if one is still alive)."""
    for _ in range(polls):
        if not live_in_group(pgid):
            return True
        await trio.sleep(0.02)
    return False
