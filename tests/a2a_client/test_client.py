"""The loopback client: no proxies from the environment, a whole-request bound, MockTransport."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
import trio
import trio.testing

from murmur.a2a import A2AClient, loopback_client, requests

UNREACHABLE_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens; a proxied call fails


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every proxy variable names an unreachable proxy; NO_PROXY does not exempt loopback."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, UNREACHABLE_PROXY)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield


def test_factory_reads_no_proxy_from_the_environment(proxied: None) -> None:
    """The client mounts no proxy although every proxy variable is set."""
    client = loopback_client()
    assert client.trust_env is False
    assert not client.follow_redirects
    assert client._mounts == {}  # httpx mounts one proxy transport per proxy variable it reads
    assert httpx.AsyncClient(trust_env=True)._mounts != {}  # (the fixture's variables are live)


async def _serve_once(listener: trio.SocketListener, got: list[bytes]) -> None:
    stream = await listener.accept()
    async with stream:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
        while len(rest) < length:
            rest += await stream.receive_some(65536)
        got.append(head + b"\r\n\r\n" + rest)
        payload = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"message": {"parts": []}}}).encode()
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(payload)).encode() + b"\r\nconnection: close\r\n\r\n" + payload
        )


async def test_a_loopback_post_bypasses_an_unreachable_proxy(proxied: None) -> None:
    """With HTTP(S)_PROXY / ALL_PROXY set, a real loopback POST still reaches the door directly."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    got: list[bytes] = []
    with trio.fail_after(10):
        async with listeners[0], trio.open_nursery() as n:
            n.start_soon(_serve_once, listeners[0], got)
            async with A2AClient() as client:
                reply = await client.post(
                    f"http://127.0.0.1:{port}/", requests.encode(requests.get_task("t")), requests.headers()
                )
    assert reply is not None and reply.status == 200
    assert got[0].startswith(b"POST / HTTP/1.1")  # origin form: not a proxy request line
    assert b'"GetTask"' in got[0] and b"a2a-version: 1.0" in got[0].lower()


async def test_nothing_listening_is_none() -> None:
    """A refused connection is None, not an exception naming the URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with trio.fail_after(10):
        async with A2AClient(timeout=2.0) as client:
            assert await client.post(f"http://127.0.0.1:{port}/", b"{}", requests.headers()) is None


async def test_a_request_is_bounded_as_a_whole(autojump_clock: trio.testing.MockClock) -> None:
    """A door that never answers: the request ends at its bound (MockClock), as None."""

    async def never(request: httpx.Request) -> httpx.Response:
        await trio.sleep_forever()
        raise AssertionError

    async with A2AClient(timeout=10.0, transport=httpx.MockTransport(never)) as client:
        t0 = trio.current_time()
        assert await client.post("http://127.0.0.1:1/", b"{}", {}) is None
        assert trio.current_time() - t0 == pytest.approx(10.0)
        assert await client.get("http://127.0.0.1:1/x", timeout=3.0) is None
        assert trio.current_time() - t0 == pytest.approx(13.0)


async def test_mock_transport_sees_what_is_sent() -> None:
    """The body and headers arrive as given; a transport error is None; other errors propagate."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/down":
            raise httpx.ConnectError("refused")
        if request.url.path == "/bug":
            raise RuntimeError("a bug")
        return httpx.Response(201, content=b"ok")

    async with A2AClient(transport=httpx.MockTransport(handler)) as client:
        reply = await client.post("http://d/", b'{"a":1}', {"A2A-Version": "1.0"})
        assert reply is not None and (reply.status, reply.body) == (201, b"ok")
        assert seen[0].content == b'{"a":1}' and seen[0].headers["a2a-version"] == "1.0"
        assert await client.post("http://d/down", b"", {}) is None
        with pytest.raises(RuntimeError):
            await client.post("http://d/bug", b"", {})
