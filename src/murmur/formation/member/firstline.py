"""The launch-time read of a formation channel: its first line, and whatever follows at once.

Blocking, for a ``mur run`` being prepared (no Trio loop yet): a pipe is polled for at most the
channel's first-line bound (10 s, ``timing.CHANNEL_FIRST_LINE``); a regular file is read whole.
Spec: spec/formation-tokens.md (channel lines) and spec/formation.md "What each member learns".
"""

from __future__ import annotations

import errno
import os
import select
import stat
import time

import attrs

from murmur.formation.wire import channel

_MAX_FILE_CHANNEL = 4 << 20  # bytes read from a channel that is a regular file


@attrs.frozen
class FirstRead:
    """What the launch-time read of a channel found.

    Attributes:
        first (bytes): the first line (no newline).
        later (tuple[bytes, ...]): complete lines that had already arrived after it.
        splitter (channel.LineSplitter): holds any incomplete line after those; the later
            reads continue with it.
        finished (bool): the channel is done (EOF seen, or it is a regular file).
    """

    first: bytes
    later: tuple[bytes, ...] = ()
    splitter: channel.LineSplitter = attrs.field(factory=channel.LineSplitter, eq=False)
    finished: bool = False


class ChannelReadError(Exception):
    """The first line could not be read; ``reason`` is the E-RUN-046 reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _read_some(fd: int) -> bytes | None:
    """One read; None when it would block."""
    while True:
        try:
            return os.read(fd, 65536)
        except BlockingIOError:
            return None
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                return None
            raise ChannelReadError(f"it cannot be read ({exc.strerror or exc})") from None


def read_first_line(fd: int, timeout: float) -> FirstRead:
    """Read a channel's first line within ``timeout`` seconds, plus whatever already follows.

    Blocking, for the launch (no Trio yet). A pipe is polled; a regular file is read whole
    (at most 4 MiB) and is then finished.

    Raises:
        ChannelReadError: no first line in time; the channel ended first; it is over 1 MiB.
    """
    splitter = channel.LineSplitter()
    lines: list[bytes] = []
    is_file = stat.S_ISREG(os.fstat(fd).st_mode)
    finished = False
    if is_file:
        data = b""
        while len(data) < _MAX_FILE_CHANNEL:
            chunk = _read_some(fd)
            if not chunk:
                break
            data += chunk
        lines = splitter.feed(data)
        if splitter.pending:
            lines += splitter.feed(b"\n")
        finished = True
    else:
        deadline = time.monotonic() + timeout
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while not lines and not finished:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelReadError(f"no first line arrived within {timeout:g} seconds")
            if not poller.poll(max(1, int(left * 1000))):
                continue
            chunk = _read_some(fd)
            if chunk is None:
                continue
            if not chunk:
                finished = True
                break
            lines += splitter.feed(chunk)
        # the entry member's addresses and role were written with its credentials: take them
        while not finished and poller.poll(0):
            chunk = _read_some(fd)
            if chunk is None:
                break
            if not chunk:
                finished = True
                break
            lines += splitter.feed(chunk)
    if not lines:
        raise ChannelReadError("the channel ended before its first line")
    if lines[0] == channel.LineSplitter.OVERSIZED:
        raise ChannelReadError("the first line is over the 1 MiB limit")
    return FirstRead(lines[0], tuple(lines[1:]), splitter, finished)
