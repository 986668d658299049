"""End-to-end launches of real formations (real processes, pipes, signals; fake members).

Members are ``fake_mur.py``: it reads its channel, serves a card, reports, and winds down
on lifeline EOF. What a real ``mur run`` member does with its lifeline is the session's
business; here the launcher side is under test.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from murmur import ids

from ._formation import Spec, launched, make_project, wait_for

pytestmark = pytest.mark.e2e

TRIO = [
    Spec("lead", entry=True, callees=("worker",)),
    Spec("worker", serves_peers=True, callees=("helper",)),
    Spec("helper", serves_peers=True),
]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return make_project(tmp_path, TRIO)


class TestLaunch:
    def test_task_runs_and_formation_ends(self, proj: Path, tmp_path: Path, murmur_home: Path) -> None:
        """--task --json: two stdout lines, members set up as the seed says, all gone at the end."""
        with launched(proj, tmp_path, {"lead": {"task_seconds": 0.3}},
                      ["--task", "hello", "--json"]) as run:
            assert run.wait(30) == 0
            out = run.stdout().splitlines()
            assert len(out) == 2
            formation = json.loads(out[0])
            entry_line = json.loads(out[1])
            frm = formation["formation_id"]
            assert ids.is_id(frm, "frm") and formation["entry"] == "lead"
            assert [p["name"] for p in formation["peers"]] == ["worker", "helper"]
            assert entry_line["name"] == "lead" and entry_line["formation_id"] == frm
            assert "mft1" not in run.stdout() and "mft1" not in run.stderr()

            starts = {e["member"]: e for e in run.events(event="start")}
            for name, e in starts.items():
                env = e["env"]
                assert env["MURMUR_FORMATION_ID"] == frm
                assert env["MURMUR_HOST_WARNINGS_REPORTED"] == "1"
                assert int(env["MURMUR_FORMATION_CHANNEL"]) > 2
                assert int(env["MURMUR_FORMATION_LIFELINE"]) > 2
                assert "MURMUR_FORMATION_PEERS" not in env
                assert not any("mft1" in v for v in env.values())
                assert not any("mft1" in a for a in e["argv"])
                argv = e["argv"]
                assert argv[:5] == ["run", "--capsule", f"local/m-{name}", "--capsule-version", "0.1.0"]
            assert "--json" in starts["worker"]["argv"]
            lead_argv = starts["lead"]["argv"]
            assert lead_argv[lead_argv.index("--lifecycle-task-acceptance") + 1] == "single"
            assert lead_argv[lead_argv.index("--lifecycle-after-task") + 1] == "exit"
            assert lead_argv[lead_argv.index("--task") + 1] == "hello"
            assert lead_argv[lead_argv.index("--workdir") + 1] == str(proj.resolve())
            assert starts["lead"]["calls"] == ["worker"]
            assert starts["worker"]["calls"] == ["helper"]

            # the entry member started after every peer was ready
            lead_start = starts["lead"]["t"]
            assert all(run.events(m, "ready")[0]["t"] < lead_start for m in ("worker", "helper"))
            # worker got helper's address on its channel
            # (beside the callees line, which names what it calls: spec/formation-tokens.md)
            lines = run.events("worker", "channel_line")
            (addr,) = [e for e in lines if "addresses" in e["line"]]
            (callees,) = [e for e in lines if "callees" in e["line"]]
            assert [c["name"] for c in callees["line"]["callees"]] == ["helper"]
            helper_url = run.events("helper", "ready")[0]["url"]
            assert addr["line"] == {"addresses": [{"name": "helper", "url": helper_url}]}
            # peers' lifelines closed after the entry member ended; every member is gone
            lead_exit = run.events("lead", "exit")[0]["t"]
            for peer in ("worker", "helper"):
                assert run.events(peer, "lifeline_eof")[0]["t"] >= lead_exit
            assert run.survivors() == []
            # peers' stderr was relayed behind their names
            assert "[worker] fake_mur: worker serving" in run.stderr()

            # directories: formation.json 0600 before peer dirs 0700, named in the formation line
            fdir = murmur_home / "formations" / "proj" / frm
            marker = json.loads((fdir / "formation.json").read_text())
            assert marker["project_dir"] == str(proj.resolve())
            assert marker["launcher_pid"] == run.proc.pid
            assert stat.S_IMODE((fdir / "formation.json").stat().st_mode) == 0o600
            for p in formation["peers"]:
                assert p["workdir"] == str(fdir / p["name"])
                assert stat.S_IMODE(os.stat(p["workdir"]).st_mode) == 0o700
            assert stat.S_IMODE(fdir.stat().st_mode) == 0o700

    def test_entry_status_is_launcher_status(self, proj: Path, tmp_path: Path) -> None:
        """The launcher exits with the entry member's status."""
        with launched(proj, tmp_path, {"lead": {"task_exit": 3}}, ["--task", "x"]) as run:
            assert run.wait(30) == 3
            assert run.survivors() == []

    def test_no_task_serves_until_sigterm(self, proj: Path, tmp_path: Path) -> None:
        """Without --task the entry queues and sleeps; SIGTERM closes every lifeline: exit 143."""
        with launched(proj, tmp_path, {}, ["--json"]) as run:
            run.wait_ready(["lead", "worker", "helper"])
            lead_argv = run.events("lead", "start")[0]["argv"]
            assert lead_argv[lead_argv.index("--lifecycle-task-acceptance") + 1] == "queue"
            assert lead_argv[lead_argv.index("--lifecycle-after-task") + 1] == "sleep"
            os.kill(run.proc.pid, signal.SIGTERM)
            assert run.wait(30) == 143
            for m in ("lead", "worker", "helper"):
                assert run.events(m, "lifeline_eof"), m
                assert not run.events(m, "sigterm"), "the launcher sends no member SIGTERM"
            assert run.survivors() == []

    def test_inside_formation_refused(self, proj: Path, tmp_path: Path) -> None:
        """--roster inside a formation (MURMUR_FORMATION_ID set) is E-RUN-046; nothing starts."""
        with launched(proj, tmp_path, {}, ["--task", "x"],
                      env={"MURMUR_FORMATION_ID": ids.new_id("frm")}) as run:
            assert run.wait(30) == 1
            assert "error[E-RUN-046]" in run.stderr()
            assert run.all_pids() == []


