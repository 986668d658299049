"""Start-up figures of one ``mur run`` (issue 19); prints, asserts nothing.

Measured in one run, each the median of ``--repeat`` tries, beside the floors measured the
same way in the same run:

* **start → readiness**: from starting ``mur run --json`` (a plain plan capsule: one
  ``template`` step, ``queue``/``sleep``) to its readiness line on stdout;
* **imports**: the wall time and VmRSS of a fresh interpreter importing exactly the
  top-level modules that ``mur run`` loaded (taken from its ``python -X importtime`` output),
  and the names of the heavy ones among them;
* **idle RSS**: VmRSS of the ``mur run`` process 1 s after its readiness line;

floors: ``python -c pass``, ``import trio``, ``import trio, hypercorn.trio`` (wall time to
exit, and the RSS after the imports). Targets (issue 19): readiness at most 300 ms or 1.8x the
``import trio, hypercorn.trio`` floor; idle RSS of a plain plan session at most 40 MB.

Each figure also has its CPU time (user + system: the ``mur run`` process's own at its
readiness line, a floor's at its exit), which a shared machine's load disturbs far less than
the wall time; compare the ratios.

Every interpreter here reads compiled bytecode, as an installed ``mur`` does (pip compiles
what it installs): the environment's ``PYTHONDONTWRITEBYTECODE`` is dropped and
``PYTHONPYCACHEPREFIX`` points at a cache in the run's temporary directory, which the warm-up
run fills (the source tree is not written). ``--murmur-from-source`` measures the other case:
murmur's own modules are compiled from source at each start (their cached bytecode removed
after the warm-up, nothing written after it), everything else read as bytecode: what an
editable checkout run under ``PYTHONDONTWRITEBYTECODE=1`` pays.

Usage: ``.venv/bin/python benchmarks/startup.py [--repeat 7] [--murmur-from-source]``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
MANIFEST = """\
name: bench-start
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: queue
  after_task: sleep
