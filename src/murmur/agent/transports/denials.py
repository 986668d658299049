"""The deny socket a Claude Code task's PreToolUse hook asks (spec/agent.md "Claude Code protocol").

For the CLI's life the process transport listens on ``<HOME>/murmur/deny.sock`` (0600, bound
through ``/proc/self/fd`` so the records path's length never matters). One connection carries
one request: the hook writes a binary name and a newline (at most :data:`NAME_LIMIT` bytes)
and shuts its side; the transport answers the message the built-in loop gives for that binary
(:mod:`murmur.agent.harness.pretool`) and closes. A request that is not one binary name
(``murmur.grants.is_binary_name``) or does not arrive within :data:`READ_BOUND` seconds is
closed unanswered (the hook then gives the plain refusal).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import trio

from murmur.grants import is_binary_name

NAME_LIMIT = 4096
READ_BOUND = 5.0
_BACKLOG = 16


async def denials_listener(path: Path) -> trio.SocketListener:
    """A listening socket at ``path`` (an older one there is replaced).

    Raises:
        OSError: it cannot be made.
    """
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        dirfd = _directory(path)
        try:
            await sock.bind(f"/proc/self/fd/{dirfd}/{path.name}")
        finally:
            os.close(dirfd)
        os.chmod(path, 0o600)  # the directory is 0700 already; the socket is the owner's only
        sock.listen(_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


def _directory(path: Path) -> int:
    """``path``'s directory made (0700) and opened, an older socket at ``path`` removed."""
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)


async def serve_denials(listener: trio.SocketListener, message: Callable[[str], str]) -> None:
    """Answer every connection until cancelled; ``message`` runs in a thread (it may read
    running records)."""
    async with trio.open_nursery() as nursery:
        while True:
            stream = await listener.accept()
            nursery.start_soon(_answer, stream, message)


async def _answer(stream: trio.SocketStream, message: Callable[[str], str]) -> None:
    async with stream:
        data = b""
        with trio.move_on_after(READ_BOUND):
            while len(data) <= NAME_LIMIT and b"\n" not in data:
                chunk = await stream.receive_some(NAME_LIMIT + 1)
                if not chunk:
                    break
                data += chunk
        name = data.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        if not is_binary_name(name) or len(name) > 255:
            return
        try:
            text = await trio.to_thread.run_sync(message, name)
        except Exception:  # a message that cannot be made: the hook gives the plain refusal
            return
        try:
            await stream.send_all(text.encode("utf-8"))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
