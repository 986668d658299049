"""Process-table helpers for tests that must prove no process is left (Linux /proc)."""

from __future__ import annotations

import os
from pathlib import Path

import trio


def live_members(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are not zombies (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            found.append(int(entry))
    return found


async def wait_group_gone(pgid: int, bound: float = 5.0) -> list[int]:
    """Wait (bounded) until group ``pgid`` has no live member; return what is left."""
    with trio.move_on_after(bound):
        while live_members(pgid):  # noqa: ASYNC110 - kernel state has no event to wait on
            await trio.sleep(0.01)
    return live_members(pgid)
