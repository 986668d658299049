"""Capsule links end to end: a real mur-roost, real `mur run`, real shells (issue 13, Proof).

The parent capsule's one plan step is `sh -c TASK; echo rc=$?`, so each test's task text is
the shell script a capsule command would run, and the step's output shows the link's answer
and its exit status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from murmur.registry import install

from ._delegation import MUR, Procs, plan_capsule, send_task, submit_task, trace, wait_until

pytestmark = pytest.mark.e2e

SHELL_PLAN = ('steps:\n  - id: s\n    shell: [sh, -c, "{{ task }}\\necho rc=$?"]\n'
              'output: "{{ steps.s.stdout }}"\n')


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("links-home")
    src = tmp_path_factory.mktemp("links-src")
    dirs = [
        plan_capsule(src, "kid", shell=["echo"], plan='steps:\n  - id: s\n    shell: [echo, "kid {{ task }}"]\n'
                                                      'output: "{{ steps.s.stdout }}"\n'),
        plan_capsule(src, "napper", shell=["sleep"], plan='steps:\n  - id: s\n    shell: [sleep, "{{ task }}"]\n'
                                                          'output: "slept"\n'),
        plan_capsule(src, "greedy", shell=["grep"], plan='steps:\n  - id: s\n    shell: [grep, -c, x, /dev/null]\n'
                                                         'output: "g"\n'),
        plan_capsule(src, "boss", shell=["sh", "echo", "sleep"], spawn=["kid", "napper", "greedy"], plan=SHELL_PLAN),
    ]
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        for d in dirs:
            install(d, global_=True)
    yield home


@pytest.fixture
def procs(tmp_path: Path, home: Path) -> Iterator[Procs]:
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE", "MURMUR_SPAWN"):
        env.pop(name, None)
    p = Procs(tmp_path, env)
    try:
        yield p
    finally:
        p.close()


def answer(url: str, script: str) -> str:
    task = send_task(url, script)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []))


def boss(procs: Procs, tmp_path: Path, *roost_flags: str, extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    _roost, url = procs.roost("--spawn-allow", "boss", *roost_flags)
    b = procs.mur_run("boss", tmp_path / "work", url, *extra)
    return b.ready, b.ready["url"]


def test_shell_python_and_cleared_env_reach_the_child(procs: Procs, tmp_path: Path) -> None:
    ready, url = boss(procs, tmp_path)
    out = answer(url, "kid hello 2>&1")
    assert "kid hello" in out and "kid: ok" in out and out.rstrip().endswith("rc=0"), out
    out = answer(url, "python3 -c 'import subprocess, sys; sys.exit(subprocess.run([\"kid\", \"py\"]).returncode)'")
    assert "kid py" in out and out.rstrip().endswith("rc=0"), out
    out = answer(url, 'env -i "$(command -v kid)" bare')
    assert "kid bare" in out and out.rstrip().endswith("rc=0"), out
    out = answer(url, "echo from-stdin | kid --json")
    record = json.loads(out.splitlines()[0])
    assert record["status"] == "ok" and record["capsule_name"] == "kid", out
    records = Path(ready["records_dir"])
    links = records / "links"
    assert (links.stat().st_mode & 0o777) == 0o700 and ((links / "bin").stat().st_mode & 0o777) == 0o700
    assert sorted(os.listdir(links / "bin")) == ["greedy", "kid", "mur", "napper"]
    for stub in (links / "bin").iterdir():
        assert b"ms" + b"c1." not in stub.read_bytes() and b"ms" + b"a1." not in stub.read_bytes()
    asked = [r for r in trace(records) if r.get("event_type") == "link_request"]
    assert [r["outcome"] for r in asked] == ["ok"] * 4 and all(r["capsule"] == "kid" for r in asked)
    assert any("kid hello" in " ".join(r["caller"]) for r in asked), asked


def test_narrowed_name_is_126_and_referee_refusal_is_125(procs: Procs, tmp_path: Path) -> None:
    _ready, url = boss(procs, tmp_path, extra=("--spawn", "kid,greedy"))
    out = answer(url, "napper 1 2>&1")
    assert out.rstrip().endswith("rc=126") and "spawn set" in out, out
    out = answer(url, "greedy x 2>&1")
    assert out.rstrip().endswith("rc=125") and "greedy: refused" in out and "never hold more capability" in out, out


def test_a_process_outside_the_session_is_refused(procs: Procs, tmp_path: Path) -> None:
    ready, _url = boss(procs, tmp_path)
    records = Path(ready["records_dir"])
    stub = records / "links" / "bin" / "kid"
    done = subprocess.run([str(stub), "x"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 126, done
    assert done.stderr.startswith("murmur: link refused: process ") and "not inside session" in done.stderr
    refused = [r for r in trace(records) if r.get("event_type") == "link_request"]
    assert [r["outcome"] for r in refused] == ["caller_refused"]


def test_interrupted_link_is_130_and_ends_the_child(procs: Procs, tmp_path: Path) -> None:
    ready, url = boss(procs, tmp_path)
    pidfile = tmp_path / "link.pid"
    submit_task(url, f"napper 120 & echo $! > {pidfile}; wait $!")
    env = procs.env

    def child() -> dict[str, Any] | None:
        done = subprocess.run([*MUR, "ps", "--tree", "--json"], env=env, capture_output=True, text=True, timeout=60)
        roots = [r for r in json.loads(done.stdout)["roots"] if r["id"] == ready["session_id"]]
        kids = roots[0]["children"] if roots else []
        return kids[0] if kids and kids[0]["state"] == "running" and kids[0].get("pid") else None

    kid = wait_until(child, timeout=90, what="the napper child running")
    link_pid = int(wait_until(lambda: pidfile.read_text().strip() if pidfile.exists() else None,
                              timeout=10, what="the link's pid"))
    began = time.monotonic()
    os.kill(link_pid, signal.SIGINT)
    wait_until(lambda: not Path(f"/proc/{kid['pid']}").exists() or "Z" in Path(f"/proc/{kid['pid']}/stat").read_text().split(") ")[1][:1],
               timeout=15, what="the child gone")
    print(f"\nlink interrupted → child gone in {time.monotonic() - began:.2f}s")
    records = Path(ready["records_dir"])
    done = wait_until(lambda: [r for r in trace(records) if r.get("event_type") == "link_request"], timeout=15,
                      what="the link_request record")
    assert done[0]["outcome"] == "interrupted" and done[0]["exit"] == 130
