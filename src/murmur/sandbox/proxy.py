"""The egress proxy: the only way out of a session's network namespace (spec/containment.md).

It listens on a socket that lives *inside* the namespace (made by :mod:`murmur.sandbox.ns`)
and connects out from the session process, in the host's namespace. Two request forms:

* ``CONNECT host:port HTTP/1.1`` — a tunnel; decided as scheme ``https`` on that port;
* an absolute URI (``GET http://host[:port]/path HTTP/1.1``) — decided as scheme ``http``,
  forwarded with the request line rewritten to origin form, and ``Connection: close`` both ways
  (on the request, and on the response head in place of the origin's connection headers): one
  request per connection, so a client that would reuse it (Claude Code's fetch does) opens a
  new one, whose request is decided and rewritten in its turn.

The decision is :func:`decide`: the ``network.allow`` coverage rules of spec/manifest.md
(:mod:`murmur.manifest.netallow`). A refused request gets ``403`` with a one-line reason and
is reported to ``on_refused(host, port, scheme)`` (the session writes a ``sandbox_refused``
trace record naming the host). Relays (one per granted host loopback port) splice a
connection to ``127.0.0.1:port`` inside to the same port on the host.

Everything runs as tasks of the session's nursery; cancelling it closes every connection.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import trio

from murmur.manifest import NetEntry, entry_covers, parse_net_entry

__all__ = ["decide", "serve_proxy", "serve_relay"]

_HEAD_MAX = 16384
_CHUNK = 65536
_CONNECT_TIMEOUT = 10.0

Refused = Callable[[str, int, str], None]


def decide(allow: Sequence[str], host: str, port: int, scheme: str) -> bool:
    """Whether ``network.allow`` covers ``scheme://host:port`` (pure)."""
    target = NetEntry(host.lower().strip("[]"), scheme, port)
    for entry in allow:
        parsed = parse_net_entry(entry)
        if parsed is not None and entry_covers(parsed, target):
            return True
    return False


def parse_head(head: bytes) -> tuple[str, str, int, bytes] | None:
    """``(scheme, host, port, rewritten head)`` of a proxy request, or None when unusable (pure).

    ``rewritten head`` is empty for CONNECT; for an absolute URI it is the request with its
    target in origin form and ``Proxy-*`` headers dropped.
    """
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes anything
        return None
    line, _, rest = text.partition("\r\n")
    parts = line.split(" ")
    if len(parts) != 3:
        return None
    method, target, version = parts
    if method.upper() == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            return None
        return "https", host.strip("[]"), int(port), b""
    try:
        url = urlsplit(target)
        port_num = url.port
    except ValueError:
        return None
    if url.scheme != "http" or not url.hostname:
        return None
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    headers = _without_connection(rest.split("\r\n"))
    new = "\r\n".join([f"{method} {path} {version}", *headers])
    return "http", url.hostname, port_num or 80, new.encode("latin-1")


_HOP = ("proxy-", "connection:", "keep-alive:")


def _without_connection(lines: list[str]) -> list[str]:
    """Header lines without ``Proxy-*``, ``Connection`` and ``Keep-Alive``, then ``Connection:
    close``, then the empty lines that ended ``lines`` (a head split on CRLF ends in two)."""
    trailing = len(lines) - len("\n".join(lines).rstrip("\n").split("\n")) if any(lines) else 0
    kept = [h for h in lines[: len(lines) - trailing] if not h.lower().startswith(_HOP)]
    return [*kept, "Connection: close", *([""] * trailing)]


async def _answer_closing(upstream: trio.SocketStream, client: trio.SocketStream) -> None:
    """Relay the origin's answer with ``Connection: close`` in its head, then the rest as is."""
    try:
        got = await _read_head(upstream)
        if got is None:
            await client.send_eof()
            return
        head, rest = got
        text = head.decode("latin-1").split("\r\n")
        await client.send_all("\r\n".join(_without_connection(text)).encode("latin-1") + rest)
        await _pipe(upstream, client)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


async def _read_head(stream: trio.SocketStream) -> tuple[bytes, bytes] | None:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > _HEAD_MAX:
            return None
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


async def _pipe(src: trio.SocketStream, dst: trio.SocketStream) -> None:
    try:
        while True:
            data = await src.receive_some(_CHUNK)
            if not data:
                break
            await dst.send_all(data)
        await dst.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


async def _splice(a: trio.SocketStream, b: trio.SocketStream) -> None:
    async with a, b, trio.open_nursery() as n:
        n.start_soon(_pipe, a, b)
        n.start_soon(_pipe, b, a)


async def _refuse(stream: trio.SocketStream, code: int, reason: str) -> None:
    body = reason.encode() + b"\n"
    msg = (f"HTTP/1.1 {code} {'Forbidden' if code == 403 else 'Bad Gateway'}\r\n"
           f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        await stream.send_all(msg + body)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    await stream.aclose()


async def _handle(stream: trio.SocketStream, allow: Sequence[str], on_refused: Refused) -> None:
    with trio.move_on_after(_CONNECT_TIMEOUT) as scope:
        got = await _read_head(stream)
    if scope.cancelled_caught or got is None:
        await stream.aclose()
        return
    head, early = got
    parsed = parse_head(head)
    if parsed is None:
        await _refuse(stream, 400, "murmur egress proxy: not a proxy request")
        return
    scheme, host, port, rewritten = parsed
    if not decide(allow, host, port, scheme):
        on_refused(host, port, scheme)
        await _refuse(stream, 403, f"murmur egress proxy: {scheme}://{host}:{port} is not in "
                                   "capabilities.network.allow")
        return
    try:
        with trio.fail_after(_CONNECT_TIMEOUT):
            upstream = await trio.open_tcp_stream(host, port)
    except (OSError, trio.TooSlowError) as exc:
        await _refuse(stream, 502, f"murmur egress proxy: cannot reach {host}:{port}: {exc}")
        return
    try:
        if scheme == "https":
            await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            await upstream.send_all(rewritten)
        if early:
            await upstream.send_all(early)
    except (trio.BrokenResourceError, OSError):
        await upstream.aclose()
        await stream.aclose()
        return
    if scheme == "https":
        await _splice(stream, upstream)
        return
    async with stream, upstream, trio.open_nursery() as n:
        n.start_soon(_pipe, stream, upstream)
        await _answer_closing(upstream, stream)
        n.cancel_scope.cancel()  # answered: the connection ends (Connection: close)


async def _serve(listener: socket.socket, handler: Callable[[trio.SocketStream], object]) -> None:
    sock = trio.socket.from_stdlib_socket(listener.dup())
    try:
        async with trio.open_nursery() as nursery:
            while True:
                conn, _addr = await sock.accept()
                nursery.start_soon(handler, trio.SocketStream(conn))  # type: ignore[arg-type]
    finally:
        sock.close()


async def serve_proxy(listener: socket.socket, allow: Sequence[str], on_refused: Refused) -> None:
    """Serve the egress proxy on ``listener`` until cancelled."""
    async def handler(stream: trio.SocketStream) -> None:
        await _handle(stream, allow, on_refused)  # read per request: providers may be added

    await _serve(listener, handler)


async def serve_relay(listener: socket.socket, port: int) -> None:
    """Relay connections on ``listener`` (inside) to ``127.0.0.1:port`` on the host, until cancelled."""

    async def handler(stream: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            await stream.aclose()
            return
        await _splice(stream, upstream)

    await _serve(listener, handler)
