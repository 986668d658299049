"""``mur demo`` end to end: the audit formation against a fixture tree with known contents.

Real processes throughout: mur-roost, the check desk, the formation launcher, three members
and the delegated child. The report is compared with the exact text the fixture must give;
the delegated child's trace and completion.json are read from its directory; the process
table is checked afterwards. Kill scenarios use a ``wc`` that sleeps first (put on PATH), so
the formation is reliably mid-task when the kill lands.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import time
from pathlib import Path

import pytest

from ._demo import (
    demo_env,
    linter,
    linter_version,
    make_fixture,
    ours,
    running_demo,
    slow_bin,
    wait_for_line,
    wait_gone,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RUN_BOUND = 180.0
"""Seconds a whole demo may take on a loaded 2-core CI host."""

REPORT = """\
# Audit of `{tree}`

Formation `{formation}`. This report was assembled by its entry member `lead`
(session {lead}) from the answers of two members and one delegated child.

## Summary

| What | Count |
|---|---|
| Files | 9 |
| Lines | 21 |
| Markers (TODO, FIXME) | 3 |
| Python files | 5 |
| Syntax errors (py_compile) | 1 |
| Lint findings ({lint_tool}) | {lint_count} |

## Inventory

Inventory by member `inventory` (session {inventory}):
- Files: 9 (7 text, 2 binary)
- Lines: 21 (as `wc -l` counts them, in text files only; binary: a NUL byte, as `grep -I` sees it)
- Largest text files (lines):
  - `pkg/app.py`: 6
  - `pkg/util.py`: 5
  - `README.md`: 4
  - `data/table.csv`: 3
  - `pkg/broken.py`: 2
- Markers (TODO, FIXME): 3
  - `README.md:3`: TODO: write the docs
  - `pkg/app.py:5`: # TODO: parse arguments
  - `pkg/util.py:4`: # FIXME: handle errors

## Checks

Checked by `audit-pycheck` (session {child}) with Python {python}, in {child_dir}:
- Python files: 5
- Syntax errors (`python3 -m py_compile`): 1
  - `pkg/broken.py:1`: SyntaxError: invalid syntax
{lint_block}
Delegated by the check desk `audit-desk` (session {desk}) through mur-roost to the child `audit-pycheck` 0.1.0.
Forwarded by member `checker` (session {checker}) to the check desk over loopback HTTP.

## Who did what

- `lead`, the entry member (session {lead}): split the task and called
  `inventory` and `checker` at once, each over its reachability edge with the formation
  token the launcher issued for it; then assembled this report.
- `inventory`, a member (session {inventory}):
  ran find, wc, grep, sort and head over the tree.
- `checker`, a member (session {checker}):
  its door is authenticated, so it cannot delegate; it handed the check to the check desk.
- `audit-desk`, the check desk outside the formation (session {desk}):
  delegated the check through mur-roost to a child capsule.
- `audit-pycheck`, the delegated child (session {child}):
  ran `python3 -m py_compile` over every Python file, and a linter when one was installed.
