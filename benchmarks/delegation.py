"""Benchmark delegation: time from ``POST /spawn`` to ``started``, beside the floor.

Over a temporary MURMUR_HOME holding a delegating capsule and a plan child, with the real
``mur-roost`` binary on a free port, it measures (real processes, real pipes):

* **floor** — starting the same ``mur run --capsule … --json`` directly: spawn to its
  readiness line, and spawn to readiness plus the task taken by ``SendMessage``;
* **one child** — :meth:`murmur.delegation.parent.Launcher.delegate` from the call
  (``POST /spawn`` first) to ``started`` (the child holds its task);
* **four children at once** — four concurrent calls: the wall time until all four have
  started, and the slowest single call;

each for both start paths, interleaved: children forked by the delegating session's warm
starter (the default) and exec'd (``MURMUR_STARTER=off``).

Each figure is the median of ``--runs`` runs (default 5). It prints the ratio against the
floor (readiness + task) and the warm/exec ratio; the target is 400 ms for one child. Figures only; nothing is
asserted.

Usage: ``python benchmarks/delegation.py [--runs 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

BIN = Path(sys.executable).parent
MUR = str(BIN / "mur")
ROOST = str(BIN / "mur-roost")
PATHS = ("warm", "exec")
"""How the children start: forked by the delegating session's warm starter, or exec'd."""
CHILD_PLAN = 'steps:\n  - id: say\n    shell: [echo, "{{ task }}"]\noutput: "{{ steps.say.stdout }}"\n'


def install_capsules(home: Path) -> None:
    """A delegating parent and a plan child in ``home``'s global store."""
    from murmur.registry import install

    src = home / "src"
    life = "lifecycle:\n  task_acceptance: queue\n  queue_depth: 4\n  after_task: sleep\n"
    for name, caps, plan in (
        ("bench-parent", "  shell:\n    allow: [echo]\n  spawn:\n    allow: [bench-child]\n",
         'steps:\n  - id: t\n    template: "x"\noutput: "x"\n'),
        ("bench-child", "  shell:\n    allow: [echo]\n", CHILD_PLAN),
    ):
        d = src / name
        d.mkdir(parents=True)
        (d / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n{caps}{life}")
        (d / "plan.yaml").write_text(plan)
        install(d, global_=True)


async def start_roost(home: Path) -> tuple[trio.Process, str]:
    """mur-roost on a free port; (process, base URL)."""
    proc = await trio.lowlevel.open_process(
        [ROOST, "--port", "0", "--registry-path", str(home / "artifacts"), "--spawn-allow", "bench-parent",
         "--max-live-capsules", "64"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    buf = b""
    while b"\n" not in buf:
        buf += await proc.stdout.receive_some(4096)
    port = buf.split(b"\n")[0].rsplit(b":", 1)[1].decode()
    return proc, f"http://127.0.0.1:{port}"


async def floor_once(work: Path, *, deliver: bool) -> float:
    """Seconds from starting `mur run --json` to its readiness line (and the task taken)."""
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    proc = await trio.lowlevel.open_process(
        [MUR, "run", "--capsule", "local/bench-child", "--capsule-version", "0.1.0", "--json",
         "--workdir", str(work), "--no-env-file"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(work),
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        buf = b""
        while b"\n" not in buf:
            chunk = await proc.stdout.receive_some(65536)
            assert chunk, "mur run exited before its readiness line"
            buf += chunk
        ready = json.loads(buf.split(b"\n")[0])
        if deliver:
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
                               "configuration": {"returnImmediately": True}}}
            async with httpx.AsyncClient() as client:
                await client.post(ready["url"] + "/", json=body, headers={"A2A-Version": "1.0"})
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        await proc.wait()


async def main(runs: int) -> None:
    """Measure and print."""
    from murmur.delegation.book import DelegationBook
    from murmur.delegation.parent import Launcher
    from murmur.manifest.load import load_manifest
    from murmur.roost.client import RoostClient
    from murmur.tree.lineage import LINEAGE_ENV, root_lineage

    with tempfile.TemporaryDirectory(prefix="murmur-bench-delegation-") as tmp:
        home = Path(tmp) / "home"
        os.environ["MURMUR_HOME"] = str(home)
        install_capsules(home)
        roost, url = await start_roost(home)
        try:
            floor: list[float] = []
            floor_task: list[float] = []
            async with RoostClient(url) as client:
                credential = await client.register("ses_" + "b" * 32, "bench-parent", "0.1.0")
            manifest = load_manifest(home / "src" / "bench-parent" / "murmur.yaml")
            lineage = root_lineage("ses_" + "b" * 32, manifest.spawn_allow)

            def make(path: str) -> Launcher:
                made = Launcher(
                    manifest=manifest, workdir=Path(tmp) / f"parent-{path}", session_id="ses_" + "b" * 32,
                    environ=dict(os.environ, MURMUR_STARTER="on" if path == "warm" else "off"), roost_url=url,
                    credential=lambda: credential, door_url=lambda: "http://127.0.0.1:9",
                    book=DelegationBook(lambda *a, **k: None), emit=lambda *a, **k: None, bound=600,
                )
                # what the delegation runtime adds beside MURMUR_SPAWNER: the child's lineage
                made.child_env = lambda dlg: {LINEAGE_ENV: lineage.hand_down("ses_" + "b" * 32, dlg)}
                return made

            launchers = {path: make(path) for path in PATHS}
            one: dict[str, list[float]] = {p: [] for p in PATHS}
            four_wall: dict[str, list[float]] = {p: [] for p in PATHS}
            four_slowest: dict[str, list[float]] = {p: [] for p in PATHS}
            async with trio.open_nursery() as nursery:
                for launcher in launchers.values():
                    await nursery.start(launcher.run)

                async def timed(launcher: Launcher, out: list[float]) -> None:
                    t0 = time.perf_counter()
                    result = await launcher.delegate("bench-child", "0.1.0", "x", False, context_id="ctx_b",
                                                     trust="trusted")
                    assert result["status"] == "started", result
                    out.append(time.perf_counter() - t0)

                for i in range(runs):  # interleaved, so load on the host weighs on every figure alike
                    floor.append(await floor_once(Path(tmp) / f"floor-{i}", deliver=False))
                    floor_task.append(await floor_once(Path(tmp) / f"floort-{i}", deliver=True))
                    for path, launcher in launchers.items():
                        await timed(launcher, one[path])
                        await launcher.stop_all("benchmark")
                for _ in range(runs):
                    for path, launcher in launchers.items():
                        each: list[float] = []
                        t0 = time.perf_counter()
                        async with trio.open_nursery() as batch:
                            for _ in range(4):
                                batch.start_soon(timed, launcher, each)
                        four_wall[path].append(time.perf_counter() - t0)
                        four_slowest[path].append(max(each))
                        await launcher.stop_all("benchmark")
                nursery.cancel_scope.cancel()
        finally:
            roost.terminate()
            await roost.wait()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:8.0f} ms"

    print(f"runs per figure: {runs} (median); host cores: {os.cpu_count()}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"floor: mur run --json to readiness line          {ms(floor)}")
    print(f"floor: readiness + task taken (SendMessage)      {ms(floor_task)}")
    for path in PATHS:
        label = "warm starter" if path == "warm" else "exec path, MURMUR_STARTER=off"
        print(f"[{label}]")
        print(f"  one child: /spawn to started                   {ms(one[path])}  "
              f"({statistics.median(one[path]) / statistics.median(floor_task):.2f}x the floor with task; target <= 400 ms)")
        print(f"  four children at once: all started (wall)      {ms(four_wall[path])}")
        print(f"  four children at once: slowest single call     {ms(four_slowest[path])}")
    print(f"one child, warm / exec: {statistics.median(one['warm']) / statistics.median(one['exec']):.2f}x")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    trio.run(main, parser.parse_args().runs)
