"""Benchmark mur-roost: spawn -> register -> deregister cycles against GET /health.

Starts the real ``mur-roost`` binary on a free port over a temporary store holding two
capsules, then for 1, 16 and 64 concurrent clients measures, on the same server in the same
run:

* ``/health``: requests per second and p50/p99 latency (the floor);
* the delegation cycle: cycles per second, requests per second inside the cycle (three per
  cycle), and p50/p99 latency of ``POST /spawn`` and of every cycle request.

It prints one table with the ratios the issue sets as targets: cycle requests/s over
``/health`` requests/s (target >= 0.5) and ``/spawn`` p99 over ``/health`` p99 at 16 clients
(target <= 2). Figures only; nothing is asserted.

Usage: ``python benchmarks/roost.py [--seconds 3]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

ROOST = str(Path(sys.executable).with_name("mur-roost"))
CLIENTS = (1, 16, 64)


def percentile(samples: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``samples`` in milliseconds (nearest rank)."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] * 1000.0


def install_capsules(home: Path) -> None:
    """Install an orchestrator and a worker into ``home``'s global store."""
    os.environ["MURMUR_HOME"] = str(home)
    from murmur.registry import install

    src = home / "src"
    for name, body in (
        ("orch", "capabilities:\n  spawn:\n    allow: [worker]\n  network:\n    allow: [example.com]\n"),
        ("worker", "capabilities:\n  network:\n    allow: [https://example.com]\n"),
    ):
        d = src / name
        d.mkdir(parents=True)
        (d / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\n{body}", encoding="utf-8")
        install(d, global_=True)


async def start_daemon(home: Path) -> tuple[trio.Process, str]:
    """Start mur-roost on port 0 and return it with its base URL."""
    proc = await trio.lowlevel.open_process(
        [ROOST, "--port", "0", "--registry-path", str(home / "artifacts"), "--spawn-allow", "orch",
         "--max-live-capsules", "256", "--max-concurrent", "4"],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    buf = b""
    with trio.fail_after(30):
        while buf.count(b"\n") < 2:
            buf += await proc.stdout.receive_some(4096)
    port = buf.decode().splitlines()[0].rsplit(":", 1)[1]
    return proc, f"http://127.0.0.1:{port}"


async def run_health(client: httpx.AsyncClient, clients: int, seconds: float) -> tuple[float, list[float]]:
    """Hammer /health with ``clients`` loops; return (requests/s, latencies)."""
    lat: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            r = await client.get("/health")
            lat.append(time.perf_counter() - t0)
            assert r.status_code == 200

    start = time.perf_counter()
    async with trio.open_nursery() as n:
        for _ in range(clients):
            n.start_soon(loop)
    return len(lat) / (time.perf_counter() - start), lat


async def run_cycles(
    client: httpx.AsyncClient, clients: int, seconds: float, tag: str
) -> tuple[float, list[float], list[float]]:
    """``clients`` roots each loop spawn -> register -> deregister; return (cycles/s, spawn lat, all lat)."""
    spawn_lat: list[float] = []
    all_lat: list[float] = []
    cycles = 0
    creds = []
    for i in range(clients):
        r = await client.post("/register", json={"session_id": f"ses_{tag}_root{i}", "name": "orch", "version": "0.1.0"})
        creds.append(r.json()["credential"])
    deadline = time.perf_counter() + seconds

    async def timed(method: str, path: str, **kw: object) -> httpx.Response:
        t0 = time.perf_counter()
        r = await client.request(method, path, **kw)  # type: ignore[arg-type]
        dt = time.perf_counter() - t0
        all_lat.append(dt)
        if path == "/spawn":
            spawn_lat.append(dt)
        assert r.status_code == 200, r.text
        return r

    async def loop(i: int) -> None:
        nonlocal cycles
        h = {"x-murmur-spawn-credential": creds[i]}
        n = 0
        while time.perf_counter() < deadline:
            n += 1
            grant = (await timed("POST", "/spawn", json={"name": "worker", "version": "0.1.0"}, headers=h)).json()
            child = await timed(
                "POST", "/register",
                json={"session_id": f"ses_{tag}_{i}_{n}", "name": "worker", "version": "0.1.0"},
                headers={"x-murmur-spawn-approval": grant["approval"]},
            )
            await timed("POST", "/deregister", json={"outcome": "complete"},
                        headers={"x-murmur-spawn-credential": child.json()["credential"]})
            cycles += 1

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(clients):
            nursery.start_soon(loop, i)
    elapsed = time.perf_counter() - start
    for cred in creds:
        await client.post("/deregister", json={"outcome": "complete"}, headers={"x-murmur-spawn-credential": cred})
    return cycles / elapsed, spawn_lat, all_lat


async def main(seconds: float) -> None:
    """Run every measurement and print the table."""
    with tempfile.TemporaryDirectory(prefix="roost-bench-") as tmp:
        home = Path(tmp)
        install_capsules(home)
        proc, url = await start_daemon(home)
        try:
            limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
            async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
                await run_health(client, 4, 0.5)  # warm up
                print(f"mur-roost benchmark: {os.cpu_count()} cores, {seconds:g} s per measurement, server {url}")
                header = (
                    f"{'clients':>7} | {'health rps':>10} {'p50 ms':>7} {'p99 ms':>7} | {'cycles/s':>8} "
                    f"{'cycle rps':>9} {'spawn p50':>9} {'spawn p99':>9} {'req p99':>8} | "
                    f"{'rps ratio':>9} {'p99 ratio':>9}"
                )
                print(header)
                print("-" * len(header))
                for clients in CLIENTS:
                    h_rps, h_lat = await run_health(client, clients, seconds)
                    c_per_s, s_lat, a_lat = await run_cycles(client, clients, seconds, f"c{clients}")
                    c_rps = 3 * c_per_s
                    print(
                        f"{clients:>7} | {h_rps:>10.0f} {percentile(h_lat, .5):>7.2f} {percentile(h_lat, .99):>7.2f} | "
                        f"{c_per_s:>8.0f} {c_rps:>9.0f} {percentile(s_lat, .5):>9.2f} {percentile(s_lat, .99):>9.2f} "
                        f"{percentile(a_lat, .99):>8.2f} | {c_rps / h_rps:>9.2f} "
                        f"{percentile(s_lat, .99) / percentile(h_lat, .99):>9.2f}",
                        flush=True,
                    )
                print("targets: rps ratio (cycle requests/s over /health requests/s) >= 0.5; "
                      "p99 ratio (/spawn p99 over /health p99) <= 2 at 16 clients")
        finally:
            proc.terminate()
            with trio.move_on_after(10):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (default 3)")
    trio.run(main, parser.parse_args().seconds)
