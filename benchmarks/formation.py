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

Containment (issue 11), with real ``mur run`` members for ``--busy`` sizes (default 3,8), every
member busy in a ``sleep`` plan step (the entry calls every peer, each peer runs its step):

* **kill -KILL of the launcher's process group to the last process gone**: until the
  formation's cgroup unit (``murmur-<formation id>``) holds no process, commands included
  (an inotify event on ``cgroup.events``), and until the janitor has removed the unit;
* **second SIGTERM (20 ms after the first) to the last process gone**, the same way;

beside the floor: ``cgroup.kill`` of a unit holding as many ``sleep`` processes as the
formation's unit held, to empty. Only on the cgroup class (the process-group class has no
unit to watch). Also:

* **launch to entry ready, cgroup class vs. process-group class**: the same launch with
  ``MURMUR_CONTAINMENT=groups`` (no cgroup units, no join trampoline) in the same run, runs
  interleaved. The code before containment is not available here, so the groups class (which
  still starts the janitor) stands in for "no cgroup"; the ratio shows what units cost;
* **the janitor's start time** (spawn, one registration, EOF, exit) beside ``python -I -S -c
  pass``, and its **RSS** (``VmRSS`` while it waits on its lifeline) beside a bare
  ``python -I -S`` reading stdin.

Usage::

    python benchmarks/formation.py [--members fake|real] [--repeat N] [--sizes 1,4,8]
                                   [--busy 3,8] [--busy-repeat N]

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

import trio

from murmur.containment import cgroup, janitor
from murmur.containment.host import CGROUP, detect

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


def pss_mb(pid: int) -> float:
    """Proportional set size of ``pid`` in MB (shared pages split among their users)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


MEMBER_PSS: dict[str, list[float]] = {}
"""Per launch kind: the members' summed PSS at entry ready (MB)."""


def one_launch(proj: Path, env: dict[str, str], kind: str = "") -> tuple[float, float]:
    """(launch to entry ready, kill -KILL of the launcher to last member gone); the members'
    summed PSS at that moment goes to ``MEMBER_PSS[kind]``."""
    t0 = time.perf_counter()
    proc = launch(proj, env, task=False)
    formation_line, entry_line = read_line(proc), read_line(proc)
    if not entry_line:
        proc.kill()
        raise SystemExit("the formation did not launch (is the member side of formations in mur run?)")
    ready = time.perf_counter() - t0
    pids = member_pids(formation_line, entry_line)
    MEMBER_PSS.setdefault(kind, []).append(sum(pss_mb(p) for p in pids))
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


# -- containment (issue 11) -------------------------------------------------------------------

BUSY_STEP = "echo $$ > \"$1\"; exec sleep 300"
"""A busy step: reports its pid on the benchmark's FIFO (it runs), then sleeps as itself."""


def _busy_manifest(name: str, *, entry: bool) -> str:
    lines = [f"name: {name}", "version: 0.1.0", "plan: plan.yaml", "capabilities:",
             "  shell:", "    allow: [sh]"]
    if entry:
        lines += ["  network:", "    allow: [localhost]"]
    lines += ["lifecycle:", f"  task_acceptance: {'single' if entry else 'queue'}",
              "  queue_depth: 4", f"  after_task: {'exit' if entry else 'sleep'}"]
    if not entry:
        lines += ["exports:", "  peer_tasks:", "    accept: true"]
    lines += ["network:", "  authentication:", "    scheme: bearer"]
    return "\n".join(lines) + "\n"


def make_busy_project(root: Path, size: int, fifo: Path, env: dict[str, str]) -> Path:
    """A roster of ``size`` real members; with ``--task`` the entry calls every peer and every
    member (the entry too) runs one busy step, so the formation holds ``size`` commands."""
    proj = root / "proj"
    proj.mkdir()
    peers = [f"p{i}" for i in range(1, size)]
    lines = ["roster_version: 1", "members:"]
    for member in ["lead", *peers]:
        entry = member == "lead"
        name = f"busy-{member}"
        src = root / "src" / name
        src.mkdir(parents=True)
        (src / "murmur.yaml").write_text(_busy_manifest(name, entry=entry))
        plan = f"steps:\n  - id: busy\n    shell: [sh, -c, '{BUSY_STEP}', sh, '{fifo}']\n"
        if entry:
            for p in peers:
                plan += f"  - id: call_{p}\n    member: {p}\n    task: go\n"
        (src / "plan.yaml").write_text(plan + 'output: "done"\n')
        mur(["build", str(src)], env)
        mur(["install", str(src / f"{name}-0.1.0.mur.zip")], env, cwd=proj)
        lines += [f"  - name: {member}", f"    capsule: local/{name}", "    version: 0.1.0"]
        if entry:
            lines.append("    entry: true")
    if peers:
        lines += ["reachability:", "  - from: lead", f"    to: [{', '.join(peers)}]"]
    (proj / "roster.yaml").write_text("\n".join(lines) + "\n")
    return proj


