"""The process tree end to end: a real mur-roost, a real chain A → B → C → D (issue 12, Proof).

Lineage in `mur ps --tree --json` while the chain runs, `mur stop A` ending every level in one
grace (measured and printed), `ended canceled` for each, and `--spawn` / `MURMUR_SPAWN`
narrowing a real delegation with the refused counter.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from murmur.registry import install

from ._delegation import (
    MUR,
    Procs,
    capsule_steps,
    pids_naming,
    plan_capsule,
    send_task,
    status_text,
    submit_task,
    wait_until,
)

pytestmark = pytest.mark.e2e

CHAIN = ('steps:\n  - id: down\n    capsule: chain\n    version: 0.1.0\n    task: "{{ task }}"\n'
         '    on_error: continue\n  - id: nap\n    shell: [sleep, "{{ task }}"]\n'
         'output: "{{ steps.nap.stdout }}"\n')


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A MURMUR_HOME with the self-naming chain capsule and a narrowing pair, installed once."""
    home = tmp_path_factory.mktemp("tree-home")
    src = tmp_path_factory.mktemp("tree-src")
    dirs = [
        plan_capsule(src, "chain", plan=CHAIN, shell=["sleep"], spawn=["chain"]),
        plan_capsule(src, "leaf", shell=["echo"], plan='steps:\n  - id: s\n    shell: [echo, "leaf {{ task }}"]\n'
                                                        'output: "{{ steps.s.stdout }}"\n'),
        plan_capsule(src, "twig", shell=["echo"], plan='steps:\n  - id: s\n    shell: [echo, "twig"]\noutput: "t"\n'),
        plan_capsule(src, "fork", shell=["echo"], spawn=["leaf", "twig"],
                     plan=capsule_steps(("l", "leaf", "{{ task }}"), ("t", "twig", "x"), on_error="continue",
                                        output="{{ steps.l.status }} {{ steps.t.status }}")),
    ]
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        for d in dirs:
            install(d, global_=True)
    yield home


@pytest.fixture
def procs(tmp_path: Path, home: Path) -> Iterator[Procs]:
    """Processes of one test, all killed at teardown."""
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE", "MURMUR_SPAWN"):
        env.pop(name, None)
    p = Procs(tmp_path, env)
    try:
        yield p
    finally:
        p.close()


def mur(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MUR, *args], env=env, capture_output=True, text=True, timeout=timeout)


def tree(env: dict[str, str]) -> dict[str, Any]:
    done = mur(env, "ps", "--tree", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def chain_of(doc: dict[str, Any], root_id: str) -> list[dict[str, Any]]:
    (root,) = [r for r in doc["roots"] if r["id"] == root_id]
    out = [root]
    while any(c["node"] == "session" for c in out[-1]["children"]):  # a never-started delegation is no level
        out.append(next(c for c in out[-1]["children"] if c["node"] == "session"))
    return out


def test_stop_ends_a_four_level_chain_in_one_grace(procs: Procs, tmp_path: Path) -> None:
    """mur stop A: every level winds down at once, all gone well inside 25 s, each `ended canceled`."""
    _roost, url = procs.roost("--spawn-allow", "chain", "--max-depth", "3")
    env = procs.env
    a = procs.mur_run("chain", tmp_path / "work", url)
    sid = a.ready["session_id"]
    assert a.ready["lineage"] == {"parent": None, "root": sid, "depth": 1, "spawn": ["chain"]}
    submit_task(a.ready["url"], "120")
    wait_until(lambda: len(chain_of(tree(env), sid)) == 4 and all(
        n["state"] == "running" for n in chain_of(tree(env), sid)), timeout=90, what="four running levels")
    levels = chain_of(tree(env), sid)
    assert [n["lineage"]["depth"] for n in levels] == [1, 2, 3, 4]
    assert all(n["lineage"]["root"] == sid for n in levels)
    assert [n["lineage"]["parent"] for n in levels[1:]] == [f"session:{n['id']}" for n in levels[:-1]]
    assert levels[-1]["refused"] == 1  # the fourth level's spawn was refused by the depth bound
    pids = [n["pid"] for n in levels]
    began = time.monotonic()
    done = mur(env, "stop", sid, "--json")
    elapsed = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sorted(report["sessions"]) == sorted(n["id"] for n in levels) and report["left"] == []
    print(f"\nmur stop of a 4-level chain: {elapsed:.2f}s (bound 25 s; per-level cascade without it: up to 80 s)")
    assert elapsed < 25 + 5
    assert not [p for p in pids if Path(f"/proc/{p}").exists() and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()]
    after = chain_of(tree(env), sid)
    assert [(n["state"], n["status"]) for n in after] == [("ended", "canceled")] * 4
    assert not pids_naming(str(tmp_path / "work" / ".murmur"))


@pytest.mark.parametrize("how", ["flag", "env", "none"])
def test_narrowed_spawn_set_refuses_before_roost(procs: Procs, tmp_path: Path, how: str) -> None:
    """--spawn leaf / MURMUR_SPAWN=leaf refuse twig in the runtime; --no-spawn refuses both; counted."""
    _roost, url = procs.roost("--spawn-allow", "fork")
    env = dict(procs.env)
    extra: tuple[str, ...] = ()
    if how == "flag":
        extra = ("--spawn", "leaf")
    elif how == "env":
        env["MURMUR_SPAWN"] = "leaf"
    else:
        extra = ("--no-spawn",)
    p = procs.mur_run("fork", tmp_path / "work", url, *extra, env=env)
    want = [] if how == "none" else ["leaf"]
    assert p.ready["lineage"]["spawn"] == want
    task = send_task(p.ready["url"], "go")
    assert status_text(task) == ("failed failed" if how == "none" else "ok failed")
    records = [json.loads(line) for line in Path(p.ready["records_dir"], "trace.jsonl").read_text().splitlines()]
    refused = [r for r in records if r.get("event_type") == "delegation" and r.get("outcome") == "refused"]
    assert any(r["reason"] == "spawn refused: 'twig' is not in this session's spawn set "
               "(narrowed by --spawn / MURMUR_SPAWN)" for r in refused)
    wait_until(lambda: any(r["id"] == p.ready["session_id"] and r["refused"] == (2 if how == "none" else 1)
                           for r in tree(env)["roots"]), timeout=30, what="the refused counter")
