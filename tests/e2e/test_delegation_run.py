"""Delegation end to end: a real mur-roost, real `mur run` parents and children (issue 5, Proof).

The test capsules are built and installed once per module into a private MURMUR_HOME that
every process here uses (and that the daemon's --registry-path names). Each test starts its
own daemon on a free port; every process is killed at teardown whatever happens.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from murmur.delegation import completion as comp
from murmur.registry import install

from ._delegation import (
    MUR,
    Procs,
    alive,
    capsule_steps,
    completion_settled,
    descendants,
    free_port,
    of,
    pids_naming,
    plan_capsule,
    roost_status,
    send_task,
    status_text,
    submit_task,
    token_hits,
    trace,
    wait_until,
)

pytestmark = pytest.mark.e2e

IDENTITY = (
    "not authorised: this daemon answers only a credential it minted for a running session, "
    "and an approval it minted for that same session"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A MURMUR_HOME holding every test capsule of this module, installed once."""
    home = tmp_path_factory.mktemp("delegation-home")
    src = tmp_path_factory.mktemp("delegation-src")
    echo = ('steps:\n  - id: nap\n    shell: [sleep, "1"]\n  - id: say\n    depends_on: [nap]\n'
            '    shell: [echo, "worked: {{ task }}"]\noutput: "{{ steps.say.stdout }}"\n')
    nap = 'steps:\n  - id: nap\n    shell: [sleep, "{{ task }}"]\noutput: "slept {{ task }}"\n'
    dirs = [
        plan_capsule(src, "worker", plan=echo, shell=["echo", "sleep"]),
        plan_capsule(src, "sleeper", plan=nap, shell=["sleep"]),
        plan_capsule(src, "wide", plan='steps:\n  - id: t\n    template: "x"\noutput: "x"\n', network=["api.example.com"]),
        plan_capsule(src, "orch", shell=["echo", "sleep"], spawn=["worker"],
                     plan=capsule_steps(("a", "worker", "A {{ task }}"), ("b", "worker", "B {{ task }}"),
                                        output="{{ steps.a.output }} + {{ steps.b.output }}")),
        plan_capsule(src, "napper", shell=["sleep"], spawn=["sleeper"],
                     plan=capsule_steps(("a", "sleeper", "{{ task }}"), ("b", "sleeper", "{{ task }}"),
                                        output="{{ steps.a.output }} + {{ steps.b.output }}")),
        plan_capsule(src, "pair", shell=["sleep"], spawn=["sleeper"],
                     plan=capsule_steps(("a", "sleeper", "{{ task }}"), ("b", "sleeper", "{{ task }}"),
                                        on_error="continue", output="{{ steps.a.status }} {{ steps.b.status }}")),
        plan_capsule(src, "loop", shell=["echo"], spawn=["loop"],
                     plan=capsule_steps(("down", "loop", "{{ task }}"), output="{{ steps.down.output }}")),
        plan_capsule(src, "picky", shell=["echo", "sleep"], spawn=["worker", "wide"],
                     plan=capsule_steps(("s", "worker", "{{ task }}"), output="{{ steps.s.output }}")),
        # the README tour's pair: queue + sleep on both sides, the parent run with --task
        plan_capsule(src, "kid", shell=["echo"], depth=1,
                     plan='steps:\n  - id: answer\n    shell: [echo, "received: {{ task }}"]\n'
                          'output: "{{ steps.answer.stdout }}"\n'),
        plan_capsule(src, "boss", shell=["echo"], spawn=["kid"], depth=1,
                     plan=capsule_steps(("ask", "kid", "{{ task }}"), output="boss got: {{ steps.ask.output }}")),
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
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_DELEGATION_TIMEOUT_SECS"):
        env.pop(name, None)
    p = Procs(tmp_path, env)
    try:
        yield p
    finally:
        p.close()


def children_dirs(work: Path) -> list[Path]:
    """The child directories directly under ``work``."""
    root = work / ".murmur" / "children"
    return sorted(root.iterdir()) if root.is_dir() else []


def child_trace(child_dir: Path) -> list[dict[str, Any]]:
    """A child's own trace (its records live in its directory)."""
    (records,) = [p for p in (child_dir / ".murmur").iterdir() if p.name.startswith("ses_")]
    return trace(records)


class TestDelegation:
    def test_two_children_concurrently(self, procs: Procs, tmp_path: Path, home: Path) -> None:
        """Two capsule steps delegate at once; answers feed the output; outcomes arrive as completion tasks."""
        roost, url = procs.roost("--spawn-allow", "orch")
        work = tmp_path / "work"
        parent = procs.mur_run("orch", work, url)
        task = send_task(parent.ready["url"], "hello")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", status_text(task)
        assert status_text(task) == "worked: A hello + worked: B hello"
        records = trace(parent.ready["records_dir"])
        starts = of(records, "delegation_start")
        calls = [r for r in of(records, "delegation") if r["outcome"] == "completed"]
        assert len(starts) == 2 and len(calls) == 2
        assert max(s["timestamp"] for s in starts) <= min(c["timestamp"] for c in calls)  # both held at once
        dirs = children_dirs(work)
        assert sorted(s["child_workdir"] for s in starts) == [str(d.relative_to(work)) for d in dirs]

        def outcomes() -> list[dict[str, Any]] | None:
            recs = trace(parent.ready["records_dir"])
            done = [r for r in of(recs, "task_start") if r["origin"] == "completion"]
            ends = {r["task_id"] for r in of(recs, "task_end") if r["exit_status"] == "ok"}
            return done if len(done) == 2 and all(d["task_id"] in ends for d in done) else None

        arrived = wait_until(outcomes, timeout=30, what="two completion tasks")
        assert {a["lane"] for a in arrived} == {"bg"}
        records = trace(parent.ready["records_dir"])
        closed = [r for r in of(records, "delegation") if r["outcome"] == "ok"]
        assert sorted(r["delegation_id"] for r in closed) == sorted(s["delegation_id"] for s in starts)
        sid = parent.ready["session_id"]
        figures = wait_until(lambda: (f := roost_status(url, sid))["live_children"] == 0 and f, timeout=30,
                             what="live_children back to 0")
        assert figures["live_capsules"] == 1
        for d in dirs:
            data = comp.read_completion(d)
            assert data is not None and (data["reported_by"], data["status"], data["delivered"]) == ("child", "ok", True)
            start = of(child_trace(d), "session_start")[0]
            assert (start["spawned_by"], start["delegation_id"]) == (sid, data["delegation_id"])
            assert (d / data["result_path"]).read_text().startswith("worked: ")
        wait_until(lambda: not pids_naming(str(work / ".murmur")), timeout=30, what="children to exit")
        hits = token_hits([work, home / "records", tmp_path / "logs"], [parent.pid, roost.pid])
        assert hits == []

    def test_refusals_name_and_envelope(self, procs: Procs, tmp_path: Path) -> None:
        """The daemon judges the registry manifest: a name not in its list, an envelope exceeded."""
        _roost, url = procs.roost("--spawn-allow", "picky")
        local = plan_capsule(tmp_path / "src", "picky", shell=["echo", "sleep"], spawn=["worker", "wide", "other"],
                             plan=capsule_steps(("o", "other", "x"), ("w", "wide", "x"), on_error="continue"))
        work = tmp_path / "work"
        parent = procs.mur_run("picky", work, url, manifest=local / "murmur.yaml")
        task = send_task(parent.ready["url"], "go")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        records = trace(parent.ready["records_dir"])
        refused = {r["capsule"]: r for r in of(records, "delegation")}
        assert refused["other"]["outcome"] == "refused" and refused["other"]["delegation_id"] is None
        assert refused["other"]["reason"] == "capsule 'other' is not in parent's spawn_allow"
        assert refused["wide"]["outcome"] == "refused"
        assert refused["wide"]["reason"].startswith(
            "capabilities.network.allow: the child declares 'api.example.com', which its parent does not hold")
        steps = {r["step"]: r for r in of(records, "plan_step")}
        assert steps["o"]["status"] == "failed" and "capsule 'other' is not in parent's spawn_allow" in steps["o"]["reason"]
        assert steps["w"]["status"] == "failed" and "capabilities.network.allow" in steps["w"]["reason"]
        assert children_dirs(work) == []  # a refused spawn leaves nothing

    def test_self_spawning_capsule_stops_at_the_fourth_level(self, procs: Procs, tmp_path: Path) -> None:
        """--max-depth 3: levels 1..4 run, the fourth level's POST /spawn is refused."""
        _roost, url = procs.roost("--spawn-allow", "loop", "--max-depth", "3")
        work = tmp_path / "work"
        parent = procs.mur_run("loop", work, url)
        task = send_task(parent.ready["url"], "deep")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert ("delegation depth bound reached: this daemon allows 3 levels of delegation below a top-level "
                "capsule (--max-depth 3)") in status_text(task)
        level, levels = work, [work]
        while kids := children_dirs(level):
            (level,) = kids
            levels.append(level)
        assert len(levels) == 4  # the top capsule and three delegated levels
        deepest = child_trace(levels[-1])
        (refusal,) = of(deepest, "delegation")
        assert refusal["outcome"] == "refused" and refusal["reason"].startswith("delegation depth bound reached")
        sid = parent.ready["session_id"]
        wait_until(lambda: roost_status(url, sid)["live_children"] == 0, timeout=30, what="live_children 0")
        wait_until(lambda: not pids_naming(str(work / ".murmur")), timeout=30, what="every level to exit")

    @pytest.mark.parametrize(
        ("flags", "message"),
        [
            (("--max-concurrent", "1"),
             "delegation concurrency bound reached: this daemon allows a capsule 1 live children at a time "
             "(--max-concurrent 1), and this session already holds 1"),
            (("--max-live-capsules", "2"),
             "machine capsule ceiling reached: this daemon allows 2 live capsules on this host across every "
             "formation (--max-live-capsules 2), and it is already holding 2"),
        ],
    )
    def test_bounds_refuse_the_second_child(self, procs: Procs, tmp_path: Path, flags: tuple[str, str], message: str) -> None:
        """Two steps ask at once; the bound refuses one (a failed step with the daemon's message)."""
        _roost, url = procs.roost("--spawn-allow", "pair", *flags)
        work = tmp_path / "work"
        parent = procs.mur_run("pair", work, url)
        task = send_task(parent.ready["url"], "1")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert sorted(status_text(task).split()) == ["failed", "ok"]
        records = trace(parent.ready["records_dir"])
        refusals = [r for r in of(records, "delegation") if r["outcome"] == "refused"]
        assert len(refusals) == 1 and refusals[0]["reason"].startswith(message)
        (failed,) = [r for r in of(records, "plan_step") if r["status"] == "failed"]
        assert message in failed["reason"]
        (child,) = children_dirs(work)  # the granted one ran and reported for itself
        data = wait_until(lambda: completion_settled(child), timeout=30, what="the granted child's record")
        assert (data["status"], data["reported_by"], data["delivered"]) == ("ok", "child", True)
        sid = parent.ready["session_id"]
        wait_until(lambda: roost_status(url, sid)["live_children"] == 0, timeout=30, what="live_children 0")


class TestEndings:
    def test_kill_parent_ends_every_child(self, procs: Procs, tmp_path: Path, home: Path) -> None:
        """kill -KILL of the parent: every child ends within 30 s and records an undelivered outcome."""
        roost, url = procs.roost("--spawn-allow", "napper")
        work = tmp_path / "work"
        parent = procs.mur_run("napper", work, url)
        submit_task(parent.ready["url"], "60")
        wait_until(lambda: len(of(trace(parent.ready["records_dir"]), "delegation_start")) == 2, timeout=60,
                   what="two children started")
        children = pids_naming(str(work / ".murmur" / "children"))
        assert len(children) == 2
        # The two `mur run` children and their `sleep` commands: a child holds its task before
        # its plan step has forked the command, so wait for the commands to appear.
        wait_until(lambda: len(descendants(children)) >= 4, timeout=30, what="the children's commands")
        tree = descendants(children)
        assert len(tree) >= 4
        assert token_hits([work, home / "records", tmp_path / "logs"], [parent.pid, roost.pid, *tree]) == []
        os.kill(parent.pid, signal.SIGKILL)
        began = time.monotonic()
        wait_until(lambda: not alive(tree), timeout=30, what="every child to end after the parent was killed")
        elapsed = time.monotonic() - began
        assert elapsed < 30
        for d in children_dirs(work):
            data = comp.read_completion(d)
            assert data is not None and (data["reported_by"], data["delivered"]) == ("child", False)
            assert data["status"] == "error" and "did not answer" in data["delivery_error"]
            assert of(child_trace(d), "spawner_ended")
        assert token_hits([work, home / "records", tmp_path / "logs"], []) == []

    @pytest.mark.parametrize("path", ["warm", "exec"])
    def test_children_start_as_their_own_mur_run(self, procs: Procs, tmp_path: Path, path: str) -> None:
        """Forked by the session's warm starter (the default) or exec'd (``MURMUR_STARTER=off``),
        a child is its own ``mur run``: ``/proc`` shows ``mur run --capsule …`` and exactly the
        environment it was given (never a variable of the parent's it was not given), its own
        session and group, its own containment unit; killing the parent ends it either way."""
        roost, url = procs.roost("--spawn-allow", "napper")
        work = tmp_path / "work"
        env = dict(procs.env, MURMUR_STARTER="on" if path == "warm" else "off", NOT_FOR_CHILDREN="x")
        parent = procs.mur_run("napper", work, url, env=env)
        submit_task(parent.ready["url"], "60")
        wait_until(lambda: len(of(trace(parent.ready["records_dir"]), "delegation_start")) == 2, timeout=60,
                   what="two children started")
        children = pids_naming(str(work / ".murmur" / "children"))
        assert len(children) == 2
        for pid in children:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ppid, pgid, sid = int(stat[1]), int(stat[2]), int(stat[3])
            assert pgid == pid and sid == pid  # its own session and group
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            names = {x.split(b"=", 1)[0].decode() for x in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if x}
            assert "NOT_FOR_CHILDREN" not in names and "PYTHONPATH" not in names, names
            assert {"PATH", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE"} <= names, names
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            if path == "warm":
                assert argv[:3] == [b"mur", b"run", b"--capsule"], argv
                starter = Path(f"/proc/{ppid}/cmdline").read_bytes()
                assert starter.startswith(b"mur starter "), starter
                assert int(Path(f"/proc/{ppid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == parent.pid
            else:
                assert b"run" in argv and b"--capsule" in argv and ppid == parent.pid, (argv, ppid)
            if "/murmur-" in cgroup:  # cgroup class: a unit of its own, not the starter's
                assert "/starter-" not in cgroup, cgroup
        tree = descendants(children)
        os.kill(parent.pid, signal.SIGKILL)
        wait_until(lambda: not alive(tree), timeout=30, what="every child to end after the parent was killed")
        assert roost.alive(), "the daemon went with them"

    def test_roost_killed_child_reports_then_restart_refuses(self, procs: Procs, tmp_path: Path) -> None:
        """mur-roost dies while children run: they finish and report; after a restart, spawns are refused."""
        port = free_port()
        roost, url = procs.roost("--spawn-allow", "napper", port=port)
        work = tmp_path / "work"
        parent = procs.mur_run("napper", work, url)
        first = submit_task(parent.ready["url"], "2")
        wait_until(lambda: len(of(trace(parent.ready["records_dir"]), "delegation_start")) == 2, timeout=60,
                   what="two children started")
        roost.kill()
        roost.proc.wait(10)

        def ended() -> dict[str, Any] | None:
            recs = trace(parent.ready["records_dir"])
            return next((r for r in of(recs, "task_end") if r["task_id"] == first["id"]), None)

        end = wait_until(ended, timeout=60, what="the parent's task to end")
        assert end["exit_status"] == "ok"
        for d in children_dirs(work):
            data = wait_until(lambda d=d: completion_settled(d), timeout=30, what="child completion")
            assert (data["reported_by"], data["status"], data["delivered"]) == ("child", "ok", True)
        _restarted, url2 = procs.roost("--spawn-allow", "napper", port=port)
        assert url2 == url
        again = send_task(parent.ready["url"], "1")
        assert again["status"]["state"] == "TASK_STATE_FAILED"
        assert IDENTITY in status_text(again)


UNREACHABLE_PROXY = "http://127.0.0.1:9"  # nothing listens: a call sent through it fails
PROXIES = {name: UNREACHABLE_PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}


class TestLaunchTask:
    @pytest.mark.parametrize("proxied", [False, True], ids=["plain", "proxy-variables-set"])
    def test_tour_run_delivers_the_completion_without_a_warning(self, procs: Procs, tmp_path: Path, proxied: bool) -> None:
        """`mur run --task` of a queue/sleep parent: the released child's completion is delivered, stderr is clean.

        With every proxy variable naming an unreachable proxy (and no NO_PROXY), the loopback
        calls — roost, the child's task delivery and answer, the completion — still go direct.
        """
        _roost, url = procs.roost("--spawn-allow", "boss")
        work = tmp_path / "work"
        work.mkdir()
        env = {**procs.env, "MURMUR_ROOST_URL": url}
        if proxied:
            env = {k: v for k, v in env.items() if k.lower() != "no_proxy"} | PROXIES
        run = procs.start([*MUR, "run", "--capsule", "local/boss", "--capsule-version", "0.1.0", "--task", "hi"],
                          cwd=work, env=env)
        assert run.proc.stdout is not None
        try:  # bounded: a hung run fails here instead of blocking on a pipe that never closes
            raw, _ = run.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`mur run --task` did not exit within 60 s; stderr:\n{run.stderr}")
        out = raw.decode()
        assert run.proc.returncode == 0, run.stderr
        assert out == "boss got: received: hi\n"
        assert "not delivered" not in run.stderr and "warning" not in run.stderr, run.stderr
        (child,) = children_dirs(work)
        data = comp.read_completion(child)
        assert data is not None
        assert (data["reported_by"], data["status"], data["delivered"], data["delivery_error"]) == ("child", "ok", True, None)
        (records,) = [line.split(": ", 1)[1] for line in run.stderr.splitlines() if line.startswith("records: ")]
        outcomes = [(r["outcome"], r["delegation_id"]) for r in of(trace(records), "delegation")]
        assert outcomes == [("completed", data["delegation_id"]), ("ok", data["delegation_id"])]
        assert not pids_naming(str(work))  # the child ended with its parent
