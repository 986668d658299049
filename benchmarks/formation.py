"""Formation launch and teardown figures (prints; asserts nothing).

Measures, for formations of 1, 4 and 8 members:

* **launch to entry ready**: from starting ``mur run --roster --json`` to the entry member's
  readiness line (the second stdout line);
* **entry done to launcher exit**: from the entry member's process ending (its task done) to
  the launcher's exit, with cooperative members;
* **kill -KILL of the launcher to last member gone**;

beside the floor: one bare ``mur run --capsule … --json`` start, and N bare starts at once
(the CPU floor on this machine). Targets (issue 6): 8-member launch at most 1.2x the 8-at-once
floor; entry done to launcher exit under 1 s; kill to last member gone under 2 s typically.

Usage::

    python benchmarks/formation.py [--members fake|real] [--repeat N] [--sizes 1,4,8]

``--members fake`` (default) runs ``tests/e2e/fake_mur.py`` as each member (it reads the
channel, serves a card, reports and winds down on lifeline EOF); ``real`` runs ``mur run``
itself, which needs the member side of formations in the session.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "e2e" / "fake_mur.py"

MANIFEST = """name: {name}
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: {acceptance}
  after_task: {after}
capabilities:
  shell:
    allow: [echo]
"""
PLAN = """steps:
  - id: answer
    shell: [echo, "done: {{ task }}"]
output: "{{ steps.answer.stdout }}"
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def make_project(root: Path, size: int, env: dict[str, str]) -> Path:
    """A roster of ``size`` members (entry ``m0``), each its own capsule in the project store."""
    proj = root / "proj"
    proj.mkdir()
    lines = ["roster_version: 1", "members:"]
    for i in range(size):
        name = f"bm{i}"
        src = root / "src" / name
        src.mkdir(parents=True)
        entry = i == 0
        (src / "murmur.yaml").write_text(MANIFEST.format(
            name=name, acceptance="single" if entry else "queue", after="exit" if entry else "sleep"))
        (src / "plan.yaml").write_text(PLAN)
        mur(["build", str(src)], env)
        mur(["install", str(src / f"{name}-0.1.0.mur.zip")], env, cwd=proj)
        lines += [f"  - name: m{i}", f"    capsule: local/{name}", "    version: 0.1.0"]
        if entry:
            lines.append("    entry: true")
    (proj / "roster.yaml").write_text("\n".join(lines) + "\n")
    return proj


def mur(args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
    subprocess.run([sys.executable, "-m", "murmur.cli.mur", *args], env=env, cwd=cwd,
                   check=True, capture_output=True)


def read_line(proc: subprocess.Popen[bytes]) -> bytes:
    assert proc.stdout is not None
    return proc.stdout.readline()


def floor(proj: Path, env: dict[str, str], n: int) -> float:
    """Seconds until ``n`` bare ``mur run --capsule bm0 --json`` started at once all reported."""
    procs = []
    t0 = time.perf_counter()
    for i in range(n):
        wd = proj / f"floor-{i}-{time.monotonic_ns()}"
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "murmur.cli.mur", "run", "--capsule", "local/bm0",
             "--capsule-version", "0.1.0", "--project-dir", str(proj), "--workdir", str(wd),
             "--json", "--lifecycle-task-acceptance", "queue", "--lifecycle-after-task", "sleep"],
            env=env, cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    try:
        for p in procs:
            if not read_line(p):
                raise SystemExit("a bare mur run did not report")
        return time.perf_counter() - t0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
            assert p.stdout is not None
            p.stdout.close()


def launch(proj: Path, env: dict[str, str], *, task: bool) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "murmur.cli.mur", "run", "--roster", str(proj), "--json"]
    if task:
        args += ["--task", "go"]
    return subprocess.Popen(args, env=env, cwd=proj, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def member_pids(formation_line: bytes, entry_line: bytes) -> list[int]:
    peers = [p["pid"] for p in json.loads(formation_line)["peers"]]
    return [json.loads(entry_line)["pid"], *peers]


def one_launch(proj: Path, env: dict[str, str]) -> tuple[float, float]:
    """(launch to entry ready, kill -KILL of the launcher to last member gone)."""
    t0 = time.perf_counter()
    proc = launch(proj, env, task=False)
    formation_line, entry_line = read_line(proc), read_line(proc)
    if not entry_line:
        proc.kill()
        raise SystemExit("the formation did not launch (is the member side of formations in mur run?)")
    ready = time.perf_counter() - t0
    pids = member_pids(formation_line, entry_line)
    t1 = time.perf_counter()
    os.kill(proc.pid, signal.SIGKILL)
    while any(alive(p) for p in pids):
        time.sleep(0.002)
    gone = time.perf_counter() - t1
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
    return ready, gone


def one_teardown(proj: Path, env: dict[str, str]) -> float:
    """Entry member done (its process gone) to launcher exit, with cooperative members."""
    proc = launch(proj, env, task=True)
    read_line(proc)  # the formation line
    entry_line = read_line(proc)
    if not entry_line:
        proc.kill()
        raise SystemExit("the formation did not launch")
    entry = json.loads(entry_line)["pid"]
    while alive(entry):
        time.sleep(0.001)
    t0 = time.perf_counter()
    proc.wait()
    took = time.perf_counter() - t0
    assert proc.stdout is not None
    proc.stdout.close()
    return took


def fmt(values: list[float]) -> str:
    return (f"median {statistics.median(values):.3f}s  min {min(values):.3f}s  "
            f"max {max(values):.3f}s  (n={len(values)})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", choices=("fake", "real"), default="fake")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1,4,8")
    opts = ap.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = dict(os.environ, MURMUR_HOME=str(root / "home"))
        env.pop("MURMUR_FORMATION_ID", None)
        env["PYTHONPATH"] = str(ROOT / "src")
        if opts.members == "fake":
            wrapper = root / "mur-fake"
            wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
            wrapper.chmod(0o755)
        print(f"formation benchmark: members={opts.members}, repeat={opts.repeat}, "
              f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
        for size in sizes:
            sub = root / f"n{size}"
            sub.mkdir()
            proj = make_project(sub, size, env)
            floor_one = [floor(proj, env, 1) for _ in range(opts.repeat)]
            floor_n = [floor(proj, env, size) for _ in range(opts.repeat)]
            run_env = dict(env)
            if opts.members == "fake":
                run_env["MURMUR_MUR_BINARY"] = str(root / "mur-fake")
                run_env["FAKE_MUR_PLAN"] = json.dumps({"m0": {"task_seconds": 0.05}})
            launches = [one_launch(proj, run_env) for _ in range(opts.repeat)]
            teardowns = [one_teardown(proj, run_env) for _ in range(opts.repeat)]
            ready = [r for r, _ in launches]
            kill = [g for _, g in launches]
            ratio = statistics.median(ready) / statistics.median(floor_n)
            print(f"\n{size} member(s):")
            print(f"  floor: 1 bare `mur run --json`          {fmt(floor_one)}")
            print(f"  floor: {size} bare `mur run --json` at once  {fmt(floor_n)}")
            print(f"  launch to entry ready                  {fmt(ready)}  ({ratio:.2f}x the {size}-at-once floor)")
            print(f"  entry done to launcher exit            {fmt(teardowns)}")
            print(f"  kill -KILL launcher to last member gone {fmt(kill)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
