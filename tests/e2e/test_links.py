"""Capsule links end to end: a real mur-roost, real `mur run`, real shells (issue 13, Proof).

The parent capsule's one plan step is `sh -c TASK; echo rc=$?`, so each test's task text is
the shell script a capsule command would run, and the step's output shows the link's answer
and its exit status.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
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
    descendants,
    pids_naming,
    plan_capsule,
    roost_status,
    send_task,
    submit_task,
    token_hits,
    trace,
    wait_until,
)

pytestmark = pytest.mark.e2e

SHELL_PLAN = ('steps:\n  - id: s\n    shell: [sh, -c, "{{ task }}\\necho rc=$?"]\n'
              'output: "{{ steps.s.stdout }}"\n')
# A child that waits (bounded, 60 s) until the file its task names exists: live children the
# test releases when it has seen them.
GATED_PLAN = ("steps:\n  - id: s\n    shell: [sh, -c, 'i=0; while [ ! -e \"$0\" ] && [ $i -lt 1200 ]; "
              "do sleep 0.05; i=$((i+1)); done; echo opened', \"{{ task }}\"]\n"
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
        plan_capsule(src, "gated", shell=["sh", "sleep"], plan=GATED_PLAN),
        plan_capsule(src, "boss", shell=["sh", "echo", "sleep", "python3", "setsid", "cat", "env"],  # not grep: greedy must hold more
                     spawn=["kid", "napper", "greedy", "gated"],
                     plan=SHELL_PLAN),
    ]
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        for d in dirs:
            install(d, global_=True)
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
    assert sorted(os.listdir(links / "bin")) == ["gated", "greedy", "kid", "mur", "napper"]
    for stub in (links / "bin").iterdir():
        assert b"ms" + b"c1." not in stub.read_bytes() and b"ms" + b"a1." not in stub.read_bytes()
    inside = json.loads(answer(url, "mur ps --tree --json").splitlines()[0])
    assert [r["id"] for r in inside["roots"]] == [ready["session_id"]]  # this session's subtree only
    assert len(inside["roots"][0]["children"]) == 4 and all(
        c["lineage"]["via"] == "link" for c in inside["roots"][0]["children"]), inside
    context = answer(url, "mur context")
    assert "capsule `boss`" in context and "  kid" in context and "  gated" in context, context
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
    pidfile = tmp_path / "work" / "link.pid"  # in the workdir: the one place a command may write
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


# -- helpers -------------------------------------------------------------------------------------


def tree_children(env: dict[str, str], session_id: str) -> list[dict[str, Any]]:
    """The children of ``session_id`` in `mur ps --tree --json`."""
    done = subprocess.run([*MUR, "ps", "--tree", "--json"], env=env, capture_output=True, text=True, timeout=60)
    roots = [r for r in json.loads(done.stdout)["roots"] if r["id"] == session_id]
    return list(roots[0]["children"]) if roots else []


def _runs_sleep_120(pid: int) -> bool:
    """Whether ``pid`` is a `sleep 120` (by any path to the binary)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\x00")
    except OSError:
        return False
    return os.path.basename(args[0]) == b"sleep" and args[1:2] == [b"120"]


def link_records(records: Path) -> list[dict[str, Any]]:
    """The session's `link_request` trace records."""
    return [r for r in trace(records) if r.get("event_type") == "link_request"]


