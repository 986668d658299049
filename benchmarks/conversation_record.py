"""What recording a conversation message by message costs (spec/conversations.md "The record").

Usage: ``python benchmarks/conversation_record.py [N]``. Appends N messages (default 2000) of a
typical size (~400 bytes) through :class:`murmur.conversation.record.RecordStore.append`, and
the same bytes through a bare ``open(O_APPEND) / write / close`` (the floor: what any
append-only, message-by-message record must pay), then reloads the record once. Prints the
median per append of 5 rounds for each, the ratio, and the reload time per message.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from murmur.conversation.record import RecordStore

MESSAGE = {"role": "assistant", "content": "x" * 360, "task_id": "tsk_" + "0" * 32}


def floor(path: Path, n: int) -> float:
    line = (json.dumps(MESSAGE) + "\n").encode()
    t0 = time.perf_counter()
    for _ in range(n):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, line)
        os.close(fd)
    return (time.perf_counter() - t0) / n


def store(root: Path, n: int) -> tuple[float, float]:
    s = RecordStore(root, "bench", "bench", print)
    t0 = time.perf_counter()
    for _ in range(n):
        s.append("ctx_bench", MESSAGE)
    per_append = (time.perf_counter() - t0) / n
    t1 = time.perf_counter()
    assert len(s.load("ctx_bench")) == n
    return per_append, (time.perf_counter() - t1) / n


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    floors, appends, loads = [], [], []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            floors.append(floor(Path(tmp) / "floor.jsonl", n))
            a, r = store(Path(tmp) / "conversations", n)
            appends.append(a)
            loads.append(r)
    f, a, r = statistics.median(floors), statistics.median(appends), statistics.median(loads)
    print(f"messages per round: {n} (5 rounds, medians)")
    print(f"floor (open/append/close): {f * 1e6:8.1f} us per message")
    print(f"RecordStore.append:        {a * 1e6:8.1f} us per message  ({a / f:.2f}x the floor)")
    print(f"RecordStore.load:          {r * 1e6:8.1f} us per message")


if __name__ == "__main__":
    main()
