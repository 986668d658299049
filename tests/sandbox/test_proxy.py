"""The egress proxy: its decision (pure) and a real connection through it (in process)."""

from __future__ import annotations

import socket

import trio

from murmur.sandbox.proxy import decide, parse_head, serve_proxy


def test_decide_follows_the_manifest_coverage_rules() -> None:
    assert decide(["example.com"], "example.com", 443, "https")
    assert decide(["example.com"], "EXAMPLE.com", 8080, "http")
    assert decide(["example.com:8443"], "example.com", 8443, "https")
    assert not decide(["example.com:8443"], "example.com", 443, "https")
    assert decide(["https://api.example.com"], "api.example.com", 443, "https")
    assert not decide(["https://api.example.com"], "api.example.com", 80, "http")
    assert not decide(["http://127.0.0.1:9"], "127.0.0.1", 9, "https")
    assert not decide([], "example.com", 443, "https")
    assert not decide(["example.com"], "evil.example.com", 443, "https")


def test_parse_head() -> None:
    assert parse_head(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n") == (
        "https", "example.com", 443, b"")
    scheme, host, port, new = parse_head(
        b"GET http://h.test:8080/a?b=1 HTTP/1.1\r\nHost: h.test\r\nProxy-Connection: keep-alive\r\n\r\n") or (
        "", "", 0, b"")
    assert (scheme, host, port) == ("http", "h.test", 8080)
    assert new.startswith(b"GET /a?b=1 HTTP/1.1\r\n") and b"Proxy-" not in new
    assert parse_head(b"GET /relative HTTP/1.1\r\n\r\n") is None
    assert parse_head(b"CONNECT nohostport HTTP/1.1\r\n\r\n") is None


async def _origin(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(4096)
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    await trio.serve_listeners(answer, listeners)


async def _ask(port: int, head: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(head)
        out = b""
        while True:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return out
            out += chunk


async def test_allowed_request_passes_and_a_refused_one_is_reported() -> None:
    refused: list[tuple[str, int, str]] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    proxy_port = listener.getsockname()[1]
    async with trio.open_nursery() as nursery:
        origin = await nursery.start(_origin)
        nursery.start_soon(serve_proxy, listener, [f"http://127.0.0.1:{origin}"],
                           lambda h, p, s: refused.append((h, p, s)))
        ok = await _ask(proxy_port, f"GET http://127.0.0.1:{origin}/x HTTP/1.1\r\nHost: a\r\n\r\n".encode())
        assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(b"ok")
        no = await _ask(proxy_port, b"CONNECT ungranted.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert no.startswith(b"HTTP/1.1 403") and b"not in capabilities.network.allow" in no
        nursery.cancel_scope.cancel()
    listener.close()
    assert refused == [("ungranted.test", 443, "https")]