def in_background(url: str, script: str) -> concurrent.futures.Future[str]:
    """Send ``script`` as a task from a thread; the future holds the step's output."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(answer, url, script)
    pool.shutdown(wait=False)
    return future


def gated_live(env: dict[str, str], session_id: str, n: int) -> list[dict[str, Any]] | None:
    """The running `gated` children once there are ``n`` of them with a pid."""
    kids = [k for k in tree_children(env, session_id)
            if k["state"] == "running" and k.get("pid") and str(k.get("capsule", "")).startswith("gated")]
    return kids if len(kids) == n else None


# -- several at once, lineage, the token scan ----------------------------------------------------


def test_two_links_at_once_are_two_live_children_under_the_parent(procs: Procs, tmp_path: Path, home: Path) -> None:
    """`a & b & wait`: two delegations live at once (mur-roost /status), both children under their
    parent in `mur ps --tree` with `via: link` and the calling command; no token anywhere."""
    roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url)
    sid, records = b.ready["session_id"], Path(b.ready["records_dir"])
    gate = tmp_path / "gate"
    future = in_background(b.ready["url"], f"gated {gate} > a.out 2>&1 & gated {gate} > b.out 2>&1 & wait; "
                                           "cat a.out b.out")
    kids = wait_until(lambda: gated_live(procs.env, sid, 2), timeout=120, what="two gated children running")
    assert roost_status(url, sid)["live_children"] == 2
    for kid in kids:
        lineage = kid["lineage"]
        assert lineage["parent"] == f"session:{sid}" and lineage["via"] == "link", lineage
        caller = lineage["caller"]
        assert Path(caller[0]).name == "sh" and caller[1] == "-c" and any("gated" in w for w in caller), lineage
        assert all(len(w) <= 200 for w in lineage["caller"]) and len(lineage["caller"]) <= 16
    text = subprocess.run([*MUR, "ps", "--tree"], env=procs.env, capture_output=True, text=True, timeout=60).stdout
    assert text.count(f"via link: {kids[0]['lineage']['caller'][0]} -c") >= 2, text
    stubs = pids_naming(str(records / "links" / "bin"))
    child_pids = descendants([int(k["pid"]) for k in kids])
    scanned = [roost.pid, b.pid, *stubs, *child_pids]
    assert len(stubs) >= 2 and child_pids
    assert token_hits([tmp_path / "work", home / "records", tmp_path / "logs"], scanned) == []
    gate.touch()
    out = future.result(timeout=120)
    assert out.count("opened") == 2 and out.count("gated: ok") == 2 and out.rstrip().endswith("rc=0"), out
    asked = link_records(records)
    assert [r["outcome"] for r in asked] == ["ok", "ok"] and {r["capsule"] for r in asked} == {"gated"}
    assert all(r["pid"] in stubs for r in asked)
    wait_until(lambda: roost_status(url, sid)["live_children"] == 0, timeout=30, what="live_children 0")
    assert token_hits([tmp_path / "work", home / "records", home / "tree", tmp_path / "logs"], [roost.pid, b.pid]) == []


def test_connection_cap_refuses_the_excess_with_one_line(procs: Procs, tmp_path: Path) -> None:
    """--max-concurrent 4 + 5 at once: four links hold live children, four connections wait inside
    the session, and the ninth reads exactly the refusal line (exit 125); the four still finish."""
    _roost, url = procs.roost("--spawn-allow", "boss", "--max-concurrent", "4")
    b = procs.mur_run("boss", tmp_path / "work", url)
    sid, records = b.ready["session_id"], Path(b.ready["records_dir"])
    files = tmp_path / "work"  # the workdir: what the commands may read and write under any class
    gate, held, go = files / "gate", files / "held", files / "go"  # gate: the holder's
    links = records / "links"
    hold = (f"import socket, os, time\nos.chdir({str(links)!r})\n"
            "ss = [socket.socket(socket.AF_UNIX) for _ in range(4)]\n"
            "[s.connect('cap.sock') for s in ss]\n"
            f"open({str(held)!r}, 'w').close()\n"
            f"deadline = time.monotonic() + 60\n"
            f"while not os.path.exists({str(gate)!r}) and time.monotonic() < deadline:\n    time.sleep(0.05)\n")
    (files / "hold.py").write_text(hold)
    # The order is fixed by files, not by timing: the four links are live children (seen by the
    # test) before the holder connects, and the holder's four connections are open before the
    # ninth connection is made. Each child's gate is `gate` in its own workdir (a relative task):
    # under sealed a child's root holds only its workdir, so a gate anywhere else is never seen
    # and each child waited out its 60 s loop. The children's workdirs are inside the boss's, so
    # its command opens them all.
    script = (" ".join(f"gated gate > g{i}.out 2>&1 &" for i in range(4))
              + f" i=0; while [ ! -e {go} ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done; "
              + f" python3 {files / 'hold.py'} & "
              + f"i=0; while [ ! -e {held} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; "
              + "kid excess > x.out 2> x.err; echo x=$? >> x.out; "
              + f': > {gate}; for d in .murmur/children/gated-*; do : > "$d/gate"; done; '  # boss holds no `touch`
              + "wait; cat g0.out g1.out g2.out g3.out x.out x.err")
    future = in_background(b.ready["url"], script)
    try:
        wait_until(lambda: gated_live(procs.env, sid, 4), timeout=100, what="four gated children running")
    finally:
        go.touch()
    out = future.result(timeout=60)
    assert "x=125" in out, out
    assert "murmur: too many concurrent delegation requests in this session\n" in out, out
    assert out.count("gated: ok") == 4 and "kid excess" not in out, out
    assert [r["capsule"] for r in link_records(records)].count("gated") == 4


# -- how a child ends: crashed, the child watch ---------------------------------------------------


def test_child_killed_is_exit_1_crashed(procs: Procs, tmp_path: Path) -> None:
    """SIGKILL to the child's session: the link prints `napper: crashed` and exits 1."""
    ready, url = boss(procs, tmp_path)
    future = in_background(url, "napper 120 2>&1")
    kid = wait_until(lambda: next((k for k in tree_children(procs.env, ready["session_id"])
                                   if k["state"] == "running" and k.get("pid")), None),
                     timeout=120, what="the napper child running")
    # Kill only once the child runs its task (its `sleep 120` step is in its process tree):
    # a kill before it took the task is "could not start" (125), another test's case.
    wait_until(lambda: any(_runs_sleep_120(p) for p in descendants([int(kid["pid"])])),
               timeout=120, what="the napper child's step running")
    os.kill(int(kid["pid"]), signal.SIGKILL)
    out = future.result(timeout=120)
    assert out.rstrip().endswith("rc=1") and "napper: crashed" in out, out
    (rec,) = link_records(Path(ready["records_dir"]))
    assert (rec["outcome"], rec["exit"]) == ("crashed", 1)