class Fifo:
    """The benchmark's readiness FIFO (it holds a write end so readers never see EOF)."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path, 0o600)
        self.path = path
        self._rd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._wr = os.open(path, os.O_WRONLY)
        self._buf = b""

    def expect(self, count: int, timeout: float = 120.0) -> list[int]:
        import select

        pids: list[int] = []
        deadline = time.monotonic() + timeout
        while len(pids) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._rd], [], [], left)[0]:
                raise SystemExit(f"only {len(pids)} of {count} busy steps reported")
            self._buf += os.read(self._rd, 4096)
            *done, self._buf = self._buf.split(b"\n")
            pids += [int(x) for x in done if x.strip()]
        return pids


async def _wait_empty(unit: Path) -> None:
    with trio.fail_after(60):
        await cgroup.wait_empty(unit)


def _wait_removed(unit: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while unit.exists() and time.monotonic() < deadline:
        time.sleep(0.002)


def busy_teardown(proj: Path, env: dict[str, str], fifo: Fifo, size: int, how: str) -> tuple[float, float, int, float]:
    """(launch to entry ready, trigger to unit empty, trigger to unit removed, processes in
    the unit at the trigger) for one busy formation ended by ``how``: ``kill-group`` (kill
    -KILL of the launcher's process group) or ``sigterm2`` (SIGTERM, 20 ms, SIGTERM)."""
    host = detect({})
    assert host.base is not None
    t0 = time.perf_counter()
    proc = launch(proj, env, task=True)
    formation_line, entry_line = read_line(proc), read_line(proc)
    if not entry_line:
        proc.kill()
        raise SystemExit("the busy formation did not launch")
    ready = time.perf_counter() - t0
    unit = host.base / f"murmur-{json.loads(formation_line)['formation_id']}"
    try:
        fifo.expect(size)
        held = len(cgroup.procs(unit))
        t1 = time.perf_counter()
        if how == "kill-group":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.02)
            t1 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
        trio.run(_wait_empty, unit)
        empty = time.perf_counter() - t1
        _wait_removed(unit)
        removed = time.perf_counter() - t1
        return ready, empty, held, removed
    finally:
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        cgroup.kill(unit)  # nothing should be left; never leave it if something is
        _wait_removed(unit, 5.0)
        cgroup.remove(unit)


def busy_launch(proj: Path, env: dict[str, str], fifo: Fifo, size: int) -> float:
    """Launch to entry ready for the busy formation (any class); then a cooperative stop
    (one SIGTERM), and the busy steps it reported are killed if anything left them."""
    t0 = time.perf_counter()
    proc = launch(proj, env, task=True)
    read_line(proc)
    if not read_line(proc):
        proc.kill()
        raise SystemExit("the busy formation did not launch")
    ready = time.perf_counter() - t0
    steps = fifo.expect(size)
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
    for pid in steps:  # ours: the formation we started ran them
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    return ready


def kill_floor(count: int) -> float:
    """Seconds from ``cgroup.kill`` of a unit holding ``count`` sleeps to the unit empty."""
    host = detect({})
    assert host.base is not None
    unit = cgroup.make_unit(host.base / f"murmur-bench-floor-{os.getpid()}")
    procs = [subprocess.Popen([*cgroup.join_prefix(unit), "/bin/sh", "-c", "echo; exec sleep 300"],
                              stdout=subprocess.PIPE) for _ in range(count)]
    try:
        for p in procs:
            read_line(p)
        t0 = time.perf_counter()
        cgroup.kill(unit)
        trio.run(_wait_empty, unit)
        return time.perf_counter() - t0
    finally:
        for p in procs:
            p.kill()
            p.wait()
            assert p.stdout is not None
            p.stdout.close()
        cgroup.kill(unit)
        while not cgroup.remove(unit):
            time.sleep(0.002)


