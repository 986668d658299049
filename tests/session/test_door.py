"""In-process tests of the door over real TCP: card, JSON-RPC methods, errors, streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import trio
import trio.testing

from murmur.session.auth import Authenticator
from murmur.session.door import Door, DoorBackend
from murmur.session.wire import CAPSULE_EXTENSION, DOOR_EXTENSION

from .helpers import (
    A2A,
    EchoWorkload,
    GateWorkload,
    error_code,
    make_setup,
    manifest,
    result,
    rpc,
    running,
    send_params,
    sse_events,
)


class TestCard:
    async def test_card_fields(self, tmp_path: Path) -> None:
        """The card names the capsule, the JSON-RPC 1.0 interface and the session id."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await c.get("/.well-known/agent-card.json", headers=A2A)
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
            card = r.json()
            assert card["name"] == "echo" and card["version"] == "0.1.0"
            assert card["description"] == "Murmur capsule echo 0.1.0"
            assert card["supportedInterfaces"] == [{"url": h.url + "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
            assert card["capabilities"]["streaming"] is True
            exts = {e["uri"]: e["params"] for e in card["capabilities"]["extensions"]}
            assert exts[CAPSULE_EXTENSION]["sessionId"] == h.session.session_id
            assert exts[DOOR_EXTENSION]["methods"][:2] == ["SendMessage", "SendStreamingMessage"]
            assert [s["id"] for s in card["skills"]] == ["task"]
            assert "securitySchemes" not in card

    async def test_none_lists_no_send(self, tmp_path: Path) -> None:
        """Under task_acceptance none the card lists no SendMessage and no skills."""
        setup = make_setup(tmp_path, manifest(acceptance="none"), EchoWorkload(), no_idle_timeout=True)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            card = (await c.get("/.well-known/agent-card.json")).json()
            assert card["skills"] == []
            exts = {e["uri"]: e["params"] for e in card["capabilities"]["extensions"]}
            assert "SendMessage" not in exts[DOOR_EXTENSION]["methods"]
            assert await error_code(c, "SendMessage", send_params("x")) == -32601

    async def test_other_paths_404(self, tmp_path: Path) -> None:
        """Anything but the card and POST / is not found."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            assert (await c.get("/nope")).status_code == 404


class TestSend:
    async def test_blocking_send_completes(self, tmp_path: Path) -> None:
        """SendMessage without returnImmediately answers at the terminal state with the answer."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await rpc(c, "SendMessage", send_params("hi"), rid="abc")
            body = r.json()
            assert body["id"] == "abc" and body["jsonrpc"] == "2.0"
            task = body["result"]["task"]
            assert task["id"].startswith("tsk_") and task["contextId"].startswith("ctx_")
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert task["status"]["timestamp"].endswith("Z")
            assert task["artifacts"][0]["artifactId"] == "response"
            assert task["artifacts"][0]["parts"] == [{"text": "echo: hi"}]
            assert task["history"][0]["role"] == "ROLE_USER" and task["history"][0]["taskId"] == task["id"]
            got = await result(c, "GetTask", {"id": task["id"]})
            assert got["status"]["state"] == "TASK_STATE_COMPLETED"
            assert "history" not in await result(c, "GetTask", {"id": task["id"], "historyLength": 0})

    async def test_return_immediately(self, tmp_path: Path) -> None:
        """returnImmediately answers at once, before the task ends."""
        gate = GateWorkload()
        async with running(make_setup(tmp_path, manifest(), gate)) as h, httpx.AsyncClient(base_url=h.url) as c:
            res = await result(c, "SendMessage", send_params("x", returnImmediately=True))
            assert res["task"]["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
            await gate.started.wait()
            gate.release.set()

    async def test_caller_context_kept(self, tmp_path: Path) -> None:
        """A caller's contextId is kept."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            p = send_params("x")
            p["message"]["contextId"] = "ctx_caller"
            assert (await result(c, "SendMessage", p))["task"]["contextId"] == "ctx_caller"

    async def test_busy_rejected(self, tmp_path: Path) -> None:
        """single: a second task while busy is REJECTED with the busy message."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(acceptance="single", after="exit"), gate)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            await result(c, "SendMessage", send_params("one", returnImmediately=True))
            await gate.started.wait()
            second = (await result(c, "SendMessage", send_params("two")))["task"]
            assert second["status"]["state"] == "TASK_STATE_REJECTED"
            assert second["status"]["message"]["parts"] == [{"text": "task rejected: capsule is busy"}]
            gate.release.set()
            assert (await h.wait()).status == "ok"

    async def test_message_to_finished_task(self, tmp_path: Path) -> None:
        """A message naming a finished task is -32004; an unknown one -32001; a wrong context -32602."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            task = (await result(c, "SendMessage", send_params("x")))["task"]
            p = send_params("again")
            p["message"]["taskId"] = task["id"]
            assert await error_code(c, "SendMessage", p) == -32004
            p["message"]["contextId"] = "ctx_other"
            assert await error_code(c, "SendMessage", p) == -32602
            p["message"]["taskId"] = "tsk_unknown"
            assert await error_code(c, "SendMessage", p) == -32001


class TestErrors:
    @pytest.mark.parametrize(
        ("params", "code"),
        [
            ({"message": {"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}}, -32602),
            ({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}, -32602),
            ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}, -32602),
            ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "data": 1}]}}, -32602),
            ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "aGk="}]}}, -32005),
            ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "http://x"}]}}, -32005),
            ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "referenceTaskIds": ["t"] * 17}}, -32602),
            ({}, -32602),
            ([1, 2], -32602),
        ],
    )
    async def test_bad_params(self, tmp_path: Path, params: object, code: int) -> None:
        """Malformed messages are refused with the wire's codes."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            assert await error_code(c, "SendMessage", params) == code

    async def test_envelope_errors(self, tmp_path: Path) -> None:
        """Parse error, invalid request, unknown method, versions, push methods; always HTTP 200."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await c.post("/", content=b"{nope", headers=A2A)
            assert r.status_code == 200 and r.json()["error"]["code"] == -32700 and r.json()["id"] is None
            r = await c.post("/", json={"jsonrpc": "2.0", "method": "GetTask"}, headers=A2A)
            assert r.json()["error"]["code"] == -32600
            r = await c.post("/", json={"jsonrpc": "1.0", "id": 3, "method": "GetTask"}, headers=A2A)
            assert r.json()["error"]["code"] == -32600 and r.json()["id"] == 3
            assert await error_code(c, "message/send", send_params("x")) == -32601
            assert await error_code(c, "CreateTaskPushNotificationConfig", {}) == -32003
            assert await error_code(c, "GetTask", {"id": "tsk_nope"}) == -32001
            assert await error_code(c, "GetExtendedAgentCard", {}) == -32004
            err = (await rpc(c, "GetTask", {"id": "tsk_nope"})).json()["error"]
            assert err["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
            assert err["data"][0]["reason"] == "TASK_NOT_FOUND" and err["data"][0]["domain"] == "a2a-protocol.org"

    @pytest.mark.parametrize("version", [None, "0.3", "2.0", "1.1", "1.0,1.0"])
    async def test_version_refused(self, tmp_path: Path, version: str | None) -> None:
        """A missing, other or duplicated A2A-Version is -32009."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            if version == "1.0,1.0":
                headers = httpx.Headers([("A2A-Version", "1.0"), ("A2A-Version", "1.0")])
            else:
                headers = httpx.Headers({"A2A-Version": version} if version else {})
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
            r = await c.post("/", json=body, headers=headers)
            assert r.status_code == 200 and r.json()["error"]["code"] == -32009

    async def test_version_patch_accepted(self, tmp_path: Path) -> None:
        """1.0.<n> is protocol 1.0."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            assert await error_code(c, "GetTask", {"id": "x"}, headers={"A2A-Version": "1.0.3"}) == -32001


class TestCancel:
    async def test_cancel_running_then_late_completion(self, tmp_path: Path) -> None:
        """CancelTask of a running task answers CANCELED; the workload's late answer is ignored."""
        gate = GateWorkload()
        async with running(make_setup(tmp_path, manifest(), gate)) as h, httpx.AsyncClient(base_url=h.url) as c:
            tid = (await result(c, "SendMessage", send_params("x", returnImmediately=True)))["task"]["id"]
            await gate.started.wait()
            res = await result(c, "CancelTask", {"id": tid})
            assert res["status"]["state"] == "TASK_STATE_CANCELED"
            assert await error_code(c, "CancelTask", {"id": tid}) == -32002
            assert await error_code(c, "CancelTask", {"id": "tsk_x"}) == -32001
            await trio.testing.wait_all_tasks_blocked()
            assert gate.cancelled == ["x"]
            assert (await result(c, "GetTask", {"id": tid}))["status"]["state"] == "TASK_STATE_CANCELED"
            await h.session.flush_records()
            assert h.session.setup.records.task_result(tid).read_text() == "canceled: CancelTask\n"

    async def test_cancel_queued(self, tmp_path: Path) -> None:
        """A queued task is cancelled before any work and never starts."""
        gate = GateWorkload()
        async with running(make_setup(tmp_path, manifest(), gate)) as h, httpx.AsyncClient(base_url=h.url) as c:
            await result(c, "SendMessage", send_params("first", returnImmediately=True))
            await gate.started.wait()
            queued = (await result(c, "SendMessage", send_params("second", returnImmediately=True)))["task"]["id"]
            assert (await result(c, "CancelTask", {"id": queued}))["status"]["state"] == "TASK_STATE_CANCELED"
            gate.release.set()
            await trio.testing.wait_all_tasks_blocked()
            assert gate.order == ["first"]


class TestList:
    async def test_list_shapes_and_paging(self, tmp_path: Path) -> None:
        """ListTasks: newest first, page tokens, totals, context and status filters."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            ids = []
            for i in range(3):
                p = send_params(f"t{i}")
                p["message"]["contextId"] = "ctx_a" if i < 2 else "ctx_b"
                ids.append((await result(c, "SendMessage", p))["task"]["id"])
            res = await result(c, "ListTasks", {})
            assert res["totalSize"] == 3 and res["pageSize"] == 50 and res["nextPageToken"] == ""
            assert [t["id"] for t in res["tasks"]] == ids[::-1]
            assert "artifacts" not in res["tasks"][0]
            page = await result(c, "ListTasks", {"pageSize": 2})
            assert len(page["tasks"]) == 2 and page["nextPageToken"]
            rest = await result(c, "ListTasks", {"pageSize": 2, "pageToken": page["nextPageToken"]})
            assert [t["id"] for t in rest["tasks"]] == [ids[0]] and rest["nextPageToken"] == ""
            assert (await result(c, "ListTasks", {"contextId": "ctx_a"}))["totalSize"] == 2
            assert (await result(c, "ListTasks", {"status": "TASK_STATE_FAILED"}))["totalSize"] == 0
            withart = await result(c, "ListTasks", {"includeArtifacts": True})
            assert withart["tasks"][0]["artifacts"][0]["artifactId"] == "response"
            assert await error_code(c, "ListTasks", {"pageSize": 101}) == -32602
            assert await error_code(c, "ListTasks", {"pageToken": "zz"}) == -32602


class TestStreams:
    async def test_streaming_send(self, tmp_path: Path) -> None:
        """SendStreamingMessage: task, working, artifact, completed, then the server closes."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await rpc(c, "SendStreamingMessage", send_params("hi"), rid=7)
            assert r.headers["content-type"].startswith("text/event-stream")
            events = sse_events(r.text)
            assert all(e["id"] == 7 for e in events)
            kinds = [next(iter(e["result"])) for e in events]
            assert kinds == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
            assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
            assert events[1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
            assert events[2]["result"]["artifactUpdate"]["artifact"]["parts"] == [{"text": "echo: hi"}]
            assert events[3]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    async def test_subscribe_with_keepalive(self, tmp_path: Path) -> None:
        """SubscribeToTask: snapshot first, keep-alive comments while silent, closed at the end."""
        gate = GateWorkload()
        async with running(make_setup(tmp_path, manifest(), gate)) as h, httpx.AsyncClient(base_url=h.url) as c:
            tid = (await result(c, "SendMessage", send_params("x", returnImmediately=True)))["task"]["id"]
            await gate.started.wait()
            body = {"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": tid}}
            chunks: list[str] = []
            async with c.stream("POST", "/", json=body, headers=A2A) as resp:
                async for text in resp.aiter_text():
                    chunks.append(text)
                    joined = "".join(chunks)
                    if ": keepalive" in joined and not gate.release.is_set():
                        gate.release.set()
            raw = "".join(chunks)
            events = sse_events(raw)
            assert next(iter(events[0]["result"])) == "task"
            assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
            assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert raw.index(": keepalive") < raw.index("TASK_STATE_COMPLETED")
            assert await error_code(c, "SubscribeToTask", {"id": tid}) == -32004
            assert await error_code(c, "SubscribeToTask", {"id": "tsk_none"}) == -32001

    async def test_rejected_stream_is_one_event(self, tmp_path: Path) -> None:
        """A rejected streaming send gets the REJECTED task and the stream closes."""
        gate = GateWorkload()
        setup = make_setup(tmp_path, manifest(acceptance="single", after="exit"), gate)
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            await result(c, "SendMessage", send_params("one", returnImmediately=True))
            await gate.started.wait()
            events = sse_events((await rpc(c, "SendStreamingMessage", send_params("two"))).text)
            assert len(events) == 1
            assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_REJECTED"
            gate.release.set()


class TestHttpErrors:
    """Every error the door sends is JSON; another method on a known path is 405 (issue 16)."""

    @pytest.mark.parametrize(
        ("method", "path", "status", "allow"),
        [
            ("GET", "/", 405, "POST"),
            ("PUT", "/", 405, "POST"),
            ("DELETE", "/", 405, "POST"),
            ("POST", "/.well-known/agent-card.json", 405, "GET, HEAD"),
            ("GET", "/nope", 404, None),
            ("OPTIONS", "/", 405, "POST"),
        ],
    )
    async def test_json_status(self, tmp_path: Path, method: str, path: str, status: int, allow: str | None) -> None:
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await c.request(method, path)
            assert r.status_code == status
            assert r.headers["content-type"] == "application/json"
            body = r.json()
            assert set(body) == {"error", "message"}
            assert body["error"] == {404: "not_found", 405: "method_not_allowed"}[status]
            assert r.headers.get("allow") == allow


    async def test_head_card(self, tmp_path: Path) -> None:
        """HEAD on the card answers its headers (JSON, the GET's length) and no body."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            got = await c.get("/.well-known/agent-card.json")
            head = await c.head("/.well-known/agent-card.json")
            assert head.status_code == 200 and head.content == b""
            assert head.headers["content-type"] == "application/json"
            assert head.headers["content-length"] == str(len(got.content))
            assert got.headers["cache-control"] == "no-cache"


class TestLifespan:
    """The door acknowledges the ASGI lifespan itself (no web framework)."""

    async def test_startup_and_shutdown_acknowledged(self) -> None:
        door = Door(cast(DoorBackend, object()), cast(Authenticator, object()))
        to_app, app_in = trio.open_memory_channel[dict[str, Any]](2)
        app_out, from_app = trio.open_memory_channel[dict[str, Any]](2)
        await to_app.send({"type": "lifespan.startup"})
        await to_app.send({"type": "lifespan.shutdown"})
        with trio.fail_after(5):
            await door.app({"type": "lifespan"}, app_in.receive, app_out.send)
        assert [from_app.receive_nowait()["type"], from_app.receive_nowait()["type"]] == [
            "lifespan.startup.complete",
            "lifespan.shutdown.complete",
        ]


class TestHostileRequests:
    """Hostile bodies are -32700/-32600, never an internal error; echoes are bounded (issue 16)."""

    @pytest.mark.parametrize(
        ("content", "why"),
        [
            (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":' + b"[" * 10_000 + b"]" * 10_000 + b"}}", "nested deeper"),
            (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\\ud800"}}', "unpaired surrogate"),
            (b'{"jsonrpc":"2.0","id":NaN,"method":"GetTask"}', "`NaN` is not a JSON number"),
        ],
        ids=["deep", "surrogate", "nan"],
    )
    async def test_parse_error(self, tmp_path: Path, content: bytes, why: str) -> None:
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await c.post("/", content=content, headers=A2A)
            assert r.status_code == 200
            err = r.json()["error"]
            assert err["code"] == -32700
            assert why in err["message"]

    async def test_echoed_task_id_is_cut(self, tmp_path: Path) -> None:
        """A 1 MiB task id comes back as its first 199 characters and an ellipsis."""
        tid = "t" * (1 << 20)
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await rpc(c, "GetTask", {"id": tid})
            err = r.json()["error"]
            assert err["code"] == -32001
            assert err["message"] == f"task {'t' * 199}… was not found"
            assert len(r.content) < 1000

    async def test_echoed_method_is_cut(self, tmp_path: Path) -> None:
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            r = await rpc(c, "M" * 100_000)
            err = r.json()["error"]
            assert err["code"] == -32601
            assert len(err["message"]) < 260 and "…" in err["message"]
