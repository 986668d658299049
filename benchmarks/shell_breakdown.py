"""Benchmark: where the time of one shell command goes (``run_shell`` of ``echo``).

Prints (never asserts) the median wall time of a whole ``run_shell(["echo", "x"])`` and of
its parts: the unit's creation, the start (fork/exec, the cgroup join), the wait for the exit,
the kills, the release (removal), and the escapee sweeps (groups class), each timed by
wrapping the function that does it. Run it once per class::

    .venv/bin/python benchmarks/shell_breakdown.py [--n 300]
    MURMUR_CONTAINMENT=groups .venv/bin/python benchmarks/shell_breakdown.py

The figures are medians over ``--n`` commands in one process; a busy machine moves them, so
print ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from murmur import containment, shell
from murmur.containment import groups
from murmur.containment import units as context

TIMES: dict[str, list[float]] = defaultdict(list)
_current: dict[str, float] = defaultdict(float)


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            _current[name] += time.perf_counter() - t0

    return wrapper


def atimed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    async def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*a, **k)
        finally:
            _current[name] += time.perf_counter() - t0

    return wrapper


def patch() -> None:
    context.Containment.new_unit = timed("unit creation", context.Containment.new_unit)  # type: ignore[method-assign]
    context.Unit.kill = timed("kill", context.Unit.kill)  # type: ignore[method-assign]
    context.Unit.release = timed("release (removal)", context.Unit.release)  # type: ignore[method-assign]
    context.Unit.started = timed("register (janitor)", context.Unit.started)  # type: ignore[method-assign]
    groups.kill_adopted = timed("sweep", groups.kill_adopted)
    try:  # the primitive (murmur.procs): Popen on the loop's thread, the exit on a pidfd
        from murmur.procs import owned

        owned.subprocess.Popen = timed("start (Popen: vfork+exec)", owned.subprocess.Popen)  # type: ignore[misc]
        owned._Exec.wait = atimed("wait for exit (incl. join)", owned._Exec.wait)  # type: ignore[method-assign]
    except ImportError:  # before it (main): Trio's open_process in a worker thread
        trio.lowlevel.open_process = atimed("start (open_process)", trio.lowlevel.open_process)
        trio.Process.wait = atimed("wait for exit (incl. join)", trio.Process.wait)  # type: ignore[method-assign]


async def main(n: int) -> None:
    c = containment.here("bench")
    c.adopt_escapees()
    env = {"PATH": os.environ.get("PATH", shell.DEFAULT_PATH)}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n + 20):
            _current.clear()
            t0 = time.perf_counter()
            r = await shell.run_shell(["echo", "x"], allow=["echo"], cwd=Path(tmp), env=env)
            total = time.perf_counter() - t0
            assert r.exit_code == 0 and r.stdout == b"x\n", r
            if i >= 20:  # warm-up
                TIMES["whole run_shell"].append(total)
                for k, v in _current.items():
                    TIMES[k].append(v)
    print(f"class: {c.class_name}; {n} commands; load: {os.getloadavg()[0]:.2f}")
    for k, v in TIMES.items():
        print(f"  {k:28s} median {statistics.median(v) * 1000:7.3f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    patch()
    trio.run(main, args.n)
    sys.exit(0)