class TestRefusals:
    def test_admission_refusal_starts_nothing(self, tmp_path: Path) -> None:
        """A roster that admission refuses starts no member: E-ROS-007, exit 1."""
        proj = make_project(tmp_path, TRIO)
        text = (proj / "roster.yaml").read_text().replace("local/m-helper", "local/m-missing")
        (proj / "roster.yaml").write_text(text)
        with launched(proj, tmp_path, {}, ["--task", "x"]) as run:
            assert run.wait(30) == 1
            assert "error[E-ROS-007]" in run.stderr()
            assert run.all_pids() == []
            assert run.stdout() == ""

    def test_peer_exits_before_reporting(self, proj: Path, tmp_path: Path) -> None:
        """E-RUN-045 names the peer, its status and stderr; started peers stop; no entry."""
        with launched(proj, tmp_path, {"helper": {"report": "exit:4", "delay": 0.3}},
                      ["--task", "x"]) as run:
            assert run.wait(30) == 1
            err = run.stderr()
            assert "error[E-RUN-045]: the formation could not be launched" in err
            assert "'helper' (local/m-helper@0.1.0): exited with status 4 before reporting" in err
            assert "| fake_mur: helper failing on purpose" in err
            worker_pid = run.member_pids()["worker"]
            assert f"stopped: worker (pid {worker_pid})" in err
            assert not run.events("lead")
            assert run.events("worker", "lifeline_eof")
            assert run.survivors() == []

    def test_first_line_not_readiness(self, proj: Path, tmp_path: Path) -> None:
        """A peer whose first line is not a readiness line refuses the launch."""
        with launched(proj, tmp_path, {"worker": {"report": "garbage"}}, ["--task", "x"]) as run:
            assert run.wait(30) == 1
            assert "'worker' (local/m-worker@0.1.0): its first line was not a readiness line" in run.stderr()
            assert not run.events("lead")
            assert run.survivors() == []

    def test_artifact_changed_since_admission(self, proj: Path, tmp_path: Path) -> None:
        """The entry's artifact re-hashed before it starts: changed bytes are E-RUN-047."""
        with launched(proj, tmp_path, {"worker": {"delay": 1.0}}, ["--task", "x"]) as run:
            wait_for(lambda: bool(run.events("worker", "start")), 20)
            (archive,) = (proj / ".murmur" / "artifacts").rglob("m-lead-0.1.0.mur.zip")
            archive.write_bytes(archive.read_bytes() + b"tampered")
            assert run.wait(30) == 1
            assert "error[E-RUN-047]: member 'lead' (local/m-lead@0.1.0)" in run.stderr()
            assert not run.events("lead")
            assert run.survivors() == []


