"""`mur watch` on a real running session: it follows, and Ctrl-C ends it with exit 130 and no
traceback; on a session that has ended it prints what was recorded and exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MANIFEST = ("name: idler\nversion: 0.1.0\nplan: plan.yaml\nlifecycle:\n  task_acceptance: queue\n"
            "  after_task: sleep\n")
PLAN = 'steps:\n  - id: say\n    template: "echo: {{ task }}"\noutput: "{{ steps.say.output }}"\n'


def test_watch_follows_then_ctrl_c_exits_130(tmp_path: Path) -> None:
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    (capsule / "murmur.yaml").write_text(MANIFEST)
    (capsule / "plan.yaml").write_text(PLAN)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}, "MURMUR_HOME": str(tmp_path / "h")}
    session = subprocess.Popen([sys.executable, "-m", "murmur.cli.mur", "run", "--json"], cwd=capsule, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    watch = None
    try:
        assert session.stdout is not None
        ready = json.loads(session.stdout.readline())
        sid = ready["session_id"]
        watch = subprocess.Popen([sys.executable, "-m", "murmur.cli.mur", "watch", sid[-6:]], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert watch.stdout is not None
        first = watch.stdout.readline()
        assert f"ses_…{sid[-4:]} idler  session started: idler@0.1.0 (plan)" in first
        time.sleep(0.3)
        assert watch.poll() is None  # the session still runs: the watch goes on
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=20)
        assert watch.returncode == 130
        assert "Traceback" not in err and "watch stopped (Ctrl-C)" in err
    finally:
        if watch is not None and watch.poll() is None:
            watch.kill()
            watch.communicate()
        os.killpg(session.pid, signal.SIGTERM)
        session.wait(timeout=30)
        if session.stdout is not None:
            session.stdout.close()
    ended = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "watch", sid], env=env, capture_output=True,
                           text=True, timeout=30, check=False)
    assert ended.returncode == 0, ended.stderr
    assert "session ended" in ended.stdout.splitlines()[-1]
