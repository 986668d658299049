"""Outgoing HTTP from components: refused before any connection unless network.allow covers it.

The negative control is the same request under a grant that covers the host: the real
wasi:http handler accepts it (``handle`` returns a future), where the uncovered one is refused
with ``HTTP-request-denied`` and no connection reaches the listener.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator

import pytest
import trio

from agent.scripted import FakeTrace, task_context
from components.wat import http_probe
from murmur.components.host import Component, Grant, Hooks, call_tool
from murmur.components.outgoing_http import HttpDecision, HttpPolicy, decide


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.setblocking(False)
    yield srv
    srv.close()


def _accepted(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _probe() -> Component:
    data = http_probe()
    return Component("probe", "tool", data, hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("policy, reason", [
    (None, "the component has no network grant"),
    (HttpPolicy(("example.com",)), "no network.allow rule covers it"),
    (HttpPolicy(("https://127.0.0.1",)), "no network.allow rule covers it"),
])
async def test_uncovered_host_refused_before_any_connection(listener: socket.socket, policy: HttpPolicy | None,
                                                            reason: str) -> None:
    """The component is told HTTP-request-denied; the decision is reported; nothing connects."""
    port = listener.getsockname()[1]
    seen: list[HttpDecision] = []
    got = await call_tool(_probe(), Grant(http=policy), f"127.0.0.1:{port}", hooks=Hooks(on_http=seen.append))
    assert got.status == "failed"  # the probe's word for HTTP-request-denied
    assert seen == [HttpDecision(f"http://127.0.0.1:{port}", False, reason)]
    await trio.sleep(0.05)
    assert not _accepted(listener)


async def test_covered_host_goes_to_the_real_handler(listener: socket.socket) -> None:
    """Negative control: the same request under a covering grant is handed to wasi:http."""
    port = listener.getsockname()[1]
    seen: list[HttpDecision] = []
    got = await call_tool(_probe(), Grant(http=HttpPolicy((f"http://127.0.0.1:{port}",))),
                          f"127.0.0.1:{port}", hooks=Hooks(on_http=seen.append))
    assert got.status == "passed" and seen[0].allowed


@pytest.mark.parametrize("authority", ["alice.formation.invalid", "x.y.formation.invalid:80", "formation.invalid"])
def test_formation_invalid_names_get_one_refusal(authority: str) -> None:
    """Every name under formation.invalid is refused with the same words, even if a rule names it."""
    got = decide(HttpPolicy(("alice.formation.invalid", "localhost")), "http", authority)
    assert not got.allowed and got.reason == "not a member this member may call"


async def test_agent_tool_denial_is_a_trace_record(tmp_path: object, listener: socket.socket) -> None:
    """Through the agent side, the decision is a component_http trace record."""
    from pathlib import Path

    from agent.scripted import agent_manifest
    from murmur.agent.components import http_policy, http_recorder
    from murmur.manifest.model import ArtifactRef

    manifest = agent_manifest("http://127.0.0.1:9")
    trace = FakeTrace()
    ctx = task_context(manifest, Path(str(tmp_path)), trace)
    port = listener.getsockname()[1]
    entry = ArtifactRef("probe", "0.1.0")
    got = await call_tool(_probe(), Grant(http=http_policy(ctx, entry)), f"127.0.0.1:{port}",
                          hooks=Hooks(on_http=http_recorder(ctx, "probe")))
    assert got.status == "failed"
    [rec] = trace.of("component_http")
    assert (rec["component"], rec["allowed"], rec["url"]) == ("probe", False, f"http://127.0.0.1:{port}")


class _Door:
    """A member's door on loopback: answers 200 and keeps each request's headers."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.url = ""

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.url = f"http://localhost:{listeners[0].socket.getsockname()[1]}"
        task_status.started()
        await trio.serve_listeners(self._one, listeners)

    async def _one(self, stream: trio.SocketStream) -> None:
        import h11

        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
                continue
            if isinstance(event, h11.Request):
                self.headers.append({k.decode(): v.decode() for k, v in event.headers})
            if isinstance(event, h11.EndOfMessage):
                break
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=[(b"content-length", b"2")])) or b"")
        await stream.send_all(conn.send(h11.Data(data=b"ok")) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        await stream.aclose()


async def _call_peer(tmp_path: object, door: _Door, authority: str, allow: tuple[str, ...]) -> tuple[str, list[dict[str, object]]]:
    from pathlib import Path

    from agent.scripted import agent_manifest
    from components.wat import http_fetch
    from murmur.agent.components import http_recorder, peer_policy
    from murmur.manifest.model import ArtifactRef, Capabilities, NetworkCaps
    from murmur.workload import TaskServices

    async def route(name: str) -> tuple[str, dict[str, str]] | None:
        if name != "coder":
            return None
        return door.url, {"Authorization": "Bearer edge-token", "x-murmur-task-origin": "peer",
                          "x-murmur-task-trust": "trusted"}

    import attrs

    manifest = attrs.evolve(agent_manifest("http://127.0.0.1:9"), capabilities=Capabilities(network=NetworkCaps(allow=allow)))
    trace = FakeTrace()
    ctx = task_context(manifest, Path(str(tmp_path)), trace,
                       services=TaskServices(callees=("coder",), peer_route=route))
    data = http_fetch()
    comp = Component("fetch", "tool", data, hashlib.sha256(data).hexdigest())
    async with peer_policy(ctx, ArtifactRef("fetch", "0.1.0")) as policy:
        got = await call_tool(comp, Grant(http=policy), authority, hooks=Hooks(on_http=http_recorder(ctx, "fetch")))
    return got.status, trace.of("component_http")


async def test_virtual_peer_address_reaches_the_member_with_the_edge_token(tmp_path: object, nursery: trio.Nursery) -> None:
    """A component's request to coder.formation.invalid reaches coder's door with the edge's
    token, origin peer and the task's trust; the record names only the virtual address."""
    door = _Door()
    await nursery.start(door.serve)
    status, records = await _call_peer(tmp_path, door, "coder.formation.invalid", ("localhost",))
    assert status == "passed"
    [sent] = door.headers
    assert sent["authorization"] == "Bearer edge-token"
    assert (sent["x-murmur-task-origin"], sent["x-murmur-task-trust"]) == ("peer", "trusted")
    [rec] = records
    assert (rec["url"], rec["allowed"]) == ("http://coder.formation.invalid", True)
    assert "edge-token" not in str(rec) and door.url not in str(rec)


@pytest.mark.parametrize("authority, allow", [
    ("mallory.formation.invalid", ("localhost",)),  # not a member it may call
    ("nobody.formation.invalid", ("localhost",)),  # no member at all
    ("coder.formation.invalid", ("example.com",)),  # a callee, but its door is not covered
])
async def test_virtual_refusals_before_any_connection(tmp_path: object, nursery: trio.Nursery, authority: str,
                                                     allow: tuple[str, ...]) -> None:
    """An ungranted name and an uncovered door are refused before any connection opens."""
    door = _Door()
    await nursery.start(door.serve)
    status, records = await _call_peer(tmp_path, door, authority, allow)
    assert status == "failed" and door.headers == []
    assert [r["allowed"] for r in records] == [False]
    if authority != "coder.formation.invalid":
        assert records[0]["reason"] == "not a member this member may call"


class _A2ADoor(_Door):
    """A door that answers SendMessage with a completed task."""

    async def _one(self, stream: trio.SocketStream) -> None:
        import json

        import h11

        conn = h11.Connection(h11.SERVER)
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
                continue
            if isinstance(event, h11.Request):
                self.headers.append({k.decode(): v.decode() for k, v in event.headers})
            if isinstance(event, h11.Data):
                body += event.data
            if isinstance(event, h11.EndOfMessage):
                break
        rpc = json.loads(body)
        reply = json.dumps({"jsonrpc": "2.0", "id": rpc["id"], "result": {"task": {
            "id": "tsk_peer", "contextId": "ctx_peer", "status": {"state": "TASK_STATE_COMPLETED"}}}}).encode()
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=[
            (b"content-type", b"application/json"), (b"content-length", str(len(reply)).encode())])) or b"")
        await stream.send_all(conn.send(h11.Data(data=reply)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        await stream.aclose()


@pytest.mark.parametrize("fixture, reached", [("send-coder", True), ("send-mallory", False)])
async def test_message_send_resolves_virtual_peers(tmp_path: object, nursery: trio.Nursery, fixture: str,
                                                   reached: bool) -> None:
    """A script capsule's message/send to coder.formation.invalid reaches coder's door with the
    edge token; to a name it may not call it is refused before any connection (the task fails);
    the record names the virtual address."""
    from pathlib import Path

    from components.wat import component
    from murmur.agent.script import ScriptWorkload
    from murmur.manifest.load import parse_manifest
    from murmur.workload import TaskServices

    door = _A2ADoor()
    await nursery.start(door.serve)
    root = Path(str(tmp_path))
    (root / "capsule.wasm").write_bytes(component(fixture))
    text = "name: sender\nversion: 0.1.0\nrequires_files: [capsule.wasm]\ncapabilities: {network: {allow: [localhost]}}\n"
    manifest = parse_manifest(text, path="murmur.yaml")

    async def route(name: str) -> tuple[str, dict[str, str]] | None:
        return (door.url, {"Authorization": "Bearer edge-token", "x-murmur-task-origin": "peer",
                           "x-murmur-task-trust": "untrusted"}) if name == "coder" else None

    trace = FakeTrace()
    ctx = task_context(manifest, root, trace, services=TaskServices(callees=("coder",), peer_route=route))
    outcome = await ScriptWorkload(manifest, root).run_task(ctx)
    [rec] = trace.of("component_http")
    assert rec["url"] == f"http://{fixture.removeprefix('send-')}.formation.invalid"
    if reached:
        assert outcome.status == "ok", outcome
        assert door.headers[0]["authorization"] == "Bearer edge-token"
    else:
        assert outcome.status == "failed" and door.headers == []
        assert rec["reason"] == "not a member this member may call"
