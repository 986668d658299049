"""What a door holds after many finished tasks with large answers (issue 16; prints, never asserts).

Runs one session in a fresh process per mode, sends TASKS blocking ``SendMessage`` calls whose
workload answers SIZE bytes each, waits for the records to be written, then prints the
process's VmRSS before and after (and after ``malloc_trim``, which returns freed heap the
allocator kept for reuse: what is still referenced), the bytes the task book counts as held, and the size of one
``ListTasks pageSize:100 includeArtifacts:true`` answer:

* ``held`` (the floor: the behaviour before issue 16, every answer kept in memory and one
  unbounded ListTasks page) -- spilling and the byte bounds switched off in that process;
* ``bounded`` (what ships): answers over ``held.SPILL_ABOVE`` served from ``out/``.

Usage: ``.venv/bin/python benchmarks/door_memory.py [TASKS] [SIZE]`` (default 120 x 1000000).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import trio

from murmur.ids import new_id
from murmur.manifest.model import AfterTask, Lifecycle, Manifest, TaskAcceptance
from murmur.session import door
from murmur.session.lifecycle import Policy
from murmur.session.records import create_records, records_dir_for
from murmur.session.session import Session
from murmur.session.setup import SessionSetup
from murmur.session.tasks import book as tasks
from murmur.session.tasks import held
from murmur.session.winddown import signal_wind_down
from murmur.workload import TaskContext, TaskOutcome


def rss_kib() -> int:
    """This process's VmRSS in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class BigAnswer:
    """Answers every task with ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self.size = size

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        await trio.lowlevel.checkpoint()
        return TaskOutcome("ok", ctx.text + "x" * (self.size - len(ctx.text)))


async def measure(work: Path, count: int, size: int) -> dict[str, int]:
    m = Manifest(
        name="big", version="0.1.0",
        lifecycle=Lifecycle(task_acceptance=TaskAcceptance("queue"), after_task=AfterTask("sleep"), queue_depth=64),
    )
    sid = new_id("ses")
    setup = SessionSetup(
        manifest=m, capsule_root=work, workdir=work, session_id=sid,
        records=create_records(records_dir_for(work, sid)),
        policy=Policy.build(m.lifecycle, no_idle_timeout=True), workload=BigAnswer(size), guard=None,
    )
    session = Session(setup)
    ready = trio.Event()
    figures: dict[str, int] = {}
    async with trio.open_nursery() as n:
        url: dict[str, str] = {}
        n.start_soon(session.run, lambda r: (url.update(r), ready.set()))
        with trio.fail_after(30):
            await ready.wait()
        async with httpx.AsyncClient(base_url=url["url"], timeout=60) as c:
            head = {"A2A-Version": "1.0"}
            await c.get("/.well-known/agent-card.json")
            figures["rss_before_kib"] = rss_kib()
            with trio.fail_after(600):
                for i in range(count):
                    body = {"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": {
                        "messageId": new_id("msg"), "role": "ROLE_USER", "parts": [{"text": f"t{i} "}]}}}
                    r = await c.post("/", json=body, headers=head)
                    assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                await session.flush_records()
            figures["rss_after_kib"] = rss_kib()
            ctypes.CDLL("libc.so.6").malloc_trim(0)  # give freed arenas back: what is still referenced
            figures["rss_trimmed_kib"] = rss_kib()
            figures["held_bytes"] = session.book.held_total
            body = {"jsonrpc": "2.0", "id": "l", "method": "ListTasks", "params": {"pageSize": 100, "includeArtifacts": True}}
            r = await c.post("/", json=body, headers=head)
            figures["list_page_bytes"] = len(r.content)
            figures["list_page_tasks"] = len(r.json()["result"]["tasks"])
        session.wind_down(signal_wind_down("SIGTERM"))
    return figures


def child(mode: str, count: int, size: int) -> None:
    if mode == "held":  # the floor: nothing spilled, no byte bounds
        held.SPILL_ABOVE = 1 << 62
        defaults = tasks.TaskBook.__init__.__kwdefaults__
        assert defaults is not None
        defaults["max_held"] = 1 << 62
        door.MAX_LIST_BYTES = 1 << 62
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MURMUR_HOME"] = str(Path(tmp) / "home")
        print(json.dumps(trio.run(measure, Path(tmp), count, size)))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    print(f"{count} tasks x {size} bytes of answer, one blocking SendMessage each")
    rows = {}
    for mode in ("held", "bounded"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", mode, str(count), str(size)],
            capture_output=True, text=True, check=True, timeout=900,
        )
        rows[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    for mode, f in rows.items():
        grew = (f["rss_after_kib"] - f["rss_before_kib"]) / 1024
        print(
            f"{mode + (' (floor)' if mode == 'held' else ''):16s} RSS {f['rss_before_kib'] / 1024:6.1f} -> "
            f"{f['rss_after_kib'] / 1024:6.1f} MiB (+{grew:6.1f}; {f['rss_trimmed_kib'] / 1024:6.1f} after malloc_trim)  held {f['held_bytes'] / 2**20:7.2f} MiB  "
            f"ListTasks page {f['list_page_bytes'] / 2**20:7.2f} MiB / {f['list_page_tasks']} tasks"
        )
    a, b = rows["held"], rows["bounded"]
    ga = max(1, a["rss_after_kib"] - a["rss_before_kib"])
    gb = b["rss_after_kib"] - b["rss_before_kib"]
    print(f"RSS growth bounded/held: {gb / ga:.3f}")


if __name__ == "__main__":
    main()
