"""The trace context on every hop (spec/trace.md "Trace ids"): a session joins its
TRACEPARENT, a door task joins its caller's traceparent, and the work of a task carries its
span into commands, A2A calls, mur-roost and model calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from murmur import tracectx
from murmur.a2a.door_client import A2AClient
from murmur.agent.transports.http import post_json
from murmur.links import protocol
from murmur.roost.client import RoostClient
from murmur.session.trace import read_trace
from murmur.tracectx import SpanContext
from murmur.workload import TaskContext, TaskOutcome
from session.helpers import make_setup, manifest, result, running, send_params

CALLER = SpanContext("c" * 32, "d" * 16)
PARENT = SpanContext("a" * 32, "b" * 16)


class SeesItsSpan:
    """A workload that records the span its task runs under and the TRACEPARENT a command gets."""

    def __init__(self) -> None:
        self.seen: list[tuple[SpanContext | None, str | None]] = []

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        self.seen.append((tracectx.CURRENT.get(), tracectx.with_env({}).get("TRACEPARENT")))
        return TaskOutcome("ok", "done")


async def test_session_joins_and_door_task_joins_its_caller(tmp_path: Path) -> None:
    """Started with TRACEPARENT: session_start continues that span. A door request with a
    traceparent of another trace: its task_start joins that trace under the caller's span, the
    workload runs under the task's span, and session records keep the session's trace."""
    work = SeesItsSpan()
    setup = make_setup(tmp_path, manifest(), work, parent_env={"TRACEPARENT": PARENT.traceparent, "PATH": "/bin"})
    async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as client:
        await result(client, "SendMessage", send_params("hi", returnImmediately=False),
                     headers={"traceparent": CALLER.traceparent})
        await result(client, "SendMessage", send_params("again", returnImmediately=False))
    recs = read_trace(setup.records.trace)
    start = recs[0]
    assert (start["trace_id"], start["parent_span_id"]) == (PARENT.trace_id, PARENT.span_id)
    received = [r for r in recs if r["event_type"] == "a2a_task_received"]
    assert received[0]["traceparent_from_caller"] == CALLER.traceparent
    assert received[1]["traceparent_from_caller"] is None and received[0]["trace_id"] == PARENT.trace_id
    first, second = [r for r in recs if r["event_type"] == "task_start"]
    assert (first["trace_id"], first["parent_span_id"]) == (CALLER.trace_id, CALLER.span_id)
    assert (second["trace_id"], second["parent_span_id"]) == (PARENT.trace_id, start["span_id"])
    ends = [r for r in recs if r["event_type"] == "task_end"]
    assert ends[0]["trace_id"] == CALLER.trace_id and ends[0]["parent_span_id"] == first["span_id"]
    assert work.seen == [(SpanContext(CALLER.trace_id, first["span_id"]), f"00-{CALLER.trace_id}-{first['span_id']}-01"),
                         (SpanContext(PARENT.trace_id, second["span_id"]), f"00-{PARENT.trace_id}-{second['span_id']}-01")]
    assert recs[-1]["event_type"] == "session_end" and recs[-1]["trace_id"] == PARENT.trace_id


def _capture() -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/spawn":
            return httpx.Response(200, json={"approval": "x", "delegation_id": "dlg_" + "1" * 32,
                                             "envelope": {}, "depth_remaining": 1})
        return httpx.Response(200, json={"ok": True})

    return seen, httpx.MockTransport(handler)


async def test_a2a_roost_and_model_calls_carry_the_span() -> None:
    """Inside traced work, the A2A client, the mur-roost client and the model transport send the
    work's traceparent; outside it they send none (a caller's own header is kept)."""
    seen, transport = _capture()
    async with A2AClient(transport=transport) as a2a:
        await a2a.post("http://127.0.0.1:1/", b"{}", {})
        token = tracectx.CURRENT.set(PARENT)
        try:
            await a2a.post("http://127.0.0.1:1/", b"{}", {})
            await a2a.post("http://127.0.0.1:1/", b"{}", {"traceparent": CALLER.traceparent})
            async with RoostClient("http://127.0.0.1:7700", transport=transport) as roost:
                try:
                    await roost.spawn("cred", "worker", "0.1.0")
                except Exception:  # the reply's shape is not what is tested here
                    pass
            async with httpx.AsyncClient(transport=transport) as client:
                await post_json(client, "http://provider.invalid/v1/messages", headers={"x-api-key": "k"},
                                body={"model": "m"}, secret="k")
        finally:
            tracectx.CURRENT.reset(token)
    got = [r.headers.get("traceparent") for r in seen]
    assert got == [None, PARENT.traceparent, CALLER.traceparent, PARENT.traceparent, PARENT.traceparent]
    assert seen[3].url.path == "/spawn" and seen[4].url.host == "provider.invalid"


def test_link_requests_carry_the_commands_traceparent() -> None:
    """The link stub's request names the calling command's TRACEPARENT; the service reads it."""
    raw = json.dumps({"op": "link", "name": "kid", "task": "x", "traceparent": PARENT.traceparent}).encode()
    assert protocol.parse_request(raw).traceparent == PARENT.traceparent
    plain: dict[str, Any] = {"op": "link", "name": "kid", "task": "x"}
    assert protocol.parse_request(json.dumps(plain).encode()).traceparent is None
