"""Reading the spawn approval a delegated child was launched with.

Specification: ``spec/delegation.md`` "The child's side" and "Secrets".

The parent's launcher writes the approval to the child's standard input and closes it at once
— never argv, never the environment, both of which any process of the same user can read out
of ``/proc``. The child reads its stdin to end of file (bounded in time and size) before its
session starts; the approval is then held in runtime memory only, presented once at
``POST /register`` and dropped.
"""

from __future__ import annotations

import os
import select
import time

APPROVAL_READ_BOUND = 10.0  # seconds a delegated child waits for its stdin to close
MAX_APPROVAL_BYTES = 16 * 1024


def read_approval(fd: int = 0, *, bound: float = APPROVAL_READ_BOUND) -> str | None:
    """Read an approval from ``fd`` (the child's stdin) until end of file.

    Args:
        fd (int): the descriptor to read (0 in production).
        bound (float): seconds to wait for end of file.

    Returns:
        str | None: the stripped text, or None when the stream is a terminal, closed, empty,
        or not finished within ``bound`` (nothing partial is ever used).
    """
    try:
        if os.isatty(fd):
            return None
    except OSError:
        return None
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + bound
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], left)
        except (OSError, ValueError):
            return None
        if not ready:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            return None
        if not data:
            break
        size += len(data)
        if size > MAX_APPROVAL_BYTES:
            return None
        chunks.append(data)
    text = b"".join(chunks).decode("ascii", errors="replace").strip()
    return text or None
