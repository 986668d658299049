"""HTTP/1.1 message framing for the gateway: heads parsed, bodies delimited (RFC 9112).

Specification: ``spec/gateway.md`` "Serving and forwarding". The gateway passes bytes
through, so it needs only what a proxy needs: a message's start line and headers, and where
its body ends (``content-length``, ``chunked``, or the connection's close). The parsing is
pure (:func:`parse_head`, :func:`request_framing`, :func:`response_framing`,
:class:`Chunked`); :class:`Reader` reads messages from a Trio stream with them. Written for
the hot path (a head costs a few microseconds; h11, which does the same, costs about 100):
the rules are h11's, strictly -- a header name must be a token, a value must hold no CR, LF
or NUL, no line folding, one request-line or status-line form, one ``content-length`` value,
``transfer-encoding`` only ``chunked`` and never with ``content-length``.

Errors: :class:`BadMessage` (``status``: 400, or 431 for a head over the limit, 413 for a
body over it); a stream that ends inside a message is :class:`Truncated`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable

import attrs
import trio

from murmur.gateway.sockets import receive_within

__all__ = [
    "BadMessage",
    "Chunked",
    "Framing",
    "Head",
    "Reader",
    "Truncated",
    "parse_head",
    "request_framing",
    "response_framing",
]

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_DIGITS = re.compile(rb"[0-9]+")
_CHUNK_LINE = 4096
_READ = 65536


class BadMessage(ValueError):
    """A message that is not well-formed HTTP/1.1 (``status``: the answer it deserves)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Truncated(Exception):
    """The stream ended inside a message."""


@attrs.frozen
class Head:
    """A start line split in three (``GET``, ``/x``, ``HTTP/1.1`` or ``HTTP/1.1``, ``200``,
    ``OK``) and the headers: lower-case names, values without surrounding blanks, in order."""

    first: bytes
    second: bytes
    third: bytes
    headers: list[tuple[bytes, bytes]]


@attrs.frozen
class Framing:
    """Where a body ends: ``length`` bytes, ``chunked``, or (neither) the connection's close;
    ``none``: there is no body."""

    length: int | None = None
    chunked: bool = False
    none: bool = False


def parse_head(block: bytes, *, request: bool) -> Head:
    """Parse a head (the bytes before the blank line, without it).

    Raises:
        BadMessage: a malformed start line or header.
    """
    lines = block.split(b"\r\n")
    first = lines[0]
    if request:
        parts = first.split(b" ")
        if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1]):
            raise BadMessage("malformed request line")
        if parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
            raise BadMessage("unsupported HTTP version")
        a, b, c = parts
    else:
        a, _, rest = first.partition(b" ")
        b, _, c = rest.partition(b" ")
        if a not in (b"HTTP/1.1", b"HTTP/1.0") or len(b) != 3 or not _DIGITS.fullmatch(b):
            raise BadMessage("malformed status line")
        if _BAD_VALUE.search(c):
            raise BadMessage("malformed reason phrase")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise BadMessage("malformed header line")
        value = value.strip(b" \t")
        if _BAD_VALUE.search(value):
            raise BadMessage("malformed header value")
        headers.append((name.lower(), value))
    return Head(a, b, c, headers)


def _framing(headers: list[tuple[bytes, bytes]]) -> Framing | None:
    """The framing the headers name, or None when they name none. Raises BadMessage."""
    lengths = {v for k, v in headers if k == b"content-length"}
    codings = [v for k, v in headers if k == b"transfer-encoding"]
    if codings:
        if lengths:
            raise BadMessage("both transfer-encoding and content-length")
        if [c.strip().lower() for c in b",".join(codings).split(b",")] != [b"chunked"]:
            raise BadMessage("a transfer-encoding other than chunked", 501)
        return Framing(chunked=True)
    if lengths:
        values = {p.strip() for v in lengths for p in v.split(b",")}
        if len(values) != 1:
            raise BadMessage("conflicting content-length values")
        (value,) = values
        if not _DIGITS.fullmatch(value) or len(value) > 18:
            raise BadMessage("malformed content-length")
        return Framing(length=int(value))
    return None


def request_framing(head: Head) -> Framing:
    """A request's body: by its headers; with neither header, none (RFC 9112 §6.3)."""
    return _framing(head.headers) or Framing(length=0)


def response_framing(head: Head, *, method: bytes) -> Framing:
    """A response's body, for a request of ``method``: none for HEAD, 1xx, 204 and 304; else
    by its headers; with neither header, to the connection's close."""
    status = int(head.second)
    if method == b"HEAD" or status < 200 or status in (204, 304):
        return Framing(none=True)
    return _framing(head.headers) or Framing()


