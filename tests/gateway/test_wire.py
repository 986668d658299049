"""The gateway's HTTP/1.1 serving and forwarding (spec/gateway.md "Serving and forwarding").

The framing is tested pure (heads, content-length, chunked split at every byte); the server
loop is tested over real loopback sockets with raw bytes (bad input is answered with a code,
never a traceback, beside a well-formed control); the forwarding is tested through the
injectable upstream: an in-memory stream pair whose far end is a scripted provider.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from murmur import procstat
from murmur.gateway import Gateway, KeyTable, Node, Tree, base_url, run_gateway
from murmur.gateway.http1 import (
    BadMessage,
    Chunked,
    Reader,
    parse_head,
    request_framing,
    response_framing,
)
from murmur.gateway.wire import MAX_HEAD, Exchange, Responder, serve_listener

PROVIDER = "http://provider.test:80"


def test_a_head_is_split_into_its_start_line_and_headers() -> None:
    head = parse_head(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length:  5 \r\nX-A: b", request=True)
    assert (head.first, head.second, head.third) == (b"POST", b"/v1/messages", b"HTTP/1.1")
    assert head.headers == [(b"host", b"x"), (b"content-length", b"5"), (b"x-a", b"b")]
    assert request_framing(head).length == 5
    reply = parse_head(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked", request=False)
    assert response_framing(reply, method=b"POST").chunked
    assert response_framing(reply, method=b"HEAD").none
    assert response_framing(parse_head(b"HTTP/1.1 200 OK", request=False), method=b"GET") == (
        response_framing(parse_head(b"HTTP/1.0 200 OK", request=False), method=b"GET")
    )  # neither header: to the close


@pytest.mark.parametrize(
    "block",
    [
        b"GET / HTTP/2.0",
        b"GET  / HTTP/1.1",
        b"GET / HTTP/1.1\r\nbad header: x",
        b"GET / HTTP/1.1\r\n folded: x",
        b"GET / HTTP/1.1\r\nx: a\x00b",
        b"POST / HTTP/1.1\r\ncontent-length: 1\r\ntransfer-encoding: chunked",
        b"POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2",
        b"POST / HTTP/1.1\r\ncontent-length: -1",
    ],
)
def test_malformed_heads_are_refused(block: bytes) -> None:
    with pytest.raises(BadMessage):
        request_framing(parse_head(block, request=True))


def test_a_chunked_body_decodes_whatever_the_reads_split() -> None:
    wire = b"5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\ntrailer: x\r\n\r\nNEXT"
    for cut in range(len(wire) + 1):
        decoder = Chunked()
        got = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:])
        assert b"".join(got) == b"hello world!" and decoder.done and decoder.rest == b"NEXT"
    with pytest.raises(BadMessage):
        Chunked().feed(b"zz\r\n")


async def _raw(port: int, data: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        got = b""
        while chunk := await stream.receive_some(65536):
            got += chunk
    return got


Handler = Callable[[Exchange, Responder], Awaitable[None]]


async def _own(sock: socket.socket, handler: Handler, *, task_status: trio.TaskStatus[None]) -> None:
    try:
        await serve_listener(sock, handler, task_status=task_status)
    finally:
        sock.close()


async def _serve(nursery: trio.Nursery, handler: Handler) -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    await nursery.start(_own, sock, handler)
    return int(sock.getsockname()[1])


async def _ok(exchange: Exchange, send: Responder) -> None:
    await send.start(200, [(b"content-length", b"2")])
    await send.end(b"ok")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET / HTTP/1.1\r\nhost: x\r\nx: " + b"a" * MAX_HEAD + b"\r\n\r\n", 431),
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\nok", 400),
        (b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 99999999999\r\n\r\n", 413),
    ],
    ids=["head-too-large", "not-http", "smuggling", "body-too-large"],
)
async def test_bad_input_is_answered_with_a_code_and_the_connection_closed(
    nursery: trio.Nursery, request_bytes: bytes, status: int
) -> None:
    port = await _serve(nursery, _ok)
    got = await _raw(port, request_bytes)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status)
    assert json.loads(body)["error"]["code"] == "E-GWY-007"
    # control: a well-formed request on a fresh connection is served
    assert (await _raw(port, b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")).endswith(b"\r\n\r\nok")


async def test_a_failing_handler_answers_500_not_a_traceback(nursery: trio.Nursery) -> None:
    async def broken(exchange: Exchange, send: Responder) -> None:
        raise RuntimeError("bug")

    got = await _raw(await _serve(nursery, broken), b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 500 ")
    assert json.loads(got.partition(b"\r\n\r\n")[2])["error"]["code"] == "E-GWY-008"


async def test_keep_alive_serves_pipelined_requests_in_order(nursery: trio.Nursery) -> None:
    async def echo(exchange: Exchange, send: Responder) -> None:
        await send.start(200, [])  # no length: chunked to an HTTP/1.1 client
        await send.body(exchange.body)
        await send.end()

    one = b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc"
    two = b"POST /b HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n2\r\nde\r\n0\r\n\r\n"
    got = await _raw(await _serve(nursery, echo), one + two)
    assert got.count(b"HTTP/1.1 200 OK") == 2
    assert b"3\r\nabc\r\n0\r\n\r\n" in got and got.endswith(b"2\r\nde\r\n0\r\n\r\n")


SSE = b"".join(
    b"data: " + json.dumps(event).encode() + b"\n\n"
    for event in (
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 7, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 3}},
    )
)


class FakeProvider:
    """An upstream reached through the gateway's injectable connector: in-memory streams."""

    def __init__(self, nursery: trio.Nursery, *, cut: bool = False) -> None:
        self.nursery = nursery
        self.cut = cut
        self.requests: list[tuple[bytes, list[tuple[bytes, bytes]], bytes]] = []
        self.opened: list[tuple[str, str, int]] = []

    async def connect(self, scheme: str, host: str, port: int) -> trio.abc.Stream:
        self.opened.append((scheme, host, port))
        ours, theirs = trio.testing.memory_stream_pair()
        self.nursery.start_soon(self._serve, theirs)
        return ours

    async def _serve(self, stream: trio.abc.Stream) -> None:
        reader = Reader(stream)
        while (head := await reader.head(request=True, max_head=65536, timeout=None)) is not None:
            body = b"".join([c async for c in reader.body(request_framing(head), timeout=None)])
            self.requests.append((head.second, head.headers, body))
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for i in range(0, len(SSE), 50):  # the events in pieces, as a provider streams them
                piece = SSE[i : i + 50]
                await stream.send_all(b"%x\r\n%s\r\n" % (len(piece), piece))
                if self.cut and i > 100:
                    await stream.aclose()
                    return
            await stream.send_all(b"0\r\n\r\n")


