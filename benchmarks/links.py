"""Capsule links: the stub's own start time, and a link beside a plan ``capsule`` step (issue 13).

Prints figures, never asserts. Two parts, each measured in the same run as its floor:

* **stub start** — a generated stub (``NAME --help``: parse, no socket) beside ``sh -c true``,
  ``python3 -c pass`` and ``python3 -I -S -c pass`` (the stub's own interpreter, the floor),
  interleaved;
* **delegation** — a real ``mur-roost`` and two real ``mur run`` sessions over a temporary
  ``MURMUR_HOME``: ``boss``, whose shell step runs the link ``kid x``, and ``stepper``, whose
  plan ``capsule`` step delegates the same task to ``kid``. For each, from ``SendMessage`` to
  the child started (its journal ``start`` event) and to the answer back (the task completed,
  the link's answer printed by the step), the first split at the delegation's making (its id's
  time): before it, the caller's own path (a link: its shell command, the stub, the socket);
  after it, the child's start, which is the same on both. Interleaved runs; medians with their
  quartiles; link / step ratios;
* **placement** — why the link's child starts later: a link's chain holds one more contained
  start (its shell command's, ``sh -c 'kid …'``) than a capsule step's, and on a cgroup v2
  mount without ``favordynmods`` every join of a fresh unit waits one RCU grace period unless
  another process moved just before. Rounds spaced ``--gap-ms`` apart (as real starts are;
  back-to-back starts hide the wait, as ``benchmarks/shell_breakdown.py`` shows): a whole
  ``run_process(["true"])`` in a fresh unit beside the same uncontained (the floor), and a
  fork that writes itself into a fresh cgroup beside a ``clone3(CLONE_INTO_CGROUP)`` straight
  into one; and the same ``run_process`` started by a warm starter, which clones the command
  straight into its unit (what a session that delegates does for its shell commands,
  ``murmur.procs.cloned``).

Usage: ``python benchmarks/links.py [--runs 40] [--e2e-runs 15] [--gap-ms 50]``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from murmur.links.stub import interpreter, write_links

BIN = Path(sys.executable).parent
MUR = str(BIN / "mur")
ROOST = str(BIN / "mur-roost")
A2A = {"A2A-Version": "1.0", "content-type": "application/json"}
LIFE = "lifecycle:\n  task_acceptance: queue\n  queue_depth: 4\n  after_task: sleep\n"


def spread(values: list[float]) -> str:
    """``median (q1-q3)`` of ``values``, in ms."""
    q1, med, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return f"{med:7.1f} ms ({q1:.1f}-{q3:.1f})"


def stub_start(runs: int) -> None:
    """Each figure's runs interleaved with the others' (one round = one run of each), so a load
    change moves every figure alike."""
    with tempfile.TemporaryDirectory() as tmp:
        binary = write_links(Path(tmp) / "links", ["kid"])
        py = interpreter()
        rows = [
            ("sh -c true (floor)", ["sh", "-c", "true"]),
            ("python3 -c pass (floor)", [py, "-c", "pass"]),
            ("python3 -I -S -c pass (floor)", [py, "-I", "-S", "-c", "pass"]),
            ("link stub kid --help", [str(binary / "kid"), "--help"]),
        ]
        times: dict[str, list[float]] = {label: [] for label, _ in rows}
        for _ in range(runs):
            for label, argv in rows:
                began = time.perf_counter()
                subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                times[label].append((time.perf_counter() - began) * 1000)
    figures = {label: statistics.median(v) for label, v in times.items()}
    floor = figures["python3 -I -S -c pass (floor)"]
    print(f"stub start, {runs} interleaved runs each, median (q1-q3):")
    for label, ms in figures.items():
        print(f"  {label:32s} {spread(times[label])}   x{ms / floor:4.2f} of python3 -I -S")
    ratio = figures["link stub kid --help"] / floor
    print(f"  target (issue 32): stub <= x2.00 of python3 -I -S: x{ratio:.2f}, {'met' if ratio <= 2 else 'NOT met'}")


# -- delegation: a link beside a plan capsule step ----------------------------------------------


def capsule(src: Path, name: str, caps: str, plan: str) -> Path:
    d = src / name
    d.mkdir(parents=True)
    (d / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n{caps}{LIFE}")
    (d / "plan.yaml").write_text(plan)
    return d


def install_all(home: Path) -> None:
    from murmur.registry import install

    src = home / "src"
    kid = capsule(src, "kid", "  shell:\n    allow: [echo]\n",
                  'steps:\n  - id: s\n    shell: [echo, "kid {{ task }}"]\noutput: "{{ steps.s.stdout }}"\n')
    boss = capsule(src, "boss", "  shell:\n    allow: [sh, echo]\n  spawn:\n    allow: [kid]\n",
                   'steps:\n  - id: s\n    shell: [sh, -c, "kid {{ task }}"]\noutput: "{{ steps.s.stdout }}"\n')
    stepper = capsule(src, "stepper", "  shell:\n    allow: [echo]\n  spawn:\n    allow: [kid]\n",
                      'steps:\n  - id: c\n    capsule: kid\n    version: 0.1.0\n    task: "{{ task }}"\n'
                      'output: "{{ steps.c.output }}"\n')
    for d in (kid, boss, stepper):
        install(d, global_=True)


def start(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode()


def child_starts(home: Path) -> list[tuple[int, int | None]]:
    """``(unix_ms, its delegation's id time in unix ms)`` of every journaled start of a `kid` child."""
    from murmur.ids import id_timestamp_ms

    path = home / "tree" / "journal.jsonl"
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "start" and str(ev.get("capsule", "")).split("/")[-1].startswith("kid@"):
            dlg = (ev.get("lineage") or {}).get("delegation_id")
            out.append((int(ev["unix_ms"]), id_timestamp_ms(dlg) if isinstance(dlg, str) else None))
    return out


def one_task(url: str, home: Path, text: str) -> tuple[float, float, float, str]:
    """(ms to the child's start, ms to the completed task, ms to the delegation made, the
    answer) for one SendMessage. The delegation is "made" when its id is (a UUIDv7: ms
    resolution): before it, what the caller's path does (a link: its shell command, the stub,
    the socket); after it, the child's start, the same on both paths."""
    before = len(child_starts(home))
    t0 = time.time()
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": f"m{time.monotonic_ns()}", "role": "ROLE_USER",
                                   "parts": [{"text": text}]}}}
    task = httpx.post(url.rstrip("/") + "/", json=body, headers=A2A, timeout=120).json()["result"]["task"]
    t1 = time.time()
    starts = child_starts(home)[before:]
    answer = "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []))
    started = (starts[0][0] / 1000 - t0) * 1000 if starts else float("nan")
    made = (starts[0][1] / 1000 - t0) * 1000 if starts and starts[0][1] is not None else float("nan")
    return started, (t1 - t0) * 1000, made, answer


