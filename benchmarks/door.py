"""Benchmark: the murmur door against the a2a-sdk reference server, plus footprint figures.

Prints (never asserts):

* SendMessage → completed round trips per second against one ``mur run --json`` process
  serving an echo plan capsule (a ``template`` step: no process per task; and a ``shell``
  ``echo`` step: one process per task), and against the a2a-sdk reference server (its echo
  agent on uvicorn), from the same client in the same run, with the ratio;
* the idle RSS of one ``mur run`` process (VmRSS after the door has served for 1 s);
* the wall time of ``mur --help`` (median of 10).

Usage: ``.venv/bin/python benchmarks/door.py [--seconds 5] [--concurrency 1]``. Needs the
``bench`` extra (``pip install -e '.[bench]'``) for the reference server.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

HERE = Path(__file__).resolve().parent
MUR = [sys.executable, "-m", "murmur.cli.mur"]

MANIFEST = """\
name: {name}
version: 0.1.0
plan: plan.yaml
capabilities:
  shell:
    allow: [echo]
lifecycle:
  task_acceptance: queue
  queue_depth: 64
  after_task: sleep
"""
TEMPLATE_PLAN = 'steps:\n  - id: say\n    template: "echo: {{ task }}"\noutput: "{{ steps.say.output }}"\n'
SHELL_PLAN = 'steps:\n  - id: say\n    shell: [echo, "echo: {{ task }}"]\noutput: "{{ steps.say.stdout }}"\n'


def read_line(fd: int, timeout: float) -> str:
    """One line from a pipe within ``timeout`` seconds."""
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            raise TimeoutError("no readiness line")
        chunk = os.read(fd, 1)
        if not chunk:
            raise EOFError("mur run exited before its readiness line")
        buf += chunk
    return buf.decode()


def start_mur(root: Path, name: str, plan: str, home: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    """Start ``mur run --json`` for a fresh capsule; (process, url, seconds to readiness)."""
    d = root / name
    d.mkdir()
    (d / "murmur.yaml").write_text(MANIFEST.format(name=name))
    (d / "plan.yaml").write_text(plan)
    env = {**os.environ, "MURMUR_HOME": str(home)}
    t0 = time.monotonic()
    proc = subprocess.Popen([*MUR, "run", "--json"], cwd=d, env=env, stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    ready = json.loads(read_line(proc.stdout.fileno(), 60))
    return proc, str(ready["url"]), time.monotonic() - t0


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_reference(port: int) -> subprocess.Popen[bytes]:
    """The a2a-sdk reference echo server on uvicorn; returns once it answers."""
    proc = subprocess.Popen([sys.executable, str(HERE / "_a2a_reference.py"), str(port)], start_new_session=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the reference server did not start (is the bench extra installed?)")


async def round_trips(url: str, seconds: float, concurrency: int) -> float:
    """Blocking SendMessage calls answered COMPLETED per second (after a short warm-up)."""
    done = 0
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_keepalive_connections=64)) as c:

        async def one(i: int) -> None:
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "SendMessage",
                "params": {"message": {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": f"hello {i}"}]}},
            }
            r = await c.post("/", json=body, headers={"A2A-Version": "1.0"})
            state = r.json()["result"]["task"]["status"]["state"]
            if state != "TASK_STATE_COMPLETED":
                raise RuntimeError(f"task ended {state}")

        for i in range(20):  # warm-up
            await one(i)
        end = trio.current_time() + seconds

        async def worker(w: int) -> None:
            nonlocal done
            i = w * 1_000_000
            while trio.current_time() < end:
                await one(i)
                i += 1
                done += 1

        t0 = trio.current_time()
        async with trio.open_nursery() as n:
            for w in range(concurrency):
                n.start_soon(worker, w)
        return done / (trio.current_time() - t0)


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def help_time() -> float:
    """Median wall seconds of ``mur --help`` over 10 runs (the console script when present)."""
    script = Path(sys.executable).with_name("mur")
    cmd = [str(script)] if script.exists() else MUR
    times = []
    for _ in range(10):
        t0 = time.monotonic()
        subprocess.run([*cmd, "--help"], check=True, stdout=subprocess.DEVNULL)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, then make sure the group is gone."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def main() -> None:
    """Run every measurement and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="measuring time per server")
    ap.add_argument("--concurrency", type=int, default=1, help="client requests in flight")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        procs: list[subprocess.Popen[bytes]] = []
        try:
            tmpl, tmpl_url, ready_s = start_mur(root, "echo-template", TEMPLATE_PLAN, home)
            procs.append(tmpl)
            time.sleep(1.0)
            idle_rss = rss_mb(tmpl.pid)
            shell, shell_url, _ = start_mur(root, "echo-shell", SHELL_PLAN, home)
            procs.append(shell)
            port = free_port()
            ref = start_reference(port)
            procs.append(ref)
            ref_url = f"http://127.0.0.1:{port}"
            results = {}
            for label, url in (("reference", ref_url), ("mur-template", tmpl_url), ("mur-shell", shell_url)):
                results[label] = trio.run(round_trips, url, args.seconds, args.concurrency)
            busy_rss = rss_mb(tmpl.pid)
        finally:
            for p in procs:
                stop(p)
    print(f"concurrency: {args.concurrency}, {args.seconds:.0f} s per server")
    print(f"a2a-sdk reference server (uvicorn, echo agent): {results['reference']:8.1f} round trips/s")
    print(f"mur run, echo plan (template step):            {results['mur-template']:8.1f} round trips/s"
          f"   ratio {results['mur-template'] / results['reference']:.2f}x")
    print(f"mur run, echo plan (shell `echo` step):        {results['mur-shell']:8.1f} round trips/s"
          f"   ratio {results['mur-shell'] / results['reference']:.2f}x")
    print(f"mur run --json start to readiness line:        {ready_s * 1000:8.0f} ms")
    print(f"idle RSS of one mur run:                       {idle_rss:8.1f} MB (after the benchmark: {busy_rss:.1f} MB)")
    print(f"mur --help (median of 10):                     {help_time() * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