def test_child_watch_bound_3_real_seconds_is_124(procs: Procs, tmp_path: Path) -> None:
    """MURMUR_DELEGATION_TIMEOUT_SECS=3 (real seconds): the watch ends the child, the link exits 124."""
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url, env={**procs.env, "MURMUR_DELEGATION_TIMEOUT_SECS": "3"})
    out = answer(b.ready["url"], "napper 60 2>&1")
    assert out.rstrip().endswith("rc=124") and "napper: terminated" in out, out
    (rec,) = link_records(Path(b.ready["records_dir"]))
    assert (rec["outcome"], rec["exit"]) == ("terminated", 124)


# -- who may ask, on both containment classes -----------------------------------------------------

ESCAPE = ("(setsid sh -c 'kid escaped > esc.out 2>&1; echo esc=$? >> esc.out' &); "
          "i=0; while ! grep -q esc= esc.out 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; "
          "cat esc.out")


@pytest.mark.parametrize("klass", ["groups", "cgroup"])
def test_peer_check_per_containment_class(procs: Procs, tmp_path: Path, klass: str) -> None:
    """A command's descendant is accepted and an outsider refused on both classes; a process that
    double-forked out of its step is refused on groups and accepted on cgroup (still contained)."""
    env = {k: v for k, v in procs.env.items() if k != "MURMUR_CONTAINMENT"}
    if klass == "groups":
        env["MURMUR_CONTAINMENT"] = "groups"
    else:  # the host decides; the test runs only where it decides cgroup
        from murmur.containment.host import CGROUP, detect

        if detect({}).name != CGROUP:
            pytest.skip("this host gives only the process-group class")
    _roost, url = procs.roost("--spawn-allow", "boss")
    b = procs.mur_run("boss", tmp_path / "work", url, env=env)
    records = Path(b.ready["records_dir"])
    # The escapee goes first: on the groups class the runtime kills adopted escapees whenever
    # one of its units ends (spec/session.md "Containment"), and a delegated child's unit ends
    # some time after its link answered, so an escapee started after a delegation may be
    # killed before it asks.
    out = answer(b.ready["url"], ESCAPE)
    if klass == "groups":
        assert "esc=126" in out and "descends from no command this session started" in out, out
    else:
        assert "kid escaped" in out and "esc=0" in out, out
    out = answer(b.ready["url"], "kid inside 2>&1")
    assert "kid inside" in out and out.rstrip().endswith("rc=0"), out
    outside = subprocess.run([str(records / "links" / "bin" / "kid"), "x"], capture_output=True, text=True, timeout=30)
    assert outside.returncode == 126 and outside.stderr.startswith("murmur: link refused: process "), outside
    outcomes = [r["outcome"] for r in link_records(records)]
    want = ["caller_refused" if klass == "groups" else "ok", "ok", "caller_refused"]
    assert outcomes == want, outcomes