async def _gateway(nursery: trio.Nursery, provider: FakeProvider, records: list[dict[str, object]]) -> str:
    me = os.getpid()
    tree = Tree().add(Node("root", me, procstat.start_time(me) or 0, None, ("provider.test",)))
    keys = KeyTable().with_key(PROVIDER, "${K}", {"K": "sk-fake"})
    gateway = Gateway(tree, keys, records.append, connect=provider.connect)
    return str(await nursery.start(run_gateway, gateway))


async def test_a_chunked_stream_passes_through_an_injected_upstream_byte_for_byte(nursery: trio.Nursery) -> None:
    provider = FakeProvider(nursery)
    records: list[dict[str, object]] = []
    url = base_url(await _gateway(nursery, provider, records), PROVIDER) + "/v1/messages"
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(2):  # the second call reuses the pooled upstream connection
            got = await client.post(url, content=b'{"stream": true}', headers={"x-api-key": "placeholder"})
            assert got.status_code == 200 and got.content == SSE
    assert provider.opened == [("http", "provider.test", 80)]
    target, headers, body = provider.requests[0]
    assert target == b"/v1/messages" and body == b'{"stream": true}'
    assert (b"x-api-key", b"sk-fake") in headers and (b"host", b"provider.test") in headers
    calls = [(r["tokens_in"], r["tokens_out"], r["status"]) for r in records if r["type"] == "model_call"]
    assert calls == [(7, 3, 200), (7, 3, 200)]


