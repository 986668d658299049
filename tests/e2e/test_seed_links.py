"""Seed 002 to the letter, end to end (issue 30): an empty spawn set keeps the socket and the
links, every refusal is counted and traced, and a link with a terminal attached is refused.

A real mur-roost, a real `mur run`; the parent's one plan step is `sh -c TASK; echo rc=$?`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from murmur.registry import install

from ._delegation import MUR, Procs, of, plan_capsule, send_task, submit_task, trace, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SHELL_PLAN = ('steps:\n  - id: s\n    shell: [sh, -c, "{{ task }}\\necho rc=$?"]\n'
              'output: "{{ steps.s.stdout }}"\n')
# A link run with a pseudo-terminal as its stdout (the pty module's openpty), stdin closed.
ON_A_PTY = ("python3 -c 'import os, subprocess; m, s = os.openpty(); "
            "r = subprocess.run([\"kid\", \"x\"], stdin=subprocess.DEVNULL, stdout=s, stderr=subprocess.PIPE); "
            "print(r.returncode, r.stderr.decode())'")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("seed-links-home")
    src = tmp_path_factory.mktemp("seed-links-src")
    dirs = [
        plan_capsule(src, "kid", shell=["echo"], plan='steps:\n  - id: s\n    shell: [echo, "kid {{ task }}"]\n'
                                                      'output: "{{ steps.s.stdout }}"\n'),
        plan_capsule(src, "napper", shell=["sleep"], plan='steps:\n  - id: s\n    shell: [sleep, "{{ task }}"]\n'
                                                          'output: "slept"\n'),
        plan_capsule(src, "mid", shell=["sh", "echo", "sleep"], spawn=["kid", "napper"], plan=SHELL_PLAN),
        plan_capsule(src, "boss", shell=["sh", "echo", "sleep"], spawn=["kid", "napper", "projkid", "mid"],
                     plan=SHELL_PLAN),
    ]
    projkid = plan_capsule(src, "projkid", shell=["echo"], plan='steps:\n  - id: s\n    shell: [echo, p]\n'
                                                                'output: "p"\n')
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        for d in dirs:
            install(d, global_=True)
        install(projkid, global_=False, project_dir=home / "project")  # the project store only
    yield home


@pytest.fixture
def procs(tmp_path: Path, home: Path) -> Iterator[Procs]:
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    # the suite's own interpreter first on PATH: a venv's (or a real) python3 runs under scoped
    # and sealed, a version manager's shim does not (it execs its manager's own scripts)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
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


def test_no_spawn_keeps_the_links_and_every_refusal_is_counted_and_traced(procs: Procs, tmp_path: Path,
                                                                          home: Path) -> None:
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url, "--no-spawn")
    ready, door = b.ready, b.ready["url"]
    records = Path(ready["records_dir"])
    out = answer(door, "kid hello 2>&1")
    assert out.rstrip().endswith("rc=126") and "not in this session's spawn set" in out, out
    out = answer(door, "command -v mur; command -v kid")
    assert out.splitlines()[:2] == [str(records / "links" / "bin" / "mur"), str(records / "links" / "bin" / "kid")], out
    inside = json.loads(answer(door, "mur ps --tree --json").splitlines()[0])
    assert [r["id"] for r in inside["roots"]] == [ready["session_id"]], inside  # the session's own mur
    assert inside["roots"][0]["refused"] == 1, inside
    refused = [r for r in of(trace(records), "delegation") if r.get("outcome") == "refused"]
    assert len(refused) == 1 and "spawn set" in refused[0]["reason"], refused
    # `mur ps --tree --json` from outside sees the same count, and session_end records it
    b.kill(15)
    wait_until(lambda: of(trace(records), "session_end") or None, timeout=30, what="session_end")
    end = of(trace(records), "session_end")[0]
    assert end["delegations"]["refused"] == 1, end


def test_a_link_with_a_terminal_attached_is_refused_with_the_seed_sentence(procs: Procs, tmp_path: Path) -> None:
    if os.environ.get("MURMUR_SANDBOX_CLASS") in ("scoped", "sealed"):
        pytest.skip("under scoped and sealed a command cannot open a terminal (/dev/ptmx is outside the fixed "
                    "device set, spec/containment.md), so no link can have one attached")
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url)
    out = answer(b.ready["url"], ON_A_PTY)
    assert out.startswith("125 "), out
    assert "interactive delegated children are not supported yet: kid has a terminal on stdin or stdout" in out, out
    assert "`\\kid ... </dev/null | cat`" in out, out
    # negative control: the same call with neither attached reaches the child
    out = answer(b.ready["url"], "kid x </dev/null | cat")
    assert "kid x" in out and out.rstrip().endswith("rc=0"), out
    refused = [r for r in of(trace(b.ready["records_dir"]), "delegation") if r.get("outcome") == "refused"]
    assert len(refused) == 1 and "terminal" in refused[0]["reason"], refused


def test_who_reads_the_allow_list_from_a_running_roost_and_writes_an_accepted_line(procs: Procs,
                                                                                 tmp_path: Path) -> None:
    _roost, url = procs.roost("--spawn-allow", "boss")
    env = {**procs.env, "MURMUR_ROOST_URL": url}
    r = subprocess.run([*MUR, "agent", "who", "--can", "echo", "--as", "boss", "--json"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    doc = json.loads(r.stdout)
    blocked = {b["target"]: b for b in doc["routes"]["blocked"]}
    assert blocked["kid"]["reason"] == "mur-roost's --spawn-allow does not list 'kid'", doc["routes"]
    line = blocked["kid"]["authorize"]
    assert line == "restart mur-roost with `--spawn-allow boss --spawn-allow kid`", line
    # the line's form is one mur-roost accepts: started with it, it allows both
    flags = line.split("`")[1].split()
    _again, url2 = procs.roost(*flags)
    r = subprocess.run([*MUR, "agent", "who", "--can", "echo", "--as", "boss", "--json"],
                       env={**procs.env, "MURMUR_ROOST_URL": url2}, capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert "kid" in {x["target"] for x in json.loads(r.stdout)["routes"]["ready"]}, r.stdout


def _mur(procs: Procs, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MUR, *args], env=procs.env, capture_output=True, text=True, timeout=90)


def test_mur_stop_names_a_delegation_and_an_ended_node_refuses_in_json(procs: Procs, tmp_path: Path) -> None:
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url)
    submit_task(b.ready["url"], "napper 60")

    def child() -> dict[str, Any] | None:
        doc = json.loads(_mur(procs, "ps", "--tree", "--json").stdout)
        for root in doc["roots"]:
            if root["id"] == b.ready["session_id"]:
                kids = [c for c in root["children"] if c["state"] == "running"]
                return kids[0] if kids else None
        return None

    try:
        kid = wait_until(child, timeout=30, what="the napper child running")
    except AssertionError:
        raise AssertionError(_mur(procs, "ps", "--tree", "--json").stdout + b.stderr) from None
    dlg = kid["lineage"]["delegation_id"]
    r = _mur(procs, "stop", dlg, "--json", "--timeout", "10")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["stopped"] == kid["id"] and done["sessions"] == [kid["id"]], done
    r = _mur(procs, "stop", dlg, "--json")
    assert r.returncode != 0
    refusal = json.loads(r.stdout)
    assert refusal["ok"] is False and refusal["diagnostics"][0]["code"] == "E-RUN-022", r.stdout


def _routes(procs: Procs, home: Path, binary: str) -> dict[str, Any]:
    r = _mur(procs, "agent", "who", "--can", binary, "--as", "boss", "--project", str(home / "project"), "--json")
    doc = json.loads(r.stdout)
    routes: dict[str, Any] = doc["routes"]
    return routes


def test_a_ready_route_is_one_a_child_would_resolve_under_the_effective_spawn_set(procs: Procs, tmp_path: Path,
                                                                                   home: Path) -> None:
    routes = _routes(procs, home, "echo")
    blocked = {b["target"]: b for b in routes["blocked"]}
    assert "projkid" not in {r["target"] for r in routes["ready"]}, routes
    assert "not in the global store, where a delegated child resolves from" in blocked["projkid"]["reason"], routes
    assert "kid" in {r["target"] for r in routes["ready"]}, routes  # negative control: in the global store
    # the asker's effective spawn set: a running boss narrowed to `kid` cannot reach napper
    assert "napper" in {r["target"] for r in _routes(procs, home, "sleep")["ready"]}
    _roost, url = procs.roost("--spawn-allow", "boss")
    procs.mur_run("boss", tmp_path / "work", url, "--spawn", "kid")
    routes = _routes(procs, home, "sleep")
    blocked = {b["target"]: b for b in routes["blocked"]}
    assert "napper" in blocked and "narrowed out of boss's effective spawn set" in blocked["napper"]["reason"], routes


def test_a_sigkilled_child_shows_crashed_in_the_tree(procs: Procs, tmp_path: Path) -> None:
    import signal

    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url)
    submit_task(b.ready["url"], "napper 60")

    def kids() -> list[dict[str, Any]]:
        doc = json.loads(_mur(procs, "ps", "--tree", "--json").stdout)
        return next(r["children"] for r in doc["roots"] if r["id"] == b.ready["session_id"])

    kid = wait_until(lambda: next((k for k in kids() if k["state"] == "running" and k.get("pid")), None),
                     timeout=60, what="the napper child running")
    os.kill(int(kid["pid"]), signal.SIGKILL)
    # until its parent's launcher journals the end, the gone process is `uncertain`; then `crashed`
    ended = wait_until(lambda: next((k for k in kids() if k["id"] == kid["id"] and k["state"] == "ended"), None),
                       timeout=90, what="the killed child recorded as ended")
    assert ended["status"] == "crashed", ended


def test_mur_agent_who_inside_a_session_answers_its_own_ready_routes(procs: Procs, tmp_path: Path) -> None:
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url, "--spawn", "kid,projkid")
    out = answer(b.ready["url"], "mur agent who --can echo --json")
    assert out.rstrip().endswith("rc=0"), out
    doc = json.loads(out.splitlines()[0])
    assert doc["routes"]["as"] == "boss" and doc["routes"]["blocked"] == [], doc["routes"]  # never a blocked route
    assert [r["target"] for r in doc["routes"]["ready"]] == ["kid"], doc["routes"]  # projkid: not global
    text = answer(b.ready["url"], "mur agent who --can sleep")
    assert "Dispatch routes for 'boss'" in text and "napper" not in text.split("ready:")[1], text  # narrowed out
    assert "blocked" not in text, text


def test_roost_killed_mid_tree_and_restarted_leaves_uncertain_and_no_replay(procs: Procs, tmp_path: Path) -> None:
    import signal

    from ._delegation import free_port

    port = free_port()
    roost, url = procs.roost("--spawn-allow", "boss", port=port)
    b = procs.mur_run("boss", tmp_path / "work", url)
    out = answer(b.ready["url"], "kid before")
    assert "kid before" in out and out.rstrip().endswith("rc=0"), out
    roost.kill(signal.SIGKILL)
    _again, url2 = procs.roost("--spawn-allow", "boss", port=port)
    assert url2 == url
    out = answer(b.ready["url"], "kid after 2>&1; kid again 2>&1")
    # the first call meets mur-roost's identity refusal (how the runtime notices); from then on
    # the runtime refuses before asking, with the restart sentence
    first, second = out.split("kid: refused:")[1:3]
    assert "not authorised" in first and "mur-roost restarted while this session ran, so it delegates nothing more" in second, out
    doc = json.loads(_mur(procs, "ps", "--tree", "--json").stdout)
    node = next(r for r in doc["roots"] if r["id"] == b.ready["session_id"])
    assert node["state"] == "uncertain" and "mur-roost restarted" in node["reason"], node
    sessions = [c for c in node["children"] if c["node"] == "session"]
    assert len(sessions) == 1 and sessions[0]["state"] == "ended", node  # nothing replayed
    refused = [c for c in node["children"] if c["node"] == "delegation"]  # never started: shown with why
    assert [c["status"] for c in refused] == ["refused", "refused"], node
    assert "mur-roost restarted while this session ran" in refused[1]["reason"], refused
    assert (node["started"], node["refused"]) == (1, 2), node


def test_a_child_cannot_widen_its_spawn_set_through_real_links(procs: Procs, tmp_path: Path) -> None:
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url, "--spawn", "mid,kid")
    inner = 'kid k 2>&1; echo inner=$?; MURMUR_SPAWN=napper napper 1 2>&1; echo inner=$?'
    out = answer(b.ready["url"], f"mid '{inner}' 2>&1")
    assert "kid k" in out and "inner=0" in out, out  # the child reaches what its parent's set holds
    assert "inner=126" in out and "'napper' is not in this session's spawn set" in out, out  # never more


def test_fan_out_self_replication_is_stopped_by_the_concurrency_bound(procs: Procs, tmp_path: Path) -> None:
    _roost, url = procs.roost("--spawn-allow", "boss", "--max-concurrent", "2")
    b = procs.mur_run("boss", tmp_path / "work", url)
    out = answer(b.ready["url"], "pids=; for i in 1 2 3 4 5; do napper 2 >/dev/null 2>&1 & pids=\"$pids $!\"; done; "
                                 "ok=0; bad=0; for j in $pids; do if wait $j; then ok=$((ok+1)); "
                                 "else bad=$((bad+1)); fi; done; echo ok=$ok bad=$bad")
    line = next(x for x in out.splitlines() if x.startswith("ok="))
    ok, bad = (int(w.split("=")[1]) for w in line.split())
    assert ok <= 2 and ok + bad == 5 and bad >= 3, out
    doc = json.loads(_mur(procs, "ps", "--tree", "--json").stdout)
    node = next(r for r in doc["roots"] if r["id"] == b.ready["session_id"])
    assert node["refused"] >= 3 and node["started"] <= 2, node
