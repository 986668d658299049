"""call-member from an agent: the tool, the busy/started result, the continuation (in process).

The lead is an agent capsule prepared by the real ``mur run`` preparation, talking to a
scripted OpenAI-compatible provider on loopback; the worker is a plan member; both doors are
real. The provider sees exactly what the model would: the tool, its result, the fenced answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from murmur import lifeline
from murmur.formation.wire import channel
from murmur.session.trace import read_trace

from ._launcher_double import (
    LauncherDouble,
    prepare_member,
    run_member,
    worker_capsule,
    write_capsule,
)

LEAD = """\
name: agent-lead
version: 0.1.0
artifacts:
  - name: murmur-driver-openai
    version: 0.2.0
    runtime: driver
capabilities:
  network:
    allow: [localhost]
network:
  authentication:
    scheme: bearer
lifecycle:
  task_acceptance: single
  after_task: exit
inference:
  driver:
    artifact: murmur-driver-openai
  endpoint: {endpoint}
  model: local-model
  api_key: ${{API_KEY}}
  max_tokens: 256
  max_turns: 4
"""


class Provider:
    """A minimal OpenAI-compatible chat endpoint answering from a script; records requests."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._one, listeners)

    async def _one(self, stream: trio.SocketStream) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += await stream.receive_some(65536)
                body, buf = buf[:length], buf[length:]
                self.requests.append(json.loads(body))
                payload = json.dumps(self.replies.pop(0)).encode()
                await stream.send_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\n\r\n".encode() + payload
                )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return


def text(t: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                         "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


@pytest.fixture(autouse=True)
def fresh_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lifeline claims are per process; each test starts with none."""
    monkeypatch.setattr(lifeline, "_claimed", set())


@pytest.fixture
def launcher() -> Iterator[LauncherDouble]:
    ld = LauncherDouble()
    yield ld
    ld.close()


class TestAgentCallsMember:
    async def test_tool_then_continuation(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """The model calls call-member, ends its turn, and continues once with the fenced answer."""
        provider = Provider([
            tool("call-member", {"member": "worker", "task": "ping"}),
            text("I asked worker; waiting for its answer."),
            text("worker answered: worker heard: ping"),
        ])
        async with trio.open_nursery() as n:
            await n.start(provider.serve)
            wp = launcher.member("worker")
            launcher.handed.update({wp.channel_r, wp.lifeline_r})
            worker = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(wp), tmp_path / "w")
            async with run_member(worker) as w:
                lp = launcher.member("lead", ["worker"], entry=True,
                                     later=channel.encode_addresses([channel.Address("worker", w.url)]))
                launcher.handed.update({lp.channel_r, lp.lifeline_r})
                src = write_capsule(tmp_path / "src", "lead", LEAD.format(endpoint=f"http://127.0.0.1:{provider.port}/v1"), "")
                env = launcher.env(lp, API_KEY="sk-test-key")
                lead = prepare_member(src, env, tmp_path / "l", task="ask the worker")
                async with run_member(lead) as ld:
                    s = await ld.wait(30)
            n.cancel_scope.cancel()
        assert (s.status, s.exit_code) == ("ok", 0)
        assert lead.records.result.read_text() == "worker answered: worker heard: ping\n"
        tools = {t["function"]["name"]: t["function"] for t in provider.requests[0]["tools"]}
        assert tools["call-member"]["parameters"]["properties"]["member"]["enum"] == ["worker"]
        tool_result = provider.requests[1]["messages"][-1]["content"]
        assert "Called worker: started" in tool_result and w.url not in tool_result
        continuation = provider.requests[2]["messages"][-1]["content"]
        assert "<untrusted-content source=member:worker>" in continuation
        assert "worker heard: ping" in continuation and "ended completed" in continuation
        recs = read_trace(lead.records.trace)
        kinds = [r["event_type"] for r in recs]
        assert kinds.index("member_call_start") < kinds.index("member_call") < kinds.index("task_continued")
        call = next(r for r in recs if r["event_type"] == "member_call")
        assert (call["status"], call["delivered"]) == ("completed", True)
        port = w.url.rsplit(":", 1)[1]
        blob = json.dumps(provider.requests) + lead.records.trace.read_text()
        assert f"127.0.0.1:{port}" not in blob and "mft1." not in blob
        os.close(lp.lifeline_w)
        lp.lifeline_w = -1
