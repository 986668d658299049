"""A formation's warm starter killed mid-run: the launcher reports its entry's real status.

Specification: ``spec/formation.md`` "The warm start path". Members are forked by the warm
starter; when it dies first, the launcher (a child subreaper) is their parent and reads
their status itself, so an entry that answered ok still exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ._census import Formation
from ._formation import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MANIFEST = """name: {name}
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: {acceptance}
  after_task: {after}
capabilities:
  shell:
    allow: [sh, echo]
"""
# the entry's one step waits for a file the test writes once the starter is dead
WAITING_PLAN = """steps:
  - id: answer
    shell: [sh, -c, 'while [ ! -e go ]; do sleep 0.02; done; echo "done: $0"', "{{ task }}"]
output: "{{ steps.answer.stdout }}"
"""
PLAN = """steps:
  - id: answer
    shell: [echo, "done: {{ task }}"]
output: "{{ steps.answer.stdout }}"
"""


def _mur(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "murmur.cli.mur", *args], cwd=cwd, check=True, capture_output=True)


def _project(root: Path) -> Path:
    proj = root / "proj"
    proj.mkdir()
    lines = ["roster_version: 1", "members:"]
    for name, entry in (("lead", True), ("helper", False)):
        src = root / "src" / name
        src.mkdir(parents=True)
        (src / "murmur.yaml").write_text(MANIFEST.format(
            name=f"k-{name}", acceptance="single" if entry else "queue", after="exit" if entry else "sleep"))
        (src / "plan.yaml").write_text(WAITING_PLAN if entry else PLAN)
        _mur("build", str(src), cwd=root)
        _mur("install", str(src / f"k-{name}-0.1.0.mur.zip"), cwd=proj)
        lines += [f"  - name: {name}", f"    capsule: local/k-{name}", "    version: 0.1.0"]
        if entry:
            lines.append("    entry: true")
    (proj / "roster.yaml").write_text("\n".join(lines) + "\n")
    return proj


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


@pytest.mark.parametrize("klass", ["cgroup", "groups"])
def test_a_killed_starter_leaves_the_entry_status_true(tmp_path: Path, klass: str) -> None:
    """kill -KILL of the warm starter while the entry works; the entry then answers ok and
    exits 0: the launcher exits 0 (not 137, the status it used to guess)."""
    from murmur.containment import host

    if klass == "cgroup" and host.detect().name != "cgroup":
        pytest.skip("no delegated cgroup v2 here")
    proj = _project(tmp_path)
    env = dict(os.environ, MURMUR_STARTER="on", MURMUR_CONTAINMENT="auto" if klass == "cgroup" else klass)
    out, err = tmp_path / "launcher.out", tmp_path / "launcher.err"
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(
            [sys.executable, "-m", "murmur.cli.mur", "run", "--roster", str(proj), "--json", "--task", "hi"],
            stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, cwd=tmp_path, env=env, start_new_session=True)
    found: Formation | None = None
    try:
        wait_for(lambda: len(out.read_text().splitlines()) >= 2 or proc.poll() is not None, 60)
        lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        assert len(lines) >= 2, err.read_text()
        found = Formation(proc.pid, str(lines[0]["formation_id"]))
        found.record()
        entry = int(lines[1]["pid"])
        starter = _parent(entry)
        assert starter != proc.pid and _parent(starter) == proc.pid  # forked by the starter
        os.kill(starter, signal.SIGKILL)
        wait_for(lambda: _parent(entry) != starter, 30)
        assert _parent(entry) == proc.pid  # the launcher adopted it
        (proj / "go").write_text("")
        assert proc.wait(60) == 0, err.read_text()
        assert found.left() == []
    finally:
        for pid in [proc.pid, *(found.to_kill() if found is not None else [])]:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        proc.wait(10)