def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def _blocked_rss_kb(proc: subprocess.Popen[bytes], *, janitor_mark: bool) -> int:
    """VmRSS (kB) of ``proc`` once it sleeps reading stdin (its main() reached the read)."""
    term = 1 << (signal.SIGTERM - 1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = _status(proc.pid)
        ready = not janitor_mark or int(st.get("SigIgn", "0"), 16) & term
        if ready and st.get("State", "").startswith("S"):
            return int(st["VmRSS"].split()[0])
        time.sleep(0.002)
    raise SystemExit("the process never blocked on stdin")


def janitor_figures(repeat: int) -> tuple[list[float], list[float], list[int], list[int]]:
    """(janitor spawn→exit with one registration, ``python -I -S -c pass`` spawn→exit,
    janitor VmRSS kB, bare ``python -I -S`` reading stdin VmRSS kB)."""
    script = str(Path(janitor.__file__))
    msg = (json.dumps({"bound": 25.0}) + "\n" + json.dumps(
        {"add": "cgroup", "key": "k", "path": "/nonexistent", "pid": 0, "start": ""}) + "\n"
        + json.dumps({"drop": "k"}) + "\n").encode()
    start, floor_start, rss, floor_rss = [], [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        j = subprocess.Popen([sys.executable, "-I", "-S", script], stdin=subprocess.PIPE,
                             start_new_session=True, cwd="/")
        assert j.stdin is not None
        j.stdin.write(msg)
        j.stdin.close()
        j.wait()
        start.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        floor_start.append(time.perf_counter() - t0)
        for argv, mark, out in (([sys.executable, "-I", "-S", script], True, rss),
                                ([sys.executable, "-I", "-S", "-c", "import sys; sys.stdin.buffer.read()"],
                                 False, floor_rss)):
            p = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)
            assert p.stdin is not None
            try:
                out.append(_blocked_rss_kb(p, janitor_mark=mark))
            finally:
                p.stdin.close()
                p.wait()
    return start, floor_start, rss, floor_rss


def janitor_report(repeat: int) -> None:
    start, floor_start, rss, floor_rss = janitor_figures(max(10, repeat * 2))
    print("\njanitor:")
    print(f"  floor: `python -I -S -c pass` spawn to exit   {fmt(floor_start)}")
    print(f"  spawn, one registration, EOF, exit          {fmt(start)}  "
          f"({statistics.median(start) / statistics.median(floor_start):.2f}x the floor)")
    print(f"  floor: bare `python -I -S` on stdin VmRSS    median {statistics.median(floor_rss) / 1024:.1f} MB")
    print(f"  janitor waiting on its lifeline VmRSS       median {statistics.median(rss) / 1024:.1f} MB  "
          f"(min {min(rss) / 1024:.1f}, max {max(rss) / 1024:.1f}, n={len(rss)})")


def fmt(values: list[float]) -> str:
    return (f"median {statistics.median(values):.3f}s  min {min(values):.3f}s  "
            f"max {max(values):.3f}s  (n={len(values)})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", choices=("fake", "real"), default="fake")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1,4,8")
    ap.add_argument("--busy", default="3,8", help="busy real-member formation sizes ('' for none)")
    ap.add_argument("--busy-repeat", type=int, default=3)
    ap.add_argument("--no-groups", action="store_true", help="skip the process-group class launches")
    ap.add_argument("--no-janitor", action="store_true", help="skip the janitor figures")
    opts = ap.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",") if s]
    busy = [int(s) for s in opts.busy.split(",") if s]
    host = detect({})

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
              f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}, containment: {host.name}")
        groups_env = {"MURMUR_CONTAINMENT": "groups"}
        for size in sizes:
            sub = root / f"n{size}"
            sub.mkdir()
            proj = make_project(sub, size, env)
            floor_one = [floor(proj, env, 1) for _ in range(opts.repeat)]
            floor_n = [floor(proj, env, size) for _ in range(opts.repeat)]
            run_env = dict(env, MURMUR_STARTER="on")
            if opts.members == "fake":
                run_env["MURMUR_MUR_BINARY"] = str(root / "mur-fake")
                run_env["FAKE_MUR_PLAN"] = json.dumps({"m0": {"task_seconds": 0.05}})
            launches, launches_groups, launches_exec = [], [], []
            for _ in range(opts.repeat):  # interleaved, so drift on a shared machine hits all
                launches.append(one_launch(proj, run_env, f"{size}"))
                if opts.members == "real":  # fake members go through MURMUR_MUR_BINARY: exec
                    launches_exec.append(one_launch(proj, dict(run_env, MURMUR_STARTER="off"), f"{size}x"))
                if not opts.no_groups:
                    launches_groups.append(one_launch(proj, dict(run_env, **groups_env)))
            teardowns = [one_teardown(proj, run_env) for _ in range(opts.repeat)]
            ready = [r for r, _ in launches]
            kill = [g for _, g in launches]
            ratio = statistics.median(ready) / statistics.median(floor_n)
            path = "warm starter" if opts.members == "real" else "exec"
            print(f"\n{size} member(s):  (load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
            print(f"  floor: 1 bare `mur run --json`          {fmt(floor_one)}")
            print(f"  floor: {size} bare `mur run --json` at once  {fmt(floor_n)}")
            print(f"  launch to entry ready ({path})  {fmt(ready)}  ({ratio:.2f}x the {size}-at-once floor)")
            if launches_exec:
                ready_x = [r for r, _ in launches_exec]
                print(f"  launch to entry ready (exec path, MURMUR_STARTER=off)  {fmt(ready_x)}  "
                      f"({statistics.median(ready_x) / statistics.median(floor_n):.2f}x the floor; "
                      f"warm/exec {statistics.median(ready) / statistics.median(ready_x):.2f}x)")
                print(f"  members' summed PSS at entry ready: {path} {statistics.median(MEMBER_PSS[str(size)]):.1f} MB, "
                      f"exec {statistics.median(MEMBER_PSS[f'{size}x']):.1f} MB")
            print(f"  entry done to launcher exit            {fmt(teardowns)}")
            print(f"  kill -KILL launcher to last member gone {fmt(kill)}")
            if launches_groups:
                ready_g = [r for r, _ in launches_groups]
                grew = statistics.median(ready) / statistics.median(ready_g)
                print(f"  launch to entry ready, MURMUR_CONTAINMENT=groups {fmt(ready_g)}")
                print(f"  launch time, {host.name} class / groups class: {grew:.3f}x "
                      "(groups stands in for 'no cgroup': the pre-containment code is not in this tree)")

        if not opts.no_janitor:
            janitor_report(opts.repeat)

        if busy and host.name != CGROUP:
            print(f"\nbusy formations: skipped, this host gives the process-group class ({host.why}); "
                  "there is no unit to watch")
            busy = []
        for size in busy:
            sub = root / f"busy{size}"
            sub.mkdir()
            fifo = Fifo(sub / "ready.fifo")
            proj = make_busy_project(sub, size, fifo.path, env)
            ready_c, ready_g, by_how = [], [], {"kill-group": [], "sigterm2": []}
            held: list[int] = []
            for _ in range(opts.busy_repeat):
                for how in by_how:
                    r, empty, n, removed = busy_teardown(proj, env, fifo, size, how)
                    ready_c.append(r)
                    by_how[how].append((empty, removed))
                    held.append(n)
                ready_g.append(busy_launch(proj, dict(env, **groups_env), fifo, size))
            floors = [kill_floor(max(held)) for _ in range(opts.busy_repeat * 2)]
            print(f"\n{size} busy real member(s) (each in a `sleep` step; {max(held)} processes in the unit):")
            print(f"  floor: cgroup.kill of a unit of {max(held)} sleeps to empty  {fmt(floors)}")
            for how, label in (("kill-group", "kill -KILL launcher's group"), ("sigterm2", "second SIGTERM")):
                e = [a for a, _ in by_how[how]]
                r = [b for _, b in by_how[how]]
                print(f"  {label} to last process gone   {fmt(e)}  "
                      f"({statistics.median(e) / statistics.median(floors):.1f}x the floor)")
                print(f"  {label} to unit removed        {fmt(r)}")
            print(f"  launch to entry ready ({host.name})          {fmt(ready_c)}")
            print(f"  launch to entry ready (groups class)    {fmt(ready_g)}  "
                  f"({statistics.median(ready_c) / statistics.median(ready_g):.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
