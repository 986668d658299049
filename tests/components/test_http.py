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
from murmur.components.http import HttpDecision, HttpPolicy, decide


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
    assert not got.allowed and "virtual formation address" in got.reason


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
