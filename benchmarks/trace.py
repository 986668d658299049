"""Seeing a run (issue 29): what tracing costs, and how fast a tree is read and drawn.

Prints figures beside their targets, never asserts. Three parts:

* **tracing cost** — trace capture cannot be turned off, so the cost of one record is measured
  against a no-op writer in the same run (``TraceWriter.emit``: the ids stamped, the line
  encoded, written and flushed; against a writer that returns an id and does nothing), and
  multiplied by the records a real ``mur demo`` wrote, beside that demo's wall time (target:
  tracing ≤ 3 % of it);
* **reading a tree** — a synthetic tree of 50 sessions and 20,000 records (tests/observe/
  synthetic.py, written by the real writer): ``mur trace show --tree`` in-process and as a
  command, and ``mur trace view --html`` (targets ≤ 0.5 s and ≤ 1 s);
* **drawing the page** — that page in headless Chromium (when installed): the page's own
  ``data-drawn-at-ms`` (navigation start to drawn) and ``data-draw-ms`` (its script) (target
  ≤ 1 s).

Usage: ``python benchmarks/trace.py [--rounds 5] [--demo-runs 1] [--no-demo]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from murmur.ids import new_id
from murmur.session.trace import TraceWriter
from observe import chromium
from observe.synthetic import write_tree


class NoopWriter:
    """The floor: a writer that makes the record's id and writes nothing."""

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        return new_id("evt")


def per_record_us(make: object, n: int) -> float:
    w = make  # a TraceWriter or NoopWriter
    parent = w.emit("session_start", parent_id=None, capsule_name="bench")  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    for i in range(n):
        w.emit("shell", parent_id=parent, turn=i, binary="/bin/echo", command="echo hi", exit_code=0,  # type: ignore[attr-defined]
               stdout_bytes=3, stderr_bytes=0, duration_ms=1)
    return (time.perf_counter() - t0) / n * 1e6


def tracing_cost(rounds: int, demo_runs: int) -> None:
    n = 5000
    real, noop = [], []
    with tempfile.TemporaryDirectory() as d:
        for r in range(rounds):
            with TraceWriter(Path(d) / f"t{r}.jsonl", new_id("ses")) as w:
                real.append(per_record_us(w, n))
            noop.append(per_record_us(NoopWriter(), n))
    emit, floor = statistics.median(real), statistics.median(noop)
    print(f"record cost: TraceWriter.emit {emit:.1f} us/record, no-op writer {floor:.1f} us/record "
          f"(tracing adds {emit - floor:.1f} us/record; medians of {rounds} x {n})")
    if demo_runs <= 0:
        return
    walls, counts = [], []
    for _ in range(demo_runs):
        with tempfile.TemporaryDirectory() as d:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "demo", "--home", str(Path(d) / "demo"),
                                  "--keep", "--json"], env=env, capture_output=True, text=True, timeout=300, check=False)
            walls.append(time.perf_counter() - t0)
            if out.returncode != 0:
                print(f"demo failed ({out.returncode}); tracing share not measured\n{out.stderr[-2000:]}")
                return
            counts.append(sum(len(p.read_text().splitlines()) for p in Path(d).rglob("trace.jsonl")))
    wall, records = statistics.median(walls), statistics.median(counts)
    share = records * (emit - floor) / 1e6 / wall * 100
    print(f"demo: {records:.0f} records in {wall:.2f} s wall (median of {demo_runs}); "
          f"tracing ≈ {records * (emit - floor) / 1000:.2f} ms = {share:.3f} % of the wall time (target ≤ 3 %)")


def median_s(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def reading(rounds: int) -> Path | None:
    tmp = Path(tempfile.mkdtemp(prefix="murmur-bench-trace-"))
    home = tmp / "home"
    t0 = time.perf_counter()
    info = write_tree(home, sessions=50, events=20_000, members=5)
    records = sum(len(p.read_text().splitlines()) for p in (home / "records").rglob("trace.jsonl"))
    print(f"synthetic tree: {len(info['sessions'])} sessions, {records} records (written in "
          f"{time.perf_counter() - t0:.1f} s)")
    os.environ["MURMUR_HOME"] = str(home)
    from murmur.cli.mur import main

    def show() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["trace", "show", "--tree"]) == 0

    page = tmp / "tree.html"

    def view() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["trace", "view", "--html", str(page)]) == 0

    s_in, v_in = median_s(show, rounds), median_s(view, rounds)
    env = {**os.environ, "MURMUR_HOME": str(home)}

    def show_cmd() -> None:
        subprocess.run([sys.executable, "-m", "murmur.cli.mur", "trace", "show", "--tree"], env=env,
                       capture_output=True, check=True, timeout=60)

    def view_cmd() -> None:
        subprocess.run([sys.executable, "-m", "murmur.cli.mur", "trace", "view", "--html", str(page)], env=env,
                       capture_output=True, check=True, timeout=60)

    def floor() -> None:
        subprocess.run([sys.executable, "-c", "import murmur.cli.mur"], env=env, capture_output=True, check=True)

    s_cmd, v_cmd, f_cmd = median_s(show_cmd, rounds), median_s(view_cmd, rounds), median_s(floor, rounds)
    print(f"show --tree: {s_in:.3f} s in-process, {s_cmd:.3f} s as a command (target ≤ 0.5 s; "
          f"interpreter + `import murmur.cli.mur` floor {f_cmd:.3f} s)")
    print(f"view --html: {v_in:.3f} s in-process, {v_cmd:.3f} s as a command (target ≤ 1 s); "
          f"page {page.stat().st_size / 1024:.0f} KiB")
    return page


def drawing(page: Path, rounds: int) -> None:
    if chromium.binary() is None:
        print("page draw: skipped (chromium is not installed; Debian: apt-get install chromium)")
        return
    at, script = [], []
    for _ in range(rounds):
        dom, console = chromium.dump_dom(page)
        m1 = re.search(r'data-drawn-at-ms="(\d+)"', dom)
        m2 = re.search(r'data-draw-ms="(\d+)"', dom)
        if not (m1 and m2) or console:
            print(f"page draw: the page did not draw ({console[:3]})")
            return
        at.append(int(m1.group(1)))
        script.append(int(m2.group(1)))
    print(f"page draw in chromium: {statistics.median(at)} ms from navigation start to drawn, script "
          f"{statistics.median(script)} ms (medians of {rounds}; target ≤ 1000 ms)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--demo-runs", type=int, default=1)
    p.add_argument("--no-demo", action="store_true")
    args = p.parse_args()
    tracing_cost(args.rounds, 0 if args.no_demo else args.demo_runs)
    page = reading(args.rounds)
    if page is not None:
        drawing(page, min(args.rounds, 3))
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