def delegation(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="murmur-bench-links-") as tmp:
        root = Path(tmp)
        home = root / "home"
        env = {k: v for k, v in os.environ.items()
               if k not in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE")}
        env["MURMUR_HOME"] = str(home)
        os.environ["MURMUR_HOME"] = str(home)
        install_all(home)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            roost, line = start([ROOST, "--port", "0", "--registry-path", str(home / "artifacts"),
                                 "--spawn-allow", "boss", "--spawn-allow", "stepper"], env, root)
            procs.append(roost)
            url = "http://127.0.0.1:" + line.strip().rsplit(":", 1)[1]
            run_env = {**env, "MURMUR_ROOST_URL": url}
            doors = {}
            for name in ("boss", "stepper"):
                work = root / name
                work.mkdir()
                p, ready = start([MUR, "run", "--capsule", f"local/{name}", "--capsule-version", "0.1.0", "--json",
                                  "--workdir", str(work), "--no-env-file"], run_env, work)
                procs.append(p)
                doors[name] = json.loads(ready)["url"]
            figures: dict[str, tuple[list[float], list[float]]] = {"link": ([], []), "capsule step": ([], [])}
            made: dict[str, list[float]] = {"link": [], "capsule step": []}
            for i in range(runs):
                for label, name in (("link", "boss"), ("capsule step", "stepper")):
                    started, done, delegated, answer = one_task(doors[name], home, f"x{i}")
                    assert f"kid x{i}" in answer, (label, answer)
                    figures[label][0].append(started)
                    figures[label][1].append(done)
                    made[label].append(delegated)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
    print(f"delegation, {runs} interleaved runs each, median (q1-q3), SendMessage to:")
    med = {k: (statistics.median(a), statistics.median(b)) for k, (a, b) in figures.items()}
    for label, (a, b) in figures.items():
        print(f"  {label:14s} child started {spread(a)}   answer back {spread(b)}")
    for label, values in made.items():
        after = [a - m for a, m in zip(figures[label][0], values, strict=True)]
        print(f"  {label:14s} of which to the delegation made {spread(values)}, then to the child started {spread(after)}")
    link, step = med["link"], med["capsule step"]
    print(f"  link / capsule step: child started x{link[0] / step[0]:.2f}, answer back x{link[1] / step[1]:.2f}")
    ratio = link[0] / step[0]
    print(f"  target (issue 32): child started <= x1.10 of the capsule step's: x{ratio:.2f}, "
          f"{'met' if ratio <= 1.1 else 'NOT met'}")


# -- placement: what one contained start pays for its unit ------------------------------------


class _CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls",
        "set_tid", "set_tid_size", "cgroup")]