# -- an agent whose shell tool runs a link ---------------------------------------------------------

LINKER = """\
name: linker
version: 0.1.0
artifacts:
  - name: murmur-driver-openai
    version: 0.2.0
    runtime: driver
capabilities:
  shell:
    allow: [sh, echo]
  spawn:
    allow: [kid]
inference:
  driver:
    artifact: murmur-driver-openai
  endpoint: {endpoint}
  model: local-model
  api_key: ${{API_KEY}}
  max_tokens: 256
  max_turns: 4
  system_prompt: Answer with what the kid said.
lifecycle:
  task_acceptance: queue
  queue_depth: 4
  after_task: sleep
"""


def test_agent_shell_tool_runs_a_link_and_reads_mur_context(procs: Procs, tmp_path: Path, home: Path) -> None:
    """A scripted model calls its `sh` tool with `kid hello`: the child runs, its answer comes back
    into the turn, and the `mur context` text was in the system prompt the model received."""
    from agent.scripted import oa_text, oa_tools

    from .test_delegation_agent import Provider, tool_results

    provider = Provider([
        oa_tools(("c1", "sh", {"args": ["-c", "kid hello; echo rc=$?"]})),
        oa_text("the kid said hello"),
    ])
    try:
        src = tmp_path / "linker"
        src.mkdir()
        (src / "murmur.yaml").write_text(LINKER.format(endpoint=provider.url))
        with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
            install(src, global_=True)  # the provider's port is this run's: installed here, once
        roost, url = procs.roost("--spawn-allow", "linker")
        env = {**procs.env, "API_KEY": "sk-test-key-0000"}
        b = procs.mur_run("linker", tmp_path / "work", url, env=env)
        task = send_task(b.ready["url"], "ask the kid")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        system = provider.requests[0]["messages"][0]
        assert system["role"] == "system" and system["content"].startswith("Answer with what the kid said.")
        records = Path(b.ready["records_dir"])
        context = (records / "links" / "context.md").read_text()
        assert context.strip() in system["content"] and "capsule `linker`" in context and "  kid" in context
        (result,) = tool_results(provider.requests[1])
        assert "kid hello" in result and "rc=0" in result, result
        (rec,) = link_records(records)
        assert (rec["outcome"], rec["capsule"]) == ("ok", "kid")
        assert token_hits([tmp_path / "work", home / "records", tmp_path / "logs"], [roost.pid, b.pid]) == []
    finally:
        provider.close()
