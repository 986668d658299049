"""`mur run` end to end: the scaffold flow, installed capsules, --json, closed pipes, mur ps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ._session import ECHO_PLAN, MUR, MurProcess, env_for, trace_of, write_capsule

pytestmark = pytest.mark.e2e


def mur(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MUR, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def procs() -> Iterator[list[MurProcess]]:
    """Processes started by a test; every one is killed and reaped at the end."""
    started: list[MurProcess] = []
    yield started
    for p in started:
        p.close()


class TestScaffoldFlow:
    def test_new_build_install_run(self, tmp_path: Path) -> None:
        """mur new x && cd x && mur build && mur install && mur run --task hi: the answer lands."""
        env = env_for(tmp_path / "home")
        assert mur("new", "x", cwd=tmp_path, env=env).returncode == 0
        x = tmp_path / "x"
        assert mur("build", cwd=x, env=env).returncode == 0
        assert mur("install", cwd=x, env=env).returncode == 0
        before = sorted(str(q.relative_to(x)) for q in x.rglob("*"))
        r = mur("run", "--task", "hi there", cwd=x, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "received: hi there\n"
        lines = r.stderr.splitlines()
        assert lines[0].startswith("session: ses_") and lines[-1] == "status: ok"
        records = Path(next(ln for ln in lines if ln.startswith("records: ")).removeprefix("records: "))
        assert records.parent == tmp_path / "home" / "records" / str(x.resolve()).lstrip("/")
        assert (records / "out" / "result.txt").read_text() == "received: hi there\n"
        assert (records / "task.md").read_text() == "hi there"
        for sub in ("logs", "home", "tmp"):
            assert (records / sub).is_dir()
        assert sorted(str(q.relative_to(x)) for q in x.rglob("*")) == before  # nothing in the work folder
        # the installed capsule, by name, with --json: one readiness line and nothing else on stdout
        r = mur("run", "--capsule", "local/x", "--capsule-version", "0.1.0", "--json", "--task", "again", cwd=x, env=env)
        assert r.returncode == 0, r.stderr
        out = r.stdout.splitlines()
        assert len(out) == 1
        ready = json.loads(out[0])
        assert set(ready) >= {"session_id", "url", "name", "version", "pid", "workdir", "records_dir"}
        assert ready["name"] == "x" and "tokens" not in ready and "formation_id" not in ready
        assert (Path(ready["records_dir"]) / "out" / "result.txt").read_text() == "received: again\n"
        assert r.stderr == ""

    def test_task_file(self, tmp_path: Path) -> None:
        """--task naming a file runs the file's contents."""
        capsule = write_capsule(tmp_path, "echo", plan=ECHO_PLAN, allow=["echo"], acceptance="single", after="exit")
        (tmp_path / "task.txt").write_text("from a file")
        r = mur("run", "--task", str(tmp_path / "task.txt"), cwd=capsule, env=env_for(tmp_path / "home"))
        assert r.returncode == 0 and r.stdout == "echo: from a file\n"


