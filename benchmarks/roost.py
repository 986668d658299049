"""Benchmark mur-roost: spawn -> register -> deregister cycles against GET /health.

Starts the real ``mur-roost`` binary on a free port over a temporary store holding two
capsules, then for 1, 16 and 64 concurrent clients measures, on the same server in the same
run:

* ``/health``: requests per second and p50/p99 latency (the floor);
* the delegation cycle: cycles per second, requests per second inside the cycle (three per
  cycle), and p50/p99 latency of ``POST /spawn`` and of every cycle request.

It prints one table with the ratios the issue sets as targets, at every load: cycle
requests/s over ``/health`` requests/s (target >= 0.9) and ``/spawn`` p99 over ``/health``
p99 (target <= 1.5). Health and cycle slices alternate (``--rounds`` rounds, nine by default;
which of the two goes first alternates too, so a drift in the machine's load falls on both
alike), after a warm-up of each. Rates and the rate ratio are medians over the rounds, the
p99s are over every sample of the rounds pooled; beside each ratio the spread over the rounds
(lowest..highest of the per-round ratios) is printed, and the daemon's CPU time (``/proc``)
per cycle request over per ``/health`` request, pooled over the timed parts of the rounds
(no target: it shows what the server spends, which a loaded machine moves less than it moves
the rates). Figures only; nothing is asserted.

Usage: ``python benchmarks/roost.py [--seconds 3] [--rounds 9]``
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

import trio

ROOST = str(Path(sys.executable).with_name("mur-roost"))
CLIENTS = (1, 16, 64)
ROUNDS = 9  # alternating health/cycle slices per client count (default of --rounds)
TARGET_RPS, TARGET_P99 = 0.9, 1.5  # issue 32
PID = str(os.getpid())  # the registrant hint every murmur client sends (spec/roost.md)
DAEMON: dict[str, int] = {}  # "pid": the daemon's pid, once started
CPU: dict[str, list[float]] = {"health": [0.0, 0], "cycle": [0.0, 0]}  # kind -> [cpu s, requests]


def daemon_cpu() -> float:
    """The daemon's CPU seconds so far (user + system, /proc/<pid>/stat), or 0 when unknown."""
    try:
        with open(f"/proc/{DAEMON['pid']}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (KeyError, OSError, IndexError, ValueError):
        return 0.0


def count_cpu(kind: str, since: float, requests: int) -> None:
    """Add the daemon's CPU since ``since`` and ``requests`` to ``kind``'s running totals."""
    CPU[kind][0] += daemon_cpu() - since
    CPU[kind][1] += requests


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


async def start_daemon(home: Path) -> tuple[trio.Process, int]:
    """Start mur-roost on port 0 and return it with its port."""
    lead = [sys.executable, os.environ["ROOST_PROFILE"]] if os.environ.get("ROOST_PROFILE") else [ROOST]
    proc = await trio.lowlevel.open_process(
        [*lead, "--port", "0", "--registry-path", str(home / "artifacts"), "--spawn-allow", "orch",
         "--max-live-capsules", "256", "--max-concurrent", "4"],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    buf = b""
    with trio.fail_after(30):
        while buf.count(b"\n") < 2:
            buf += await proc.stdout.receive_some(4096)
    return proc, int(buf.decode().splitlines()[0].rsplit(":", 1)[1])


class Conn:
    """A minimal HTTP/1.1 keep-alive client over one connection (keeps client cost low).

    httpx spends more CPU per request than the daemon does on a small host, so the load
    generator speaks HTTP itself: one request at a time, ``content-length`` framed.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.stream: trio.SocketStream | None = None
        self.buf = b""

    async def __aenter__(self) -> Conn:
        self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.stream is not None:
            await self.stream.aclose()

    async def request(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
        """Send one request; return (status, JSON body)."""
        assert self.stream is not None
        data = json.dumps(body).encode() if body is not None else b""
        lines = [f"{method} {path} HTTP/1.1", f"host: 127.0.0.1:{self.port}", f"content-length: {len(data)}"]
        if body is not None:
            lines.append("content-type: application/json")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        await self.stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        while b"\r\n\r\n" not in self.buf:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise ConnectionError("mur-roost closed the connection")
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length, close = 0, False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"connection" and value.strip().lower() == b"close":
                close = True  # hypercorn ends a connection after keep_alive_max_requests
        while len(self.buf) < length:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise ConnectionError("mur-roost closed the connection")
            self.buf += chunk
        payload, self.buf = self.buf[:length], self.buf[length:]
        if close:
            await self.stream.aclose()
            self.stream, self.buf = await trio.open_tcp_stream("127.0.0.1", self.port), b""
        return status, json.loads(payload)


async def run_health(port: int, clients: int, seconds: float) -> tuple[float, list[float]]:
    """Hammer /health with ``clients`` connections; return (requests/s, latencies in s)."""
    lat: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        async with Conn(port) as conn:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                status, _ = await conn.request("GET", "/health")
                lat.append(time.perf_counter() - t0)
                assert status == 200

    start, cpu = time.perf_counter(), daemon_cpu()
    async with trio.open_nursery() as n:
        for _ in range(clients):
            n.start_soon(loop)
    count_cpu("health", cpu, len(lat))
    return len(lat) / (time.perf_counter() - start), lat


async def run_cycles(port: int, clients: int, seconds: float, tag: str) -> tuple[float, list[float], list[float]]:
    """``clients`` roots each loop spawn -> register -> deregister; return (cycles/s, spawn lat, all lat)."""
    spawn_lat: list[float] = []
    all_lat: list[float] = []
    cycles = 0
    creds: list[str] = []
    async with Conn(port) as conn:
        for i in range(clients):
            _, out = await conn.request("POST", "/register", {"session_id": f"ses_{tag}_root{i}", "name": "orch", "version": "0.1.0"})
            creds.append(str(out["credential"]))
    deadline = time.perf_counter() + seconds

    async def timed(conn: Conn, path: str, body: object, headers: dict[str, str]) -> dict[str, object]:
        t0 = time.perf_counter()
        status, out = await conn.request("POST", path, body, headers)
        dt = time.perf_counter() - t0
        all_lat.append(dt)
        if path == "/spawn":
            spawn_lat.append(dt)
        assert status == 200, out
        return out

    async def loop(i: int) -> None:
        nonlocal cycles
        h = {"x-murmur-spawn-credential": creds[i]}
        n = 0
        async with Conn(port) as conn:
            while time.perf_counter() < deadline:
                n += 1
                grant = await timed(conn, "/spawn", {"name": "worker", "version": "0.1.0"}, h)
                child = await timed(
                    conn, "/register", {"session_id": f"ses_{tag}_{i}_{n}", "name": "worker", "version": "0.1.0"},
                    {"x-murmur-spawn-approval": str(grant["approval"]), "x-murmur-registrant-pid": PID},
                )
                await timed(conn, "/deregister", {"outcome": "complete"}, {"x-murmur-spawn-credential": str(child["credential"])})
                cycles += 1

    start, cpu = time.perf_counter(), daemon_cpu()
    async with trio.open_nursery() as nursery:
        for i in range(clients):
            nursery.start_soon(loop, i)
    elapsed = time.perf_counter() - start
    count_cpu("cycle", cpu, len(all_lat))
    async with Conn(port) as conn:
        for cred in creds:
            await conn.request("POST", "/deregister", {"outcome": "complete"}, {"x-murmur-spawn-credential": cred})
    return cycles / elapsed, spawn_lat, all_lat


def cpu_ratio() -> float:
    """The daemon's CPU per cycle request over its CPU per /health request (nan when unknown)."""
    (h_cpu, h_n), (c_cpu, c_n) = CPU["health"], CPU["cycle"]
    if not (h_cpu and h_n and c_n):
        return float("nan")
    return (c_cpu / c_n) / (h_cpu / h_n)


async def main(seconds: float, rounds: int = ROUNDS) -> None:
    """Run every measurement and print the table."""
    with tempfile.TemporaryDirectory(prefix="roost-bench-") as tmp:
        home = Path(tmp)
        install_capsules(home)
        proc, port = await start_daemon(home)
        DAEMON["pid"] = proc.pid
        try:
            await run_health(port, 4, 0.5)  # warm up both paths
            await run_cycles(port, 4, 0.5, "warm")
            print(
                f"mur-roost benchmark: {os.cpu_count()} cores, {seconds:g} s per measurement in {rounds} "
                f"rounds, server 127.0.0.1:{port}, load average {os.getloadavg()[0]:.2f}"
            )
            header = (
                f"{'clients':>7} | {'health rps':>10} {'p50 ms':>7} {'p99 ms':>7} | {'cycles/s':>8} "
                f"{'cycle rps':>9} {'spawn p50':>9} {'spawn p99':>9} {'req p99':>8} | "
                f"{'rps ratio':>9} {'(spread)':>11} {'p99 ratio':>9} {'(spread)':>11} | {'cpu ratio':>9}"
            )
            print(header)
            print("-" * len(header))
            for clients in CLIENTS:
                # Alternate short slices of each, so that a load change on a shared machine
                # falls on both; each figure is the median over the rounds.
                rows = []
                for kind in CPU:
                    CPU[kind] = [0.0, 0]
                for r in range(rounds):
                    tag = f"c{clients}r{r}"
                    if r % 2 == 0:
                        h_rps, h_lat = await run_health(port, clients, seconds / rounds)
                        c_per_s, s_lat, a_lat = await run_cycles(port, clients, seconds / rounds, tag)
                    else:
                        c_per_s, s_lat, a_lat = await run_cycles(port, clients, seconds / rounds, tag)
                        h_rps, h_lat = await run_health(port, clients, seconds / rounds)
                    rows.append((h_rps, h_lat, c_per_s, s_lat, a_lat))
                h_rps = statistics.median(row[0] for row in rows)
                c_per_s = statistics.median(row[2] for row in rows)
                h_lat = [x for row in rows for x in row[1]]
                s_lat = [x for row in rows for x in row[3]]
                a_lat = [x for row in rows for x in row[4]]
                c_rps = 3 * c_per_s
                h99, s99 = percentile(h_lat, 0.99), percentile(s_lat, 0.99)
                ratios = [3 * row[2] / row[0] for row in rows]
                p99s = [percentile(row[3], 0.99) / percentile(row[1], 0.99) for row in rows]
                print(
                    f"{clients:>7} | {h_rps:>10.0f} {percentile(h_lat, 0.5):>7.2f} {h99:>7.2f} | "
                    f"{c_per_s:>8.0f} {c_rps:>9.0f} {percentile(s_lat, 0.5):>9.2f} {s99:>9.2f} "
                    f"{percentile(a_lat, 0.99):>8.2f} | {statistics.median(ratios):>9.2f} "
                    f"{min(ratios):>5.2f}..{max(ratios):<4.2f} {s99 / h99:>9.2f} "
                    f"{min(p99s):>5.2f}..{max(p99s):<4.2f} | {cpu_ratio():>9.2f}",
                    flush=True,
                )
            print(
                f"targets: rps ratio (cycle requests/s over /health requests/s) >= {TARGET_RPS} and "
                f"p99 ratio (/spawn p99 over /health p99) <= {TARGET_P99}, at every load; "
                f"rates: medians of {rounds} alternating rounds; p99s: all rounds pooled; cpu ratio: "
                f"the daemon's CPU per cycle request over per /health request, all rounds pooled "
                f"(no target; less sensitive to the machine's load than the rates); "
                f"load average now {os.getloadavg()[0]:.2f}"
            )
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
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"alternating rounds (default {ROUNDS})")
    args = parser.parse_args()
    trio.run(main, args.seconds, max(1, args.rounds))
