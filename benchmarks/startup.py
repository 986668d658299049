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

Usage: ``.venv/bin/python benchmarks/startup.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
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


def wall(args: list[str]) -> float:
    """Seconds for ``args`` to run to exit."""
    t0 = time.monotonic()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def probe(imports: list[str]) -> tuple[float, float]:
    """(seconds, MB) of a fresh interpreter importing ``imports`` in order."""
    body = "\n".join(f"import {name}" for name in imports) or "pass"
    out = subprocess.run([PY, "-c", RSS_PROBE.format(imports=body)], check=True, capture_output=True, text=True)
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


def one_run(capsule: Path, env: dict[str, str], *, importtime: bool) -> tuple[float, float, str]:
    """(seconds to readiness, idle MB, importtime stderr) of one ``mur run --json``."""
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
            time.sleep(1.0)
            idle = rss_mb(proc.pid)
        finally:
            stop(proc)
        err.seek(0)
        return ready, idle, err.read().decode(errors="replace")


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.0f} ms"


def main() -> None:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="tries per figure (median printed)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        capsule = root / "bench-start"
        capsule.mkdir()
        (capsule / "murmur.yaml").write_text(MANIFEST)
        (capsule / "plan.yaml").write_text(PLAN)
        env = {**os.environ, "MURMUR_HOME": str(root / "home")}
        env.pop("MURMUR_MUR_BINARY", None)

        floors = {
            "python -c pass": [PY, "-c", "pass"],
            "import trio": [PY, "-c", "import trio"],
            "import trio, hypercorn.trio": [PY, "-c", "import trio, hypercorn.trio"],
        }
        floor_wall: dict[str, list[float]] = {k: [] for k in floors}
        floor_rss = {"python -c pass": [], "import trio": ["trio"], "import trio, hypercorn.trio": ["trio", "hypercorn.trio"]}
        floor_mb: dict[str, list[float]] = {k: [] for k in floors}
        ready: list[float] = []
        idle: list[float] = []
        imp_s: list[float] = []
        imp_mb: list[float] = []
        _, _, stderr = one_run(capsule, env, importtime=True)  # warm the disk cache; take the import list
        imports = top_level_imports(stderr)
        for _ in range(a.repeat):
            for name, args in floors.items():
                floor_wall[name].append(wall(args))
                floor_mb[name].append(probe(floor_rss[name])[1])
            r, i, _ = one_run(capsule, env, importtime=False)
            ready.append(r)
            idle.append(i)
            s, mb = probe(imports)
            imp_s.append(s)
            imp_mb.append(mb)

    base = statistics.median(floor_wall["import trio, hypercorn.trio"])
    heavy = sorted({n.split(".")[0] for n in all_imports(stderr) if n.split(".")[0] in HEAVY})
    print(f"mur run start-up, median of {a.repeat} (this machine, {os.cpu_count()} cores)")
    for name in floors:
        print(f"  floor: {name:<30} {ms(floor_wall[name])}  {statistics.median(floor_mb[name]):6.1f} MB")
    print(f"  mur run --json start -> readiness     {ms(ready)}  ({statistics.median(ready) / base:.2f}x trio+hypercorn)")
    print(f"  mur run imports (fresh interpreter)   {ms(imp_s)}  {statistics.median(imp_mb):6.1f} MB")
    print(f"  mur run idle RSS (1 s after ready)              {statistics.median(idle):6.1f} MB")
    print(f"  heavy packages mur run imported: {', '.join(heavy) or '(none)'}")


if __name__ == "__main__":
    main()