"""


def lint_expectation() -> tuple[str, str, str]:
    """(summary tool, summary count, the child's lint lines) for the linter this host has."""
    name = linter()
    if name == "none":
        return "no linter", "skipped", "- Lint: skipped (the python3 on PATH has neither pyflakes nor ruff)"
    version = linter_version(name)
    if name == "ruff":
        if version != "ruff 0.17.6":
            pytest.skip(f"the exact lint line is pinned for ruff 0.17.6 (the dev extra), not {version}")
        finding = "  - `pkg/app.py:1:8`: F401 [*] `os` imported but unused"
        how = "ruff check --select F"
    else:
        finding = "  - `pkg/app.py:1:1`: 'os' imported but unused"
        how = "python3 -m pyflakes"
    return version, "1", f"- Lint findings ({version}, `{how}`): 1\n{finding}"


class TestDemoAudit:
    def test_report_numbers_findings_child_and_process_table(self, tmp_path: Path) -> None:
        """The demo's report is exactly right for the fixture, the child ran, nothing is left."""
        tree = make_fixture(tmp_path)
        lint_tool, lint_count, lint_block = lint_expectation()
        with running_demo([str(tree), "--home", str(tmp_path / "demo"), "--json"], tmp_path,
                          demo_env()) as (proc, err_path):
            out, _ = proc.communicate(timeout=RUN_BOUND)
            progress = err_path.read_text()
            assert proc.returncode == 0, progress
            left = wait_gone(str(tmp_path), within=5.0)
        assert left == [], f"processes left behind: {left}"

        summary = json.loads(out)
        sessions = summary["sessions"]
        assert set(sessions) == {"lead", "inventory", "checker", "audit-desk", "audit-pycheck"}
        assert len(set(sessions.values())) == 5
        child_dir = Path(summary["child_dir"])
        expected = REPORT.format(
            tree=tree, formation=summary["formation_id"], lead=sessions["lead"],
            inventory=sessions["inventory"], checker=sessions["checker"], desk=sessions["audit-desk"],
            child=sessions["audit-pycheck"], child_dir=child_dir, python=platform.python_version(),
            lint_tool=lint_tool, lint_count=lint_count, lint_block=lint_block)
        report_path = Path(summary["report"])
        assert report_path.read_text() == expected
        assert report_path == (tmp_path / "demo" / "home" / "records" / str(tmp_path / "demo" / "audit").lstrip("/")
                               / sessions["lead"] / "out" / "result.txt")

        # The delegated child really ran: its directory beneath the desk's, its own trace, its
        # completion (reported by itself, delivered to the desk).
        assert child_dir.parent == tmp_path / "demo" / "desk" / ".murmur" / "children"
        assert child_dir.name.startswith("audit-pycheck-")
        completion = json.loads((child_dir / "completion.json").read_text())
        assert {k: completion[k] for k in ("capsule_name", "capsule_version", "session_id", "status",
                                           "reported_by", "delivered")} == {
            "capsule_name": "audit-pycheck", "capsule_version": "0.1.0",
            "session_id": sessions["audit-pycheck"], "status": "ok", "reported_by": "child",
            "delivered": True}
        trace = [json.loads(line) for line in
                 (child_dir / ".murmur" / sessions["audit-pycheck"] / "trace.jsonl").read_text().splitlines()]
        start = trace[0]
        assert (start["event_type"], start["capsule_name"], start["spawned_by"]) == (
            "session_start", "audit-pycheck", sessions["audit-desk"])
        steps = {r["step"]: r["status"] for r in trace if r["event_type"] == "plan_step"}
        assert steps["syntax"] == "ok" and steps["pyfiles"] == "ok"
        assert [r["exit_status"] for r in trace if r["event_type"] == "task_end"] == ["ok"]
        assert any(r["event_type"] == "shell" and "py_compile" in r["command"] for r in trace)
        assert trace[-1]["event_type"] == "session_end"

        # The desk's trace names the delegation; the members' traces name the formation.
        assert "audit-desk: delegated to audit-pycheck 0.1.0 through mur-roost" in progress
        # Each thing is said once: the call's end, the child's outcome, the desk's two tasks.
        said = progress.splitlines()
        assert said.count("[demo] audit-desk: audit-pycheck answered (the call completed)") == 1
        assert said.count("[demo] audit-desk: audit-pycheck reported its outcome: ok") == 1
        assert sum(line.startswith("[demo] audit-desk: task ok") for line in said) == 1
        assert sum(line.startswith("[demo] audit-desk: completion task (a child's outcome) ok") for line in said) == 1
        assert f"formation {summary['formation_id']} launched" in progress
        assert "mur-roost listening on 127.0.0.1:" in progress and "--spawn-allow audit-desk" in progress
        # --home keeps everything and says how to rerun it.
        assert "export MURMUR_HOME=" + str(tmp_path / "demo" / "home") not in progress  # --json: no script
        assert summary["kept"] is True and (tmp_path / "demo" / "audit" / "roster.yaml").is_file()
        # The audited tree is untouched (no bytecode written into it).
        assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == sorted(
            ["README.md", "pkg/__init__.py", "pkg/app.py", "pkg/broken.py", "pkg/util.py", "data/table.csv",
             "data/blob.bin", "data/image.png", "pkg/odd\nname.py", "__pycache__/app.cpython-311.pyc", ".git/config"])


class TestDemoUnderKill:
    def _start_mid_task(self, tmp_path: Path):  # type: ignore[no-untyped-def]
        tree = make_fixture(tmp_path)
        return running_demo([str(tree), "--home", str(tmp_path / "demo")], tmp_path,
                            demo_env(slow_bin(tmp_path)))

    def test_kill_of_the_launcher_leaves_nothing_within_30s(self, tmp_path: Path) -> None:
        """kill -KILL of the formation launcher mid-task: every process is gone within 30 s."""
        with self._start_mid_task(tmp_path) as (proc, err_path):
            line = wait_for_line(err_path, "formation launcher: pid", proc)
            launcher = int(line.rsplit(" ", 1)[1])
            wait_for_line(err_path, "inventory: took a task", proc)
            assert launcher in ours(str(tmp_path))
            os.kill(launcher, signal.SIGKILL)
            left = wait_gone(str(tmp_path), within=30.0)
            assert left == [], f"left 30 s after the kill: {left}\n{err_path.read_text()}"
            assert proc.wait(timeout=5) == 128 + signal.SIGKILL
            assert "the formation launcher was killed by SIGKILL" in err_path.read_text()

    # In the soak set: test_kill_of_the_demo_removes_its_temporary_directory makes the same
    # kill at the same moment and asserts all of this; the demo's watchdog differs between a
    # --home directory and a temporary one only in removing the latter at the end
    # (murmur.demo.run.DemoRun.start_watchdog, murmur.demo.watchdog.watchdog_main).
    @pytest.mark.soak
    def test_kill_of_the_demo_leaves_nothing_within_30s(self, tmp_path: Path) -> None:
        """kill -KILL of `mur demo` itself mid-task: its watchdog stops every group within 30 s."""
        with self._start_mid_task(tmp_path) as (proc, err_path):
            wait_for_line(err_path, "inventory: took a task", proc)
            proc.kill()
            assert proc.wait(timeout=5) == -signal.SIGKILL
            left = wait_gone(str(tmp_path), within=30.0)
            assert left == [], f"left 30 s after the kill: {left}\n{err_path.read_text()}"

    def _start_mid_task_in_temp(self, tmp_path: Path):  # type: ignore[no-untyped-def]
        """Mid-task, without --home: the demo directory is a temporary one under ``tmp_path``."""
        tree = make_fixture(tmp_path)
        env = demo_env(slow_bin(tmp_path))
        env["TMPDIR"] = str(tmp_path)
        return running_demo([str(tree)], tmp_path, env)

    def test_kill_of_the_demo_removes_its_temporary_directory(self, tmp_path: Path) -> None:
        """kill -KILL of `mur demo`: the watchdog stops everything, then removes the demo directory."""
        with self._start_mid_task_in_temp(tmp_path) as (proc, err_path):
            wait_for_line(err_path, "inventory: took a task", proc)
            assert len(list(tmp_path.glob("mur-demo-*"))) == 1
            proc.kill()
            assert proc.wait(timeout=5) == -signal.SIGKILL
            # the watchdog is among `ours` (its MURMUR_HOME is under tmp_path): it removes the
            # directory before it exits
            left = wait_gone(str(tmp_path), within=30.0)
            assert left == [], f"left 30 s after the kill: {left}\n{err_path.read_text()}"
            assert list(tmp_path.glob("mur-demo-*")) == []

    def test_second_ctrl_c_kills_everything_at_once_then_removes_the_directory(self, tmp_path: Path) -> None:
        """SIGINT twice, 0.05 s apart, to the demo's group: nothing survives the demo's exit."""
        with self._start_mid_task_in_temp(tmp_path) as (proc, err_path):
            wait_for_line(err_path, "audit-pycheck (child): took a task", proc)
            assert len(ours(str(tmp_path))) >= 7  # roost, desk, launcher, 3 members, child, ...
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.05)  # the tester's double Ctrl-C
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=10) == 130
            # no grace period: everything is already gone when the demo exits
            assert ours(str(tmp_path)) == [], err_path.read_text()
            assert list(tmp_path.glob("mur-demo-*")) == []
            assert "second signal: killed every process the demo started" in err_path.read_text()
            # and nothing re-creates it later (a late child would have to be alive to do that)
            assert wait_gone(str(tmp_path), within=1.0) == [] and list(tmp_path.glob("mur-demo-*")) == []

    def test_ctrl_c_stops_everything_in_order(self, tmp_path: Path) -> None:
        """SIGINT mid-task: the demo stops the formation, the desk and mur-roost, and exits 130."""
        with self._start_mid_task(tmp_path) as (proc, err_path):
            wait_for_line(err_path, "inventory: took a task", proc)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
            assert wait_gone(str(tmp_path), within=5.0) == []
            progress = err_path.read_text()
            assert "interrupted by SIGINT" in progress and "stopping the formation" in progress