async def test_an_upstream_cut_mid_stream_ends_the_client_s_reply_and_still_counts(nursery: trio.Nursery) -> None:
    provider = FakeProvider(nursery, cut=True)
    records: list[dict[str, object]] = []
    url = base_url(await _gateway(nursery, provider, records), PROVIDER) + "/v1/messages"
    async with httpx.AsyncClient(trust_env=False) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(url, content=b"{}")
        # control: the gateway still serves (a fresh upstream connection)
        provider.cut = False
        assert (await client.post(url, content=b"{}")).content == SSE
    calls = [r for r in records if r["type"] == "model_call"]
    assert [c["tokens_in"] for c in calls] == [7, 7]  # what the cut reply reported was counted
    assert len(provider.opened) == 2


async def test_an_https_upstream_is_reached_over_tls_and_its_connection_kept(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default opener speaks TLS to an https origin, verifying its certificate and name
    (here a test certificate this test trusts); the connection is pooled for the next call.
    Negative control: a context that does not trust the certificate fails the call 502."""
    import ssl

    from murmur.gateway import upstream

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    await trio.run_process(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        capture_stdout=True, capture_stderr=True,
    )
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    accepted: list[None] = []

    async def provider(stream: trio.SocketStream) -> None:
        accepted.append(None)
        tls = trio.SSLStream(stream, served, server_side=True)
        reader = Reader(tls)
        try:
            while (head := await reader.head(request=True, max_head=65536, timeout=None)) is not None:
                async for _ in reader.body(request_framing(head), timeout=None):
                    pass
                body = b'{"usage": {"input_tokens": 2, "output_tokens": 1}}'
                await tls.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, provider, listeners)
    origin = f"https://localhost:{port}"
    me = os.getpid()
    records: list[dict[str, object]] = []
    tree = Tree().add(Node("root", me, procstat.start_time(me) or 0, None, (f"localhost:{port}",)))
    gateway = Gateway(tree, KeyTable(), records.append)
    url = base_url(await nursery.start(run_gateway, gateway), origin) + "/v1/messages"
    trusting = ssl.create_default_context(cafile=str(cert))
    async with httpx.AsyncClient(trust_env=False) as client:
        monkeypatch.setattr(upstream, "_tls", ssl.create_default_context())  # trusts the system's CAs only
        refused = await client.post(url, content=b"{}")
        assert refused.status_code == 502 and refused.json()["error"]["type"] == "api_error"
        monkeypatch.setattr(upstream, "_tls", trusting)
        for _ in range(2):
            got = await client.post(url, content=b"{}")
            assert got.status_code == 200 and got.json()["usage"]["output_tokens"] == 1
    assert len(accepted) == 2  # the refused handshake, then one kept connection for both calls
    assert [r["status"] for r in records if r["type"] == "model_call"] == [502, 200, 200]


async def test_a_pooled_connection_the_upstream_closed_is_not_reused(nursery: trio.Nursery) -> None:
    """An upstream that closes each connection after its reply (without saying so): the next
    call finds the pooled connection closed and opens a new one, instead of failing 502."""
    accepted: list[None] = []

    async def once(stream: trio.SocketStream) -> None:
        accepted.append(None)
        reader = Reader(stream)
        head = await reader.head(request=True, max_head=65536, timeout=None)
        assert head is not None
        await reader.read_body(request_framing(head), timeout=None, limit=1 << 20)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, once, listeners)
    me = os.getpid()
    tree = Tree().add(Node("root", me, procstat.start_time(me) or 0, None, (f"127.0.0.1:{port}",)))
    gateway = Gateway(tree, KeyTable(), lambda record: None)
    url = base_url(await nursery.start(run_gateway, gateway), f"http://127.0.0.1:{port}") + "/v1/x"
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(3):
            got = await client.post(url, content=b"{}")
            assert (got.status_code, got.content) == (200, b"ok")
            await trio.testing.wait_all_tasks_blocked()  # the upstream's close has happened
    assert len(accepted) == 3
