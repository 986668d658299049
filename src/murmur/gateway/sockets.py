"""A lean Trio byte stream over a non-blocking TCP socket, for the gateway's hot path.

Specification: ``spec/gateway.md`` "Serving and forwarding". :class:`FastStream` is a
:class:`trio.abc.HalfCloseableStream` like :class:`trio.SocketStream`, but it tries the
system call first and parks the task (``wait_readable`` / ``wait_writable``) only when the
socket would block, so a send or receive that completes at once costs one system call and no
trip through the scheduler (Trio's own stream yields once per call). Each call still honours
cancellation: it checks for it first (:func:`trio.lowlevel.checkpoint_if_cancelled`), and
every wait is a checkpoint.

Errors as Trio's streams raise them: :class:`trio.BrokenResourceError` for a broken
connection, :class:`trio.ClosedResourceError` after :meth:`FastStream.aclose`,
:class:`trio.BusyResourceError` for two tasks sending (or receiving) at once.
"""

from __future__ import annotations

import socket

import trio

__all__ = ["FastStream", "accept", "connect_tcp", "receive_within", "send_within"]

_MAX_READ = 65536


class FastStream(trio.abc.HalfCloseableStream):
    """One connected TCP socket (owned: :meth:`aclose` closes it). Nagle is turned off."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.socket = sock
        self._sending = False
        self._receiving = False
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the stream is closed")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.send_within(data, None)

    async def send_within(self, data: bytes | bytearray | memoryview, timeout: float | None) -> None:
        """:meth:`send_all`, failing ``trio.TooSlowError`` when the socket stays full for
        ``timeout`` seconds (None: no bound). The bound costs nothing unless a send waits."""
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        self._check()
        await trio.lowlevel.checkpoint_if_cancelled()
        self._sending = True
        try:
            view = memoryview(data)
            while view:
                try:
                    sent = self.socket.send(view)
                except BlockingIOError:
                    if timeout is None:
                        await trio.lowlevel.wait_writable(self.socket)
                    else:
                        with trio.fail_after(timeout):
                            await trio.lowlevel.wait_writable(self.socket)
                    self._check()
                    continue
                except OSError as exc:
                    raise trio.BrokenResourceError(exc) from exc
                view = view[sent:]
        finally:
            self._sending = False

    async def wait_send_all_might_not_block(self) -> None:
        self._check()
        await trio.lowlevel.wait_writable(self.socket)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.receive_within(max_bytes, None)

    async def receive_within(self, max_bytes: int | None, timeout: float | None) -> bytes:
        """:meth:`receive_some`, failing ``trio.TooSlowError`` when nothing comes for
        ``timeout`` seconds (None: no bound). The bound costs nothing unless the read waits."""
        if self._receiving:
            raise trio.BusyResourceError("another task is receiving on this stream")
        self._check()
        await trio.lowlevel.checkpoint_if_cancelled()
        self._receiving = True
        try:
            while True:
                try:
                    return self.socket.recv(max_bytes or _MAX_READ)
                except BlockingIOError:
                    if timeout is None:
                        await trio.lowlevel.wait_readable(self.socket)
                    else:
                        with trio.fail_after(timeout):
                            await trio.lowlevel.wait_readable(self.socket)
                    self._check()
                except OSError as exc:
                    raise trio.BrokenResourceError(exc) from exc
        finally:
            self._receiving = False

    async def send_eof(self) -> None:
        self._check()
        await trio.lowlevel.checkpoint()
        try:
            self.socket.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            trio.lowlevel.notify_closing(self.socket)
            self.socket.close()
        await trio.lowlevel.checkpoint()


async def accept(listener: socket.socket) -> tuple[FastStream, tuple[str, int]]:
    """The next connection on a non-blocking listening socket, and its client's address.

    Raises:
        OSError: as ``accept(2)`` does (out of descriptors, for one).
    """
    while True:
        try:
            conn, addr = listener.accept()
        except BlockingIOError:
            await trio.lowlevel.wait_readable(listener)
            continue
        return FastStream(conn), (str(addr[0]), int(addr[1]))


async def connect_tcp(host: str, port: int) -> FastStream:
    """A connected :class:`FastStream` (Trio's happy-eyeballs connect, then taken over)."""
    stream = await trio.open_tcp_stream(host, port)
    return FastStream(socket.socket(fileno=stream.socket.detach()))


async def send_within(stream: trio.abc.Stream, data: bytes, timeout: float) -> None:
    """``stream.send_all(data)`` within ``timeout`` seconds (else ``trio.TooSlowError``);
    free of a cancel scope on a :class:`FastStream` that need not wait."""
    if isinstance(stream, FastStream):
        await stream.send_within(data, timeout)
        return
    with trio.fail_after(timeout):
        await stream.send_all(data)


async def receive_within(stream: trio.abc.Stream, max_bytes: int, timeout: float) -> bytes:
    """``stream.receive_some(max_bytes)`` within ``timeout`` seconds (else
    ``trio.TooSlowError``); free of a cancel scope on a :class:`FastStream` that need not wait."""
    if isinstance(stream, FastStream):
        return await stream.receive_within(max_bytes, timeout)
    with trio.fail_after(timeout):
        return bytes(await stream.receive_some(max_bytes))