"""
PLAN = 'steps:\n  - id: say\n    template: "echo: {{ task }}"\noutput: "{{ steps.say.output }}"\n'
MEMBER_PACKAGES = ("attrs", "cattrs", "ruamel.yaml", "cryptography.hazmat.primitives.asymmetric.ed25519", "httpx")
"""Packages whose import cost is reported alone (``-X importtime`` cumulative, fresh interpreter)."""
HEAVY = ("quart", "quart_trio", "werkzeug", "flask", "jinja2", "cryptography", "httpx", "ruamel", "cattrs", "hypercorn")
RSS_PROBE = (
    "import time; t=time.perf_counter()\n"
    "{imports}\n"
    "d=time.perf_counter()-t\n"
    "rss=[l for l in open('/proc/self/status') if l.startswith('VmRSS:')][0].split()[1]\n"
    "print(d, int(rss)/1024)\n"
)


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def read_line(fd: int, timeout: float) -> bytes:
    """One line from a pipe within ``timeout`` seconds."""
    buf = b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            raise TimeoutError("no readiness line")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise EOFError("mur run exited before its readiness line")
        buf += chunk
    return buf


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, then make sure the process group is gone."""
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wall(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for ``args`` to run to exit."""
    t0 = time.monotonic()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, args)
    return took, usage.ru_utime + usage.ru_stime


def probe(imports: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds, MB) of a fresh interpreter importing ``imports`` in order."""
    body = "\n".join(f"import {name}" for name in imports) or "pass"
    out = subprocess.run(
        [PY, "-c", RSS_PROBE.format(imports=body)], env=env, check=True, capture_output=True, text=True
    )
    secs, mb = out.stdout.split()
    return float(secs), float(mb)


def top_level_imports(importtime_stderr: str) -> list[str]:
    """The modules imported at the top level (no indent) in ``-X importtime`` output, in order."""
    names: list[str] = []
    for line in importtime_stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        name = line.rsplit("|", 1)[1]
        if name.startswith(" ") and not name.startswith("  "):
            stripped = name.strip()
            if " " not in stripped and stripped not in names:
                names.append(stripped)
    return names


def all_imports(importtime_stderr: str) -> set[str]:
    """Every module named in ``-X importtime`` output."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def one_run(capsule: Path, env: dict[str, str], *, importtime: bool) -> tuple[float, float, float, str]:
    """(seconds to readiness, CPU seconds to readiness, idle MB, importtime stderr) of one
    ``mur run --json``."""
    flags = ["-X", "importtime"] if importtime else []
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [PY, *flags, "-m", "murmur.cli.mur", "run", "--json"],
            cwd=capsule, env=env, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            json.loads(read_line(proc.stdout.fileno(), 60))
            ready = time.monotonic() - t0
            cpu = cpu_seconds(proc.pid)
            time.sleep(1.0)
            idle = rss_mb(proc.pid)
        finally:
            stop(proc)
        err.seek(0)
        return ready, cpu, idle, err.read().decode(errors="replace")


def cumulative_us(importtime_stderr: str, name: str) -> int | None:
    """The cumulative microseconds ``-X importtime`` gives the first import of ``name``."""
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            _, cum, mod = line[len("import time:"):].split("|")
            if mod.strip() == name:
                return int(cum)
    return None


def import_cost(name: str, env: dict[str, str]) -> int:
    """Cumulative microseconds of ``import name`` in a fresh interpreter (``-X importtime``)."""
    out = subprocess.run(
        [PY, "-X", "importtime", "-c", f"import {name}"], env=env, check=True, capture_output=True, text=True
    )
    us = cumulative_us(out.stderr, name)
    return us if us is not None else -1


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.0f} ms"


def bench_env(root: Path) -> dict[str, str]:
    """The environment every measured interpreter gets (see the module docstring)."""
    env = {**os.environ, "MURMUR_HOME": str(root / "home"), "PYTHONPYCACHEPREFIX": str(root / "pycache")}
    env.pop("MURMUR_MUR_BINARY", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def drop_murmur_bytecode(env: dict[str, str]) -> None:
    """Remove murmur's cached bytecode from the run's cache and write no more (``--murmur-from-source``)."""
    out = subprocess.run(
        [PY, "-c", "import murmur, os; print(os.path.dirname(murmur.__file__))"],
        env=env, check=True, capture_output=True, text=True,
    )
    package = Path(out.stdout.strip())
    shutil.rmtree(Path(env["PYTHONPYCACHEPREFIX"]) / package.relative_to(package.anchor), ignore_errors=True)
    env["PYTHONDONTWRITEBYTECODE"] = "1"


def main() -> None:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="tries per figure (median printed)")
    ap.add_argument("--murmur-from-source", action="store_true", help="compile murmur's own modules at each start")
    a = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        capsule = root / "bench-start"
        capsule.mkdir()
        (capsule / "murmur.yaml").write_text(MANIFEST)
        (capsule / "plan.yaml").write_text(PLAN)
        env = bench_env(root)

        floors = {
            "python -c pass": [PY, "-c", "pass"],
            "import trio": [PY, "-c", "import trio"],
            "import trio, hypercorn.trio": [PY, "-c", "import trio, hypercorn.trio"],
        }
        floor_wall: dict[str, list[float]] = {k: [] for k in floors}
        floor_cpu: dict[str, list[float]] = {k: [] for k in floors}
        floor_rss = {"python -c pass": [], "import trio": ["trio"], "import trio, hypercorn.trio": ["trio", "hypercorn.trio"]}
        floor_mb: dict[str, list[float]] = {k: [] for k in floors}
        ready: list[float] = []
        ready_cpu: list[float] = []
        idle: list[float] = []
        imp_s: list[float] = []
        imp_mb: list[float] = []
        for args in floors.values():  # warm the disk cache and the bytecode cache
            wall(args, env)
        one_run(capsule, env, importtime=False)
        if a.murmur_from_source:
            drop_murmur_bytecode(env)
        _, _, _, stderr = one_run(capsule, env, importtime=True)  # take the import list
        imports = top_level_imports(stderr)
        alone: dict[str, list[int]] = {n: [] for n in MEMBER_PACKAGES}
        in_run: dict[str, list[int]] = {n: [] for n in MEMBER_PACKAGES}
        for _ in range(a.repeat):
            _, _, _, timed = one_run(capsule, env, importtime=True)
            for n in MEMBER_PACKAGES:
                alone[n].append(import_cost(n, env))
                got = cumulative_us(timed, n)
                if got is not None:
                    in_run[n].append(got)
        for _ in range(a.repeat):
            for name, args in floors.items():
                w, c = wall(args, env)
                floor_wall[name].append(w)
                floor_cpu[name].append(c)
                floor_mb[name].append(probe(floor_rss[name], env)[1])
            r, c, i, _ = one_run(capsule, env, importtime=False)
            ready.append(r)
            ready_cpu.append(c)
            idle.append(i)
            s, mb = probe(imports, env)
            imp_s.append(s)
            imp_mb.append(mb)

    base = statistics.median(floor_wall["import trio, hypercorn.trio"])
    base_cpu = statistics.median(floor_cpu["import trio, hypercorn.trio"])
    heavy = sorted({n.split(".")[0] for n in all_imports(stderr) if n.split(".")[0] in HEAVY})
    print(f"mur run start-up, median of {a.repeat} (this machine, {os.cpu_count()} cores; "
          f"load average at the start {' '.join(f'{x:.2f}' for x in load0)}; "
          f"{'murmur compiled from source at each start' if a.murmur_from_source else 'compiled bytecode'})")
    print("                                             wall        cpu      RSS")
    for name in floors:
        print(f"  floor: {name:<30} {ms(floor_wall[name])} {ms(floor_cpu[name])}  {statistics.median(floor_mb[name]):6.1f} MB")
    print(f"  mur run --json start -> readiness     {ms(ready)} {ms(ready_cpu)}"
          f"  ({statistics.median(ready) / base:.2f}x trio+hypercorn wall, "
          f"{statistics.median(ready_cpu) / base_cpu:.2f}x cpu)")
    print(f"  mur run imports (fresh interpreter)   {ms(imp_s)}  {statistics.median(imp_mb):6.1f} MB")
    print(f"  mur run idle RSS (1 s after ready)              {statistics.median(idle):6.1f} MB")
    print(f"  heavy packages mur run imported: {', '.join(heavy) or '(none)'}")
    print("  import cost (-X importtime cumulative, median): alone in a fresh interpreter | inside mur run")
    for n in MEMBER_PACKAGES:
        inside = f"{statistics.median(in_run[n]) / 1000:6.0f} ms" if in_run[n] else "  not imported"
        print(f"    {n:<52} {statistics.median(alone[n]) / 1000:6.0f} ms | {inside}")
    print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
