"""Clients that stop reading or hang up never hold the door (issue 16)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import trio

from murmur.httpserve import SEND_BOUND
from murmur.session.trace import read_trace
from murmur.session.winddown import signal_wind_down
from murmur.workload import TaskContext, TaskOutcome

from .helpers import make_setup, manifest, running

BIG = 8_000_000  # bytes of answer: more than the kernel buffers of a loopback socket hold


class BigAnswer:
    """Waits for ``release``, then answers 2 MB."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        self.started.set()
        await self.release.wait()
        return TaskOutcome("ok", "x" * BIG)


def _raw_request(body: dict[str, object], port: int) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"a2a-version: 1.0\r\ncontent-length: {len(data)}\r\n\r\n"
    ).encode()
    return head + data


async def _stalled_client(port: int, body: dict[str, object]) -> trio.SocketStream:
    """A client with a tiny receive buffer that sends one request and never reads."""
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    await stream.send_all(_raw_request(body, port))
    seen = b""
    with trio.fail_after(10):  # read up to the snapshot frame: the subscription is live
        while b"data:" not in seen:
            seen += await stream.receive_some(1024)
    return stream


async def test_stalled_stream_does_not_block_wind_down(tmp_path: Path) -> None:
    """A SubscribeToTask client that stopped reading a 2 MB answer: SIGTERM still ends the
    session within the send bound, and session_end is written."""
    work = BigAnswer()
    setup = make_setup(tmp_path, manifest(after="sleep"), work, no_idle_timeout=True)
    async with running(setup) as h:
        port = int(h.url.rsplit(":", 1)[1])
        send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
            "configuration": {"returnImmediately": True}}}
        async with await trio.open_tcp_stream("127.0.0.1", port) as c:
            await c.send_all(_raw_request(send, port))
            got = b""
            while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
                got += await c.receive_some(65536)
        task_id = json.loads(got.split(b"\r\n\r\n", 1)[1])["result"]["task"]["id"]
        with trio.fail_after(10):
            await work.started.wait()
        sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}
        stalled = await _stalled_client(port, sub)
        try:
            work.release.set()
            task = h.session.get_task(task_id)
            assert task is not None
            with trio.fail_after(10):  # the task completes; its 8 MB frame fills the socket
                while True:
                    changed = task.changed()
                    if task.terminal:
                        break
                    await changed.wait()
            before = trio.current_time()
            h.session.wind_down(signal_wind_down("SIGTERM"))
            summary = await h.wait(timeout=SEND_BOUND + 8)
            took = trio.current_time() - before
        finally:
            await stalled.aclose()
    assert summary.status == "ok"
    assert took < SEND_BOUND + 8
    types = [r["event_type"] for r in read_trace(setup.records.trace)]
    assert types[-1] == "session_end"


async def test_client_eof_on_idle_keepalive_closes_promptly(tmp_path: Path) -> None:
    """A client that closes an idle keep-alive connection: the door closes its end at once
    (EOF seen by a second reader), not after the 30 s keep-alive timeout."""
    setup = make_setup(tmp_path, manifest(), BigAnswer(), no_idle_timeout=True)
    async with running(setup) as h:
        port = int(h.url.rsplit(":", 1)[1])
        sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
        await sock.connect(("127.0.0.1", port))
        stream = trio.SocketStream(sock)
        await stream.send_all(f"GET /.well-known/agent-card.json HTTP/1.1\r\nhost: x:{port}\r\n\r\n".encode())
        got = b""
        while b"\r\n\r\n" not in got:
            got += await stream.receive_some(65536)
        await stream.send_eof()  # the client is done: half-close
        with trio.fail_after(5):  # the server closes its side promptly (no 30 s CLOSE-WAIT)
            while await stream.receive_some(65536):
                pass
        await stream.aclose()


def _close_wait_sockets(port: int) -> int:
    """Sockets whose local port is ``port`` in CLOSE-WAIT (``/proc/net/tcp`` state 08)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "08":
                count += 1
    return count


async def test_fifty_clients_closing_idle_keepalive_leave_no_close_wait(tmp_path: Path) -> None:
    """50 clients each take the card on a keep-alive connection and close it: the door's
    sockets leave CLOSE-WAIT within 5 s (hypercorn alone keeps them until its 30 s timer)."""
    setup = make_setup(tmp_path, manifest(), BigAnswer(), no_idle_timeout=True)
    async with running(setup) as h:
        port = int(h.url.rsplit(":", 1)[1])
        clients = []
        try:
            with trio.fail_after(30):
                for _ in range(50):
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    clients.append(stream)
                    await stream.send_all(f"GET /.well-known/agent-card.json HTTP/1.1\r\nhost: x:{port}\r\n\r\n".encode())
                    got = b""
                    while not got.endswith(b"}"):  # the whole card: the connection is idle now
                        got += await stream.receive_some(65536)
        finally:
            for stream in clients:
                await stream.aclose()
        counts = [_close_wait_sockets(port)]
        with trio.fail_after(5):  # a bounded poll of the kernel's table; the bug held them 30 s
            while counts[-1]:
                await trio.sleep(0.05)
                counts.append(_close_wait_sockets(port))
    assert counts[-1] == 0