class Chunked:
    """Decodes a chunked body: :meth:`feed` bytes, get the data they complete; ``done`` once
    the last chunk and the trailers have passed; ``rest``: the bytes after the body."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._left = 0  # data bytes left in the current chunk
        self._crlf = False  # the CRLF after a chunk's data is due
        self._trailers = False
        self.done = False
        self.rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The body data ``data`` completes (possibly none). Raises BadMessage."""
        if self.done:
            self.rest += data
            return []
        self._buf += data
        out: list[bytes] = []
        buf = self._buf
        while not self.done:
            if self._left:
                if not buf:
                    break
                take = bytes(buf[: self._left])
                del buf[: len(take)]
                self._left -= len(take)
                out.append(take)
                if not self._left:
                    self._crlf = True
                continue
            if self._crlf:
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise BadMessage("malformed chunk end")
                del buf[:2]
                self._crlf = False
                continue
            cut = buf.find(b"\r\n")
            if cut < 0:
                if len(buf) > _CHUNK_LINE:
                    raise BadMessage("chunk line too long")
                break
            line = bytes(buf[:cut])
            del buf[: cut + 2]
            if self._trailers:
                if not line:
                    self.done = True
                    self.rest = bytes(buf)
                    buf.clear()
                continue  # a trailer field: dropped (the body passes, its trailers do not)
            size = line.split(b";", 1)[0].strip(b" \t")
            if not size or len(size) > 16 or size.strip(b"0123456789abcdefABCDEF"):
                raise BadMessage("malformed chunk size")
            self._left = int(size, 16)
            if not self._left:
                self._trailers = True
        return out


class Reader:
    """Reads HTTP/1.1 messages from a Trio stream (bytes left over stay for the next).

    Each read waits at most the ``timeout`` its caller gives (None: no bound).
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def _fill(self, timeout: float | None) -> bool:
        """Read more into the buffer; False at the stream's end.

        Raises:
            trio.TooSlowError: nothing came for ``timeout`` seconds.
        """
        if timeout is None:
            data = await self.stream.receive_some(_READ)
        else:
            data = await receive_within(self.stream, _READ, timeout)
        if not data:
            return False
        self.buf += data
        return True

    async def head(self, *, request: bool, max_head: int, timeout: float | None) -> Head | None:
        """The next head, or None when the stream ends (or times out) before one begins.

        Raises:
            BadMessage: malformed, or over ``max_head`` bytes (431).
            Truncated: the stream ended inside the head.
        """
        while True:
            if request:
                while self.buf[:2] == b"\r\n":  # blank lines before a request are allowed
                    del self.buf[:2]
            cut = self.buf.find(b"\r\n\r\n")
            if cut >= 0:
                if cut > max_head:
                    raise BadMessage("head too large", 431)
                block = bytes(self.buf[:cut])
                del self.buf[: cut + 4]
                return parse_head(block, request=request)
            if len(self.buf) > max_head:
                raise BadMessage("head too large", 431)
            had = bool(self.buf)
            try:
                more = await self._fill(timeout)
            except trio.TooSlowError:
                if had:
                    raise
                return None  # idle for too long between messages
            if not more:
                if had:
                    raise Truncated
                return None

    async def read_body(self, framing: Framing, *, timeout: float | None, limit: int) -> bytes:
        """The whole body (a sized one already buffered is taken without waiting).

        Raises:
            as :meth:`body`.
        """
        length = framing.length
        if length is not None and not framing.chunked:
            if length > limit:
                raise BadMessage("body too large", 413)
            if len(self.buf) >= length:
                data = bytes(self.buf[:length])
                del self.buf[:length]
                return data
        return b"".join([c async for c in self.body(framing, timeout=timeout, limit=limit)])

    async def body(
        self,
        framing: Framing,
        *,
        timeout: float | None,
        limit: int | None = None,
        hold: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[bytes]:
        """The body's data as it arrives, up to its end (what follows stays buffered).

        ``hold`` is awaited before each wait for more bytes (a proxy sends what it holds).

        Raises:
            trio.TooSlowError: nothing came for ``timeout`` seconds.
            BadMessage: a malformed chunked body, or more than ``limit`` bytes (413).
            Truncated: the stream ended before the body did (never, for a close-delimited one).
        """
        if framing.none:
            return
        if framing.length is not None and limit is not None and framing.length > limit:
            raise BadMessage("body too large", 413)
        seen = 0
        if framing.chunked:
            decoder = Chunked()
            data, self.buf = bytes(self.buf), bytearray()
            while True:
                for piece in decoder.feed(data):
                    seen += len(piece)
                    if limit is not None and seen > limit:
                        raise BadMessage("body too large", 413)
                    yield piece
                if decoder.done:
                    self.buf = bytearray(decoder.rest)
                    return
                if hold is not None:
                    await hold()
                if not await self._fill(timeout):
                    raise Truncated
                data, self.buf = bytes(self.buf), bytearray()
        left = framing.length
        while left is None or left > 0:
            if not self.buf and hold is not None:
                await hold()
            if not self.buf and not await self._fill(timeout):
                if left is None:
                    return  # a close-delimited body ends with the stream
                raise Truncated
            if left is None:
                piece, self.buf = bytes(self.buf), bytearray()
            else:
                piece = bytes(self.buf[:left])
                del self.buf[: len(piece)]
                left -= len(piece)
            yield piece
