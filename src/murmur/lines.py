"""Reading a child process's output stream line by line (formation members, delegated children).

One helper, :func:`read_lines`, serves every launcher that relays a child's stdout or stderr:
it splits what arrives on newlines, hands each line on as it completes, and never holds more
than a bound of one unfinished line. A relay ends quietly when the stream breaks (the child
died or closed it): that is the end of its output, not an error.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["READ_CHUNK", "read_lines"]

READ_CHUNK = 65536
"""Bytes asked of the stream per read."""


async def read_lines(stream: trio.abc.ReceiveStream, take: Callable[[bytes], None], limit: Callable[[], int]) -> None:
    """Read ``stream`` to its end, calling ``take`` with each line (newline removed).

    A line still without its newline once it holds more than ``limit()`` bytes is handed on
    as it stands (and a new line begins); what is left at the end of the stream is handed on
    as the last line. A broken or closed stream counts as its end. The stream is not closed.

    Args:
        stream (trio.abc.ReceiveStream): the child's stdout or stderr.
        take (Callable[[bytes], None]): called once per line, in order.
        limit (Callable[[], int]): bytes an unfinished line may hold; asked each time it is
            checked, so the bound may change between lines (e.g. once a first line is taken).
    """
    buf = bytearray()
    while True:
        try:
            chunk = await stream.receive_some(READ_CHUNK)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            break
        if not chunk:
            break
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > limit():
                    take(bytes(buf))
                    buf.clear()
                break
            take(bytes(buf[:nl]))
            del buf[: nl + 1]
    if buf:
        take(bytes(buf))
