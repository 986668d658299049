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
    assert b"\r\nConnection: close" in new and b"keep-alive" not in new.lower()  # one request per connection
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


async def _keep_alive_origin(seen: list[bytes], task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """An origin that keeps a connection open unless asked to close, and answers every request
    on it (the origin form only: an absolute URI reaching it is a 400)."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            buf = b""
            while True:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                buf += chunk
                while b"\r\n\r\n" in buf:
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    seen.append(head)
                    ok = head.split(b" ", 2)[1].startswith(b"/")
                    close = b"connection: close" in head.lower()
                    await stream.send_all((b"HTTP/1.1 200 OK" if ok else b"HTTP/1.1 400 Bad") + b"\r\nContent-Length: 2\r\n"
                                          + (b"Connection: close\r\n" if close else b"Connection: keep-alive\r\n")
                                          + b"\r\nok")
                    if close:
                        return

    await trio.serve_listeners(answer, listeners)


async def test_a_kept_alive_client_gets_one_request_per_connection() -> None:
    """A client that would reuse its proxy connection (Claude Code's fetch does) is told
    ``Connection: close`` both ways, so each request is decided and rewritten on its own: a
    second absolute-URI request never reaches the origin raw on the first one's connection."""
    seen: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    proxy_port = listener.getsockname()[1]
    async with trio.open_nursery() as nursery:
        origin = await nursery.start(_keep_alive_origin, seen)
        nursery.start_soon(serve_proxy, listener, [f"http://127.0.0.1:{origin}"], lambda h, p, s: None)
        req = (f"POST http://127.0.0.1:{origin}/v1 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n"
               "Content-Length: 0\r\n\r\n").encode()
        with trio.fail_after(10):
            out = await _ask(proxy_port, req + req)  # the proxy closes after the first answer
        nursery.cancel_scope.cancel()
    listener.close()
    assert out.startswith(b"HTTP/1.1 200 OK") and out.count(b"HTTP/1.1") == 1, out
    assert b"connection: close" in out.lower() and b"keep-alive" not in out.lower()
    assert len(seen) == 1 and seen[0].startswith(b"POST /v1 HTTP/1.1")