class TestDeadline:
    def test_before_entry_starts(self, proj: Path, tmp_path: Path) -> None:
        """A peer that never becomes ready, cut by --deadline: E-RUN-053, no entry, nothing left."""
        with launched(proj, tmp_path, {"helper": {"door": "never"}},
                      ["--task", "x", "--deadline", "2s"]) as run:
            assert run.wait(30) == 1
            assert "error[E-RUN-053]" in run.stderr()
            assert not run.events("lead")
            assert run.survivors() == []
            assert run.events("helper", "lifeline_eof")

    def test_after_entry_started(self, proj: Path, tmp_path: Path) -> None:
        """After the entry started, the deadline closes every lifeline at that one moment."""
        with launched(proj, tmp_path, {}, ["--deadline", "3s"]) as run:
            run.wait_ready(["lead"])
            assert run.wait(30) == 0  # the fake entry winds down with 0; a real one exits 1
            deadline_arg = run.events("lead", "start")[0]["argv"]
            moment = deadline_arg[deadline_arg.index("--deadline") + 1]
            assert moment.endswith("Z")
            peers_deadline = {
                e["member"]: e["argv"][e["argv"].index("--deadline") + 1]
                for e in run.events(event="start")
            }
            assert set(peers_deadline.values()) == {moment}
            eofs = [run.events(m, "lifeline_eof")[0]["t"] for m in ("lead", "worker", "helper")]
            assert max(eofs) - min(eofs) < 0.5
            assert run.survivors() == []


class TestRetention:
    def test_max_sessions_removes_older(self, tmp_path: Path, murmur_home: Path) -> None:
        """The entry's trace.retain removes old formation dirs at the end of a launch."""
        proj = make_project(tmp_path, TRIO, retain="    max_sessions: 1\n")
        frms = []
        for i in range(2):
            scratch = tmp_path / f"run{i}"
            scratch.mkdir()
            with launched(proj, scratch, {}, ["--task", "x", "--json"]) as run:
                assert run.wait(30) == 0
                frms.append(json.loads(run.stdout().splitlines()[0])["formation_id"])
                err = run.stderr()
        base = murmur_home / "formations" / "proj"
        assert not (base / frms[0]).exists()
        assert (base / frms[1]).is_dir()
        assert f"[mur run] retention: removed formation {frms[0]} (max_sessions)" in err


class TestMurStop:
    def test_stop_formation(self, proj: Path, tmp_path: Path) -> None:
        """`mur stop <frm>` sends the launcher SIGTERM: every lifeline closes, exit 143."""
        import subprocess
        import sys

        with launched(proj, tmp_path, {}, ["--json"]) as run:
            run.wait_ready(["lead", "worker", "helper"])
            frm = json.loads(run.stdout().splitlines()[0])["formation_id"]
            done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "stop", frm],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == [
                f"stopped: {frm}", f"launcher: pid {run.proc.pid}", "signal: SIGTERM"]
            assert run.wait(10) == 143
            for m in ("lead", "worker", "helper"):
                assert run.events(m, "lifeline_eof") and not run.events(m, "sigterm")
            assert run.survivors() == []