_SYS_CLONE3 = 435  # x86_64 and aarch64
_CLONE_INTO_CGROUP = 0x200000000


def _fork_then_join(unit: Path) -> float:
    """ms from fork to the child's write into ``unit``'s cgroup.procs returning (the child reports it)."""
    r, w = os.pipe()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(unit / "cgroup.procs", os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.write(w, f"{(time.perf_counter() - began) * 1000:.3f}".encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    return float(got) if got else float("nan")


def _clone_into(unit: Path, libc: ctypes.CDLL) -> float:
    """ms of one ``clone3(CLONE_INTO_CGROUP)`` into ``unit`` (the child exits at once)."""
    fd = os.open(unit, os.O_RDONLY | os.O_DIRECTORY)
    try:
        args = _CloneArgs(flags=_CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD, cgroup=fd)
        began = time.perf_counter()
        pid = libc.syscall(_SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
        if pid == 0:
            os._exit(0)
        took = (time.perf_counter() - began) * 1000
    finally:
        os.close(fd)
    if pid < 0:
        return float("nan")
    os.waitpid(pid, 0)
    return took


def placement(runs: int, gap_ms: float) -> None:
    import trio

    from murmur import containment
    from murmur.containment.host import detect
    from murmur.procs import run_process

    host = detect()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    times: dict[str, list[float]] = {k: [] for k in (
        "run_process true, uncontained (floor)", "run_process true, in a fresh unit",
        "run_process true, by the warm starter", "fork, then join a fresh cgroup", "clone3 into a fresh cgroup")}
    libc = ctypes.CDLL(None, use_errno=True)
    true = "/bin/true" if os.path.exists("/bin/true") else "/usr/bin/true"

    async def shell_starts() -> None:
        from murmur.starter.client import Commands, Starter

        warm = Starter.launch(os.environ, env={"PATH": env["PATH"]})
        commands = Commands(lambda: warm)
        async with trio.open_nursery() as nursery:
            if warm is not None:
                await nursery.start(warm.run)
                await warm.wait_ready()
            for _ in range(runs):
                for label, contained, by in (("run_process true, uncontained (floor)", False, None),
                                             ("run_process true, in a fresh unit", True, None),
                                             ("run_process true, by the warm starter", True, commands)):
                    if by is not None and warm is None:
                        continue
                    await trio.sleep(gap_ms / 1000)
                    began = time.perf_counter()
                    await run_process(["true"], env=env, contained=contained, executable=true, starter=by)
                    times[label].append((time.perf_counter() - began) * 1000)
            nursery.cancel_scope.cancel()

    trio.run(shell_starts)
    base = host.base
    if host.name == containment.CGROUP and base is not None:
        for i in range(runs):
            for label in ("fork, then join a fresh cgroup", "clone3 into a fresh cgroup"):
                unit = base / f"murmur-bench-{os.getpid()}-{i}-{len(times[label])}"
                os.mkdir(unit)
                try:
                    time.sleep(gap_ms / 1000)
                    got = _fork_then_join(unit) if label.startswith("fork") else _clone_into(unit, libc)
                    times[label].append(got)
                finally:
                    os.rmdir(unit)
    print(f"placement, {runs} interleaved runs each, {gap_ms:g} ms apart, median (q1-q3) "
          f"[{host.name}{'' if host.dynmods is None else ', favordynmods' if host.dynmods else ', no favordynmods'}]:")
    floor = statistics.median(times["run_process true, uncontained (floor)"])
    for label, values in times.items():
        values = [v for v in values if v == v]
        if not values:
            print(f"  {label:38s} (not measured: {'no cgroup v2 unit here' if host.name != 'cgroup' else 'refused'})")
            continue
        extra = f"   x{statistics.median(values) / floor:4.2f} of uncontained" if label.startswith("run_process") else ""
        print(f"  {label:38s} {spread(values)}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="stub start runs per figure")
    parser.add_argument("--e2e-runs", type=int, default=15, help="delegations per figure")
    parser.add_argument("--gap-ms", type=float, default=50.0, help="pause before each placement run")
    args = parser.parse_args()
    print(f"host cores: {os.cpu_count()}")
    stub_start(args.runs)
    delegation(args.e2e_runs)
    placement(args.e2e_runs, args.gap_ms)


if __name__ == "__main__":
    main()
