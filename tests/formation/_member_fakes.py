"""Test doubles for the member side: a scripted member door, a trace sink, engine runners."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import trio

from murmur.formation.member.addresses import AddressBook
from murmur.formation.member.calls import CallEngine

WORKER_URL = "http://127.0.0.1:45123"
CRITIC_URL = "http://127.0.0.1:45124"
WORKER_TOKEN = "mft1.d29ya2VyLXRva2Vu.c2lnbmF0dXJl"
CRITIC_TOKEN = "mft1.Y3JpdGljLXRva2Vu.c2lnbmF0dXJl"
BUSY = "task rejected: capsule is busy"


def task_body(state: str, *, tid: str = "tsk_member", text: str | None = None, answer: str | None = None,
              no_answer: bool = False) -> bytes:
    """A JSON-RPC reply holding one task (SendMessage shape when ``wrap``)."""
    task: dict[str, Any] = {"id": tid, "contextId": "ctx_member", "status": {"state": f"TASK_STATE_{state}"}}
    if text is not None:
        task["status"]["message"] = {"role": "ROLE_AGENT", "parts": [{"text": text}]}
    if answer is not None:
        task["artifacts"] = [{"artifactId": "response", "parts": [{"text": answer}]}]
    if no_answer:
        task["metadata"] = {"murmur": {"noAnswer": True}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": task}).encode()


def send_body(state: str, **kw: Any) -> bytes:
    """A SendMessage reply (``{"task": …}``)."""
    inner = json.loads(task_body(state, **kw))["result"]
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"task": inner}}).encode()


# Script entries: a callable returning (status, body) / raising httpx.ConnectError, optionally async.
Step = Callable[[], Any]


def reply(status: int, body: bytes) -> Step:
    return lambda: (status, body)


def taken(tid: str = "tsk_member") -> Step:
    return reply(200, send_body("SUBMITTED", tid=tid))


def busy() -> Step:
    return reply(200, send_body("REJECTED", tid="tsk_refused", text=BUSY))


def unanswered() -> Step:
    def fail() -> Any:
        raise httpx.ConnectError("connection refused")

    return fail


def slow(seconds: float, then: Step) -> Step:
    async def go() -> Any:
        await trio.sleep(seconds)
        return then()

    return go


@attrs.define
class Request:
    """One request the fake door received."""

    url: str
    headers: Mapping[str, str]  # httpx.Headers: case-insensitive, as on the wire
    method: str
    params: dict[str, Any]
    at: float


class FakeDoor:
    """A scripted member door, served to the engine through ``httpx.MockTransport``.

    ``sends``/``gets`` are consumed in order; when ``gets`` runs out, the last entry repeats.
    """

    def __init__(self, sends: list[Step] | None = None, gets: list[Step] | None = None) -> None:
        self.sends = list(sends or [])
        self.gets = list(gets or [])
        self.requests: list[Request] = []

    def methods(self) -> list[str]:
        return [r.method for r in self.requests]

    def times(self, method: str) -> list[float]:
        return [r.at for r in self.requests if r.method == method]

    def transport(self) -> httpx.MockTransport:
        """The transport an engine sends through."""
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        req = json.loads(request.content)
        self.requests.append(Request(str(request.url), request.headers, req["method"], req["params"], trio.current_time()))
        if req["method"] == "SendMessage":
            step = self.sends.pop(0)
        elif req["method"] == "GetTask":
            step = self.gets.pop(0) if len(self.gets) > 1 else self.gets[0]
        elif "id" not in req["params"]:  # CancelTask by messageId: this fake took nothing
            step = reply(200, json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                          "error": {"code": -32001, "message": "task was not found"}}).encode())
        else:
            step = reply(200, task_body("CANCELED", tid=req["params"]["id"]))
        got = step()
        if hasattr(got, "__await__"):
            got = await got
        status, body = got
        return httpx.Response(status, content=body)


class Sink:
    """Collects trace records (implements ``workload.TraceSink``)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        self.records.append({"event_type": event_type, "parent_id": parent_id, **fields})
        return f"evt_{len(self.records)}"

    def of(self, event_type: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["event_type"] == event_type]

    def types(self) -> list[str]:
        return [str(r["event_type"]) for r in self.records]


def make_engine(door: FakeDoor, *, allow: tuple[str, ...] = ("localhost",), urls: Mapping[str, str] | None = None,
                deadline: float = 600.0, jitter: float = 0.1) -> tuple[CallEngine, Sink]:
    """An engine for member ``lead`` calling ``worker`` and ``critic`` through ``door``."""
    book = AddressBook(("worker", "critic"))
    book.update({"worker": WORKER_URL, "critic": CRITIC_URL} if urls is None else urls)
    engine = CallEngine(
        member="lead",
        tokens={"worker": WORKER_TOKEN, "critic": CRITIC_TOKEN},
        addresses=book,
        network_allow=allow,
        deadline_secs=deadline,
        transport=door.transport(),
        jitter=lambda: jitter,
    )
    sink = Sink()
    engine.bind(sink, "evt_session")
    return engine, sink


@asynccontextmanager
async def engine_running(engine: CallEngine) -> AsyncIterator[trio.Nursery]:
    """Run ``engine`` in a nursery for the block; cancel it after."""
    async with trio.open_nursery() as n:
        n.start_soon(engine.run)
        yield n
        n.cancel_scope.cancel()
