"""The demo's child processes: line reading, stderr relays, stopping a process group."""

from __future__ import annotations

import signal
from typing import TextIO

import attrs
import trio

from murmur import procs
from murmur.demo.watchdog import signal_group

LINE_LIMIT = 1 << 20
"""Bytes an unfinished line may hold before it is handed on as it stands."""


class LineReader:
    """Whole lines from a trio receive stream (the last partial line at EOF too), pulled one at
    a time; a line longer than ``limit`` bytes comes in pieces of ``limit`` bytes, so a child
    that never writes a newline cannot grow the demo's memory without bound."""

    def __init__(self, stream: trio.abc.ReceiveStream, *, limit: int = LINE_LIMIT) -> None:
        self._stream = stream
        self._buf = b""
        self._eof = False
        self._limit = limit

    async def line(self) -> bytes | None:
        """The next line without its newline (at most ``limit`` bytes); None at EOF."""
        while b"\n" not in self._buf:
            if len(self._buf) >= self._limit:
                out, self._buf = self._buf[: self._limit], self._buf[self._limit :]
                return out
            if self._eof:
                if self._buf:
                    out, self._buf = self._buf, b""
                    return out
                return None
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                self._eof = True
            self._buf += chunk
        out, _, self._buf = self._buf.partition(b"\n")
        return out


@attrs.define
class Child:
    """One process the demo started, in a process group of its own (pgid = pid)."""

    label: str
    process: procs.OwnedProcess
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        """The process id, which is also its process group id."""
        return self.process.pid

    @property
    def running(self) -> bool:
        """Whether it has not been reaped yet."""
        return self.process.returncode is None

    def kill_group(self) -> None:
        """SIGKILL the whole group (synchronous; used by the second signal)."""
        signal_group(self.pid, signal.SIGKILL)

    async def stop(self, grace: float) -> int:
        """SIGTERM the process, wait ``grace`` s, SIGKILL its group, reap, sweep the group
        (the escalation is :func:`murmur.procs.end_within`'s)."""
        await procs.end_within(grace, ask=self._ask, alive=lambda: self.running, wait=self.process.wait,
                                     kill=self.kill_group)
        code = await self.process.wait()
        signal_group(self.pid, signal.SIGKILL)
        return code

    def _ask(self) -> None:
        if self.running:
            try:
                self.process.send_signal(self.stop_signal)
            except ProcessLookupError:
                pass


async def relay(stream: trio.abc.ReceiveStream | None, prefix: str, err: TextIO) -> None:
    """Copy a child's lines to ``err`` behind ``prefix`` until EOF (errors writing are ignored)."""
    if stream is None:
        return
    reader = LineReader(stream)
    while (raw := await reader.line()) is not None:
        try:
            err.write(prefix + raw.decode("utf-8", "replace") + "\n")
            err.flush()
        except (OSError, ValueError):
            pass


async def drain(reader: LineReader) -> None:
    """Read and drop the rest of a stream, so the child never blocks writing to it."""
    while await reader.line() is not None:
        pass
