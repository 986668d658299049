"""The upstream quickstart shape with a WASM driver, as a user runs it: `mur install` the driver
and a tool, `mur doctor`, `mur run --task`; the two-turn task completes (spec/components.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.wat import component

pytestmark = pytest.mark.e2e

CAPSULE = """name: quickstart
version: 0.1.0
artifacts:
  - {name: scripted-driver, version: 0.1.0, runtime: driver}
  - {name: echo, version: 0.1.0}
inference:
  transport: http
  endpoint: http://127.0.0.1:9
  model: scripted
  driver: {artifact: scripted-driver}
"""


def _mur(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    env["MURMUR_HOME"] = str(home)
    mur = str(Path(sys.executable).parent / "mur")
    return subprocess.run([mur, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_quickstart_with_a_wasm_driver(tmp_path: Path, murmur_home: Path) -> None:
    """Install, doctor and run: the WASM driver calls the WASM tool, then answers."""
    for name, manifest, files in (
        ("drv", "name: scripted-driver\nversion: 0.1.0\nruntime: driver\nrequires_files: [driver.wasm]\n",
         {"driver.wasm": component("driver")}),
        ("echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
         {"echo.wasm": component("echo")}),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "murmur.yaml").write_text(manifest)
        for rel, data in files.items():
            (tmp_path / name / rel).write_bytes(data)
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "murmur.yaml").write_text(CAPSULE)
    for src in ("drv", "echo"):
        r = _mur(["install", str(tmp_path / src)], cap, murmur_home)
        assert r.returncode == 0, r.stderr
    doctor = _mur(["doctor", "--json"], cap, murmur_home)
    assert doctor.returncode == 0 and json.loads(doctor.stdout)["ok"], doctor.stdout
    components = json.loads(doctor.stdout)["capsule"]["components"]
    assert [(c["name"], c["exports"]) for c in components] == [
        ("scripted-driver", ["murmur:tool/run@0.1.0"]), ("echo", ["murmur:tool/run@0.1.0"])]
    run = _mur(["run", "--task", "use the echo tool"], cap, murmur_home)
    assert (run.returncode, run.stdout.strip()) == (0, "the tool answered"), run.stderr
    trace = next(murmur_home.glob("records/**/trace.jsonl"))
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e.get("tool_name") for e in events if e["event_type"] == "tool_call"] == ["echo"]
