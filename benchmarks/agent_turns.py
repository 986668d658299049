"""Agent loop overhead per turn against a local OpenAI-compatible server (prints figures).

Runs tasks whose model (a scripted loopback server) calls the `true` shell tool N-1 times and
then answers, and reports wall time per turn split into inference-only turns and
turns with a shell command. Run: `.venv/bin/python benchmarks/agent_turns.py [turns] [tasks]`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agent.scripted import (
    FakeTrace,
    Reply,
    ScriptedServer,
    agent_manifest,
    oa_text,
    oa_tools,
    task_context,
)
from murmur.agent import AgentWorkload


async def run(turns: int, tasks: int) -> None:
    server = ScriptedServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        for shell in (False, True):
            manifest = agent_manifest(server.url, shell=("true",), max_turns=turns + 1)
            work = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k" * 32, "PATH": "/usr/bin:/bin"})
            per_turn: list[float] = []
            for _ in range(tasks):
                if shell:
                    server.add(*[Reply(oa_tools((f"c{i}", "true", {"args": []}))) for i in range(turns - 1)])
                else:
                    server.add(*[Reply(oa_tools((f"c{i}", "nope", {"args": []}))) for i in range(turns - 1)])
                server.add(Reply(oa_text("done")))
                with tempfile.TemporaryDirectory() as tmp:
                    ctx = task_context(manifest, Path(tmp), FakeTrace())
                    t0 = time.perf_counter()
                    outcome = await work.run_task(ctx)
                    per_turn.append((time.perf_counter() - t0) / turns * 1000)
                assert outcome.status == "ok", outcome
            kind = "turn + shell command (`true`)" if shell else "turn + refused tool (no process)"
            print(f"{kind:36s} median {statistics.median(per_turn):6.2f} ms/turn "
                  f"(min {min(per_turn):.2f}, max {max(per_turn):.2f}; {tasks} tasks x {turns} turns)")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(run, int(sys.argv[1]) if len(sys.argv) > 1 else 20, int(sys.argv[2]) if len(sys.argv) > 2 else 10)
