"""Benchmark: what the sandbox costs one command (``run_shell(["true"])`` under each class).

Prints (never asserts) the median wall time of starting ``true`` through
:func:`murmur.shell.run_shell` under advisory, scoped and sealed, interleaved in the same run
(round-robin, so load drifts hit every class alike), the ratios to advisory against the
issue's targets (scoped <= 1.5x advisory + 5 ms; sealed <= 2x advisory + 15 ms), and the
one-off cost of compiling each class's sandbox (the ruleset, the seccomp program, the
namespaces) when a session starts::

    .venv/bin/python benchmarks/sandbox.py [--n 200]

A class this host cannot back is reported and skipped. Print ``uptime`` beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from murmur import shell
from murmur.manifest import Containment
from murmur.sandbox import compiled
from murmur.sandbox.host import probe
from murmur.sandbox.policy import Policy

TARGETS = {Containment.SCOPED: (1.5, 5.0), Containment.SEALED: (2.0, 15.0)}


async def _main(n: int) -> int:
    work = Path(tempfile.mkdtemp(prefix="murmur-bench-sandbox-"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work)}
    support = probe()
    boxes: dict[Containment, compiled.Sandbox | None] = {Containment.ADVISORY: None}
    compile_ms: dict[Containment, float] = {}
    for klass in (Containment.SCOPED, Containment.SEALED):
        lacks = support.lacks(klass)
        if lacks:
            print(f"{klass.value}: skipped, this host lacks {'; '.join(lacks)}")
            continue
        t0 = time.perf_counter()
        boxes[klass] = compiled.compile(Policy(klass=klass, workdir=str(work), allow=("true",),
                                               search_path="/usr/bin:/bin"), support)
        compile_ms[klass] = (time.perf_counter() - t0) * 1000
    times: dict[Containment, list[float]] = {k: [] for k in boxes}
    try:
        for _ in range(n):
            for klass, box in boxes.items():
                if box is None:
                    _current_clear()
                else:
                    install_keep(box)
                t0 = time.perf_counter()
                res = await shell.run_shell(["true"], allow=("true",), cwd=work, env=env)
                times[klass].append((time.perf_counter() - t0) * 1000)
                if res.exit_code != 0:
                    print(f"{klass.value}: `true` exited {res.exit_code}: {res.stderr_text}", file=sys.stderr)
                    return 1
    finally:
        _current_clear()
        for box in boxes.values():
            if box is not None:
                box.close()
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(times[Containment.ADVISORY])
    print(f"uptime: {os.getloadavg()[0]:.2f} load, {n} commands per class, interleaved")
    print(f"advisory: median {base:.2f} ms")
    for klass, samples in times.items():
        if klass is Containment.ADVISORY:
            continue
        med = statistics.median(samples)
        factor, extra = TARGETS[klass]
        target = factor * base + extra
        verdict = "within" if med <= target else "OVER"
        print(f"{klass.value}: median {med:.2f} ms = {med / base:.2f}x advisory "
              f"(target <= {factor}x + {extra:.0f} ms = {target:.2f} ms: {verdict}); "
              f"compiled once in {compile_ms[klass]:.1f} ms")
    return 0


def install_keep(box: compiled.Sandbox) -> None:
    """Make ``box`` current without closing the others (they are reused round-robin)."""
    from murmur.sandbox import installed as cur

    cur._current.clear()
    cur._current.append(box)


def _current_clear() -> None:
    from murmur.sandbox import installed as cur

    cur._current.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="commands per class (default 200)")
    args = parser.parse_args()
    return trio.run(_main, args.n)


if __name__ == "__main__":
    sys.exit(main())