class TestRefusals:
    def test_usage_errors_exit_2(self, tmp_path: Path) -> None:
        """Conflicting flags, a bad deadline and unknown flags are usage errors (exit 2)."""
        env = env_for(tmp_path / "home")
        r = mur("run", "--capsule", "local/x", cwd=tmp_path, env=env)
        assert r.returncode == 2 and "error[E-CLI-001]" in r.stderr
        r = mur("run", "--capsule", "local/x", "--capsule-version", "1.0.0", "--manifest", "m.yaml", cwd=tmp_path, env=env)
        assert r.returncode == 2 and "E-CLI-001" in r.stderr
        capsule = write_capsule(tmp_path, "echo", plan=ECHO_PLAN, allow=["echo"])
        r = mur("run", "--deadline", "soonish", cwd=capsule, env=env)
        assert r.returncode == 2 and "error[E-RUN-054]" in r.stderr
        assert mur("run", "--bogus", cwd=capsule, env=env).returncode == 2
        r = mur("run", "--roster", "--workdir", "w", cwd=capsule, env=env)
        assert r.returncode == 2 and "--workdir" in r.stderr

    def test_launch_refusals_exit_1(self, tmp_path: Path) -> None:
        """No manifest, a capsule not installed, a higher containment floor: coded, exit 1."""
        env = env_for(tmp_path / "home")
        r = mur("run", cwd=tmp_path, env=env)
        assert r.returncode == 1 and "error[E-MAN-004]" in r.stderr and "Traceback" not in r.stderr
        r = mur("run", "--capsule", "local/nope", "--capsule-version", "1.0.0", cwd=tmp_path, env=env)
        assert r.returncode == 1 and "error[E-REG-001]" in r.stderr
        capsule = write_capsule(tmp_path, "echo", plan=ECHO_PLAN, allow=["echo"])
        r = mur("run", "--containment", "sealed", cwd=capsule, env={**env, "MURMUR_SANDBOX_HOST": "no-mountns"})
        assert r.returncode == 1 and "error[E-CAP-003]" in r.stderr

    def test_failed_task_exit_1(self, tmp_path: Path) -> None:
        """A deciding task that fails: `status: failed`, E-RUN-040, exit 1, `error:` result."""
        capsule = write_capsule(tmp_path, "nap", plan='steps:\n  - id: a\n    shell: [sleep, "{{ task }}"]\noutput: x\n', allow=["sleep"])
        r = mur("run", "--task", "not-a-number", cwd=capsule, env=env_for(tmp_path / "home"))
        assert r.returncode == 1
        assert "status: failed" in r.stderr and "error[E-RUN-040]" in r.stderr
        records = Path(next(ln for ln in r.stderr.splitlines() if ln.startswith("records: ")).removeprefix("records: "))
        assert (records / "out" / "result.txt").read_text().startswith("error: plan step `a` failed")


class TestPipesAndPs:
    def test_closed_pipes_do_not_stop_the_session(self, tmp_path: Path, procs: list[MurProcess]) -> None:
        """With stdout and stderr closed the session still runs; its lines go to bootstrap.log."""
        capsule = write_capsule(tmp_path, "echo", plan=ECHO_PLAN, allow=["echo"])
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        os.close(r_out)
        os.close(r_err)
        p = MurProcess(["--task", "quiet"], cwd=capsule, env=env_for(tmp_path / "home"), stdout=w_out, stderr=w_err)
        os.close(w_out)
        os.close(w_err)
        procs.append(p)
        assert p.wait() == 0
        logs = list((tmp_path / "home" / "records").rglob("bootstrap.log"))
        assert len(logs) == 1
        text = logs[0].read_text()
        assert "[stdout] echo: quiet" in text and "[stderr] status: ok" in text

    def test_ps_lists_live_sessions(self, tmp_path: Path, procs: list[MurProcess]) -> None:
        """mur ps shows a live session with its URL and prunes a stale record."""
        home = tmp_path / "home"
        env = env_for(home)
        capsule = write_capsule(tmp_path, "echo", plan=ECHO_PLAN, allow=["echo"])
        p = MurProcess(["--json"], cwd=capsule, env=env)
        procs.append(p)
        ready = p.read_ready()
        assert httpx.get(p.url + "/.well-known/agent-card.json", timeout=5).status_code == 200
        stale = home / "running" / "ses_00000000000000000000000000000000.json"
        stale.write_text(json.dumps({**json.loads((home / "running" / f"{ready['session_id']}.json").read_text()),
                                     "session_id": "ses_00000000000000000000000000000000", "start_time": 1}))
        r = mur("ps", cwd=tmp_path, env=env)
        assert r.returncode == 0
        assert ready["session_id"] in r.stdout and p.url in r.stdout and "echo@0.1.0" in r.stdout
        assert "pruned: ses_00000000000000000000000000000000" in r.stderr and not stale.exists()
        rows = json.loads(mur("ps", "--json", cwd=tmp_path, env=env).stdout)
        assert [row["session_id"] for row in rows] == [ready["session_id"]]
        p.signal(signal.SIGTERM)
        assert p.wait() == 0
        assert mur("ps", cwd=tmp_path, env=env).stdout.strip() == "no running capsules"
        assert trace_of(ready)[0]["event_type"] == "session_start"
