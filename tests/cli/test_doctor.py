"""`mur doctor` (and `mur new --roster`) through the real `mur` executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from murmur.containment.host import detect

MUR = str(Path(sys.executable).parent / "mur")

def _lines(stdout: str) -> list[str]:
    """The report without its sandbox lines (tests/e2e/sandbox checks those)."""
    return [line for line in stdout.splitlines() if not line.startswith("sandbox: ")]



def mur(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MUR, *args], cwd=cwd, env=dict(env or os.environ), text=True,
                          capture_output=True, timeout=60, check=False)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stderr
    return proc


PLAN = 'steps:\n  - id: a\n    shell: [echo, "{{ task }}"]\noutput: "{{ steps.a.stdout }}"\n'


def capsule(root: Path, name: str, *, lifecycle: str, serves: bool = True) -> Path:
    d = root / name
    d.mkdir()
    text = (f"name: {name}\nversion: 1.0.0\nplan: plan.yaml\nlifecycle:\n{lifecycle}"
            "capabilities:\n  shell:\n    allow: [echo]\n  network:\n    allow: [localhost]\n"
            "network:\n  authentication:\n    scheme: bearer\n")
    if serves:
        text += "exports:\n  peer_tasks:\n    accept: true\n"
    (d / "murmur.yaml").write_text(text)
    (d / "plan.yaml").write_text(PLAN)
    return d


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`mur new --roster demo`, then build and install each member globally (once)."""
    root = tmp_path_factory.mktemp("doctor")
    env = dict(os.environ, MURMUR_HOME=str(root / "home"))
    ok(mur("new", "--roster", "demo", cwd=root, env=env))
    project = root / "demo"
    for member in ("lead", "worker"):
        ok(mur("build", member, cwd=project, env=env))
        ok(mur("install", "-g", f"{member}/demo-{member}-0.1.0.mur.zip", cwd=project, env=env))
    return project, env


class TestScaffoldAdmitted:
    def test_admitted_as_written(self, demo: tuple[Path, dict[str, str]]) -> None:
        """The `mur new --roster` roster is admitted after build + install, with its report."""
        project, env = demo
        proc = ok(mur("doctor", "--roster", "demo", cwd=project.parent, env=env))
        assert _lines(proc.stdout) == [
            "roster: demo/roster.yaml",
            "  lead local/demo-lead@0.1.0 entry refuses peers authenticated door",
            "  worker local/demo-worker@0.1.0 serves peers authenticated door",
            "  reachability: lead → worker",
            "  ✓ admitted: 2 members, 1 edge",
            detect(probe=True).doctor_line(),
            *detect(probe=True).doctor_notes(),
        ]
        assert proc.stderr == ""

    def test_teardown_class_named(self, demo: tuple[Path, dict[str, str]]) -> None:
        """The teardown class is named, in text and JSON, and the groups class says its limit."""
        project, env = demo
        forced = ok(mur("doctor", "--roster", cwd=project, env={**env, "MURMUR_CONTAINMENT": "groups"}))
        assert _lines(forced.stdout)[-1].startswith(
            "teardown: process groups (a process that leaves its group can outlive a SIGKILLed session"
        )
        report = json.loads(ok(mur("doctor", "--roster", "--json", cwd=project, env=env)).stdout)
        host = detect(probe=True)
        assert report["teardown"] == {"class": host.name, "detail": host.why, "favordynmods": host.dynmods}
        if host.name == "cgroup":
            plain = ok(mur("doctor", "--roster", cwd=project, env=env))
            notes = host.doctor_notes()
            assert _lines(plain.stdout)[-1 - len(notes):] == [
                "teardown: cgroup v2 (every process a session starts is contained)", *notes]

    def test_json(self, demo: tuple[Path, dict[str, str]]) -> None:
        """--json prints one object: members, sha256, callees, edges, no warnings."""
        project, env = demo
        proc = ok(mur("doctor", "--roster", "--json", cwd=project, env=env))
        report = json.loads(proc.stdout)
        assert report["ok"] is True and report["capsule"] is None
        roster = report["roster"]
        assert [m["name"] for m in roster["members"]] == ["lead", "worker"]
        assert roster["members"][0]["callees"] == ["worker"] and roster["members"][0]["entry"]
        assert all(len(m["sha256"]) == 64 for m in roster["members"])
        assert roster["edges"] == [{"from": "lead", "to": "worker"}]
        assert roster["warnings"] == []

    def test_bare_doctor_in_roster_dir(self, demo: tuple[Path, dict[str, str]]) -> None:
        """`mur doctor` with no flags admits ./roster.yaml."""
        project, env = demo
        proc = ok(mur("doctor", cwd=project, env=env))
        assert _lines(proc.stdout)[0] == "roster: roster.yaml"

    def test_capsule_only(self, demo: tuple[Path, dict[str, str]]) -> None:
        """In a capsule directory, doctor loads murmur.yaml and reports it."""
        project, env = demo
        proc = ok(mur("doctor", cwd=project / "worker", env=env))
        assert _lines(proc.stdout) == [
            "capsule: murmur.yaml", "  ✓ demo-worker 0.1.0 serves peers authenticated door",
            detect(probe=True).doctor_line(), *detect(probe=True).doctor_notes()]

    def test_roster_file_path(self, demo: tuple[Path, dict[str, str]]) -> None:
        """--roster accepts the roster.yaml itself."""
        project, env = demo
        ok(mur("doctor", "--roster", str(project / "roster.yaml"), cwd=project.parent, env=env))


class TestRefusals:
    def test_structural_fault_nothing_installed(self, tmp_path: Path) -> None:
        """A roster with a rule naming no member: exit 1, E-ROS-004 at its line."""
        (tmp_path / "roster.yaml").write_text(
            "roster_version: 1\nmembers:\n  - {name: a, capsule: local/a, version: '1', entry: true}\n"
            "reachability:\n  - from: a\n    to: [ghost]\n")
        proc = mur("doctor", "--roster", ".", cwd=tmp_path)
        assert proc.returncode == 1
        assert _lines(proc.stdout)[1].startswith("  ✗ error[E-ROS-004]: roster.yaml: ")
        assert "  --> roster.yaml:6" in proc.stderr
        assert "Traceback" not in proc.stderr

    def test_not_installed_json(self, tmp_path: Path) -> None:
        """A member not installed: exit 1, the JSON names E-ROS-007 and the line."""
        (tmp_path / "roster.yaml").write_text(
            "roster_version: 1\nmembers:\n  - {name: a, capsule: local/a, version: '1', entry: true}\n")
        proc = mur("doctor", "--json", cwd=tmp_path)
        assert proc.returncode == 1
        report = json.loads(proc.stdout)
        assert report["ok"] is False and report["roster"]["admitted"] is False
        d = report["roster"]["diagnostics"][0]
        assert (d["code"], d["line"]) == ("E-ROS-007", 3)

    def test_other_file_name(self, tmp_path: Path) -> None:
        """--roster naming another file is E-ROS-001, also in JSON."""
        (tmp_path / "team.yaml").write_text("x: 1\n")
        proc = mur("doctor", "--roster", "team.yaml", "--json", cwd=tmp_path)
        assert proc.returncode == 1
        assert json.loads(proc.stdout)["roster"]["diagnostics"][0]["code"] == "E-ROS-001"

    def test_nothing_to_check(self, tmp_path: Path) -> None:
        """No roster.yaml or murmur.yaml: exit 1 with E-IO-001."""
        proc = mur("doctor", cwd=tmp_path)
        assert proc.returncode == 1 and "error[E-IO-001]" in proc.stderr

    @pytest.mark.parametrize("kind", ["fifo", "directory"])
    def test_roster_that_is_not_a_file_is_named(self, tmp_path: Path, kind: str) -> None:
        """A roster.yaml that is a FIFO or a directory is checked and refused by name, never
        reported as "nothing to check" (and the FIFO is never opened: no hang)."""
        os.mkfifo(tmp_path / "roster.yaml") if kind == "fifo" else (tmp_path / "roster.yaml").mkdir()
        proc = mur("doctor", cwd=tmp_path)
        assert proc.returncode == 1 and "E-IO-001" not in proc.stderr
        assert f"roster.yaml cannot be read: it is a {'FIFO' if kind == 'fifo' else 'directory'}" in proc.stderr

    def test_broken_manifest(self, tmp_path: Path) -> None:
        """A capsule whose murmur.yaml is invalid: exit 1, its E-MAN diagnostic."""
        (tmp_path / "murmur.yaml").write_text("name: x\n")
        proc = mur("doctor", cwd=tmp_path)
        assert proc.returncode == 1
        assert "✗ error[E-MAN-" in proc.stdout and "error[E-MAN-" in proc.stderr


TR_PLAN = 'steps:\n  - id: a\n    shell: [tr, a, b]\noutput: "{{ steps.a.stdout }}"\n'


class TestPlans:
    def test_capsule_plan_run_would_refuse(self, tmp_path: Path) -> None:
        """A capsule whose plan uses an ungranted binary: ✗ E-PLN-006, exit 1 (as `mur run`)."""
        d = capsule(tmp_path, "cap", lifecycle="  task_acceptance: single\n")
        (d / "plan.yaml").write_text(TR_PLAN)
        proc = mur("doctor", cwd=d)
        assert proc.returncode == 1
        assert "  ✗ error[E-PLN-006]" in proc.stdout and "✓" not in proc.stdout
        assert "error[E-PLN-006]" in proc.stderr

    def test_capsule_invalid_yaml_plan_json(self, tmp_path: Path) -> None:
        """An invalid-YAML plan: --json reports ok false with E-PLN-002."""
        d = capsule(tmp_path, "cap", lifecycle="  task_acceptance: single\n")
        (d / "plan.yaml").write_text("steps: [\n")
        proc = mur("doctor", "--json", cwd=d)
        assert proc.returncode == 1
        report = json.loads(proc.stdout)
        assert report["ok"] is False and report["capsule"]["ok"] is False
        assert report["capsule"]["diagnostics"][0]["code"] == "E-PLN-002"

    def test_member_installed_plan_checked(self, tmp_path: Path) -> None:
        """A member whose installed plan `mur run` would refuse: ✗ <member>: E-PLN, exit 1."""
        env = dict(os.environ, MURMUR_HOME=str(tmp_path / "home"))
        capsule(tmp_path, "solo", lifecycle="  task_acceptance: single\n")
        ok(mur("install", "-g", "solo", cwd=tmp_path, env=env))
        installed = tmp_path / "home" / "artifacts" / "local" / "solo" / "1.0.0" / "root"
        (installed / "plan.yaml").write_text(TR_PLAN)
        (tmp_path / "roster.yaml").write_text(
            "roster_version: 1\nmembers:\n"
            "  - {name: solo, capsule: local/solo, version: 1.0.0, entry: true}\n")
        proc = mur("doctor", "--roster", ".", cwd=tmp_path, env=env)
        assert proc.returncode == 1, proc.stdout
        assert "  ✗ solo: error[E-PLN-006]" in proc.stdout
        assert _lines(proc.stdout)[-2 - len(detect(probe=True).doctor_notes())].startswith(
            "  ✗ admitted, but 1 member plan")


class TestWarning:
    def test_w_ros_001_reported_exit_0(self, tmp_path: Path) -> None:
        """Three callers into a single-task member: W-ROS-001 line and Fix:, still exit 0."""
        single = "  task_acceptance: single\n  after_task: exit\n"
        queue = "  task_acceptance: queue\n  queue_depth: 4\n  after_task: sleep\n"
        capsule(tmp_path, "lead", lifecycle=single, serves=False)
        for name in ("a", "b"):
            capsule(tmp_path, name, lifecycle=queue)
        capsule(tmp_path, "target", lifecycle=single)
        for name in ("lead", "a", "b", "target"):
            ok(mur("install", "-g", name, cwd=tmp_path))
        (tmp_path / "roster.yaml").write_text(
            "roster_version: 1\nmembers:\n"
            "  - {name: lead, capsule: local/lead, version: 1.0.0, entry: true}\n"
            "  - {name: a, capsule: local/a, version: 1.0.0}\n"
            "  - {name: b, capsule: local/b, version: 1.0.0}\n"
            "  - {name: target, capsule: local/target, version: 1.0.0}\n"
            "reachability: all\n")
        proc = ok(mur("doctor", "--roster", cwd=tmp_path))
        warning = ("  ⚠ warning[W-ROS-001]: roster.yaml lets 2 members call 'target' (a, b), "
                   "but it holds 1 task at once (lifecycle.task_acceptance: single) so a call "
                   "arriving while it is busy is rejected; lifecycle.task_acceptance: queue with "
                   "lifecycle.queue_depth: 1 would hold them all "
                   "(https://docs.murmur.nexus/reference/diagnostics/#w-ros-001)")
        assert warning in _lines(proc.stdout)
        assert "    Fix: target (local/target@1.0.0): set lifecycle.task_acceptance: queue" in proc.stdout
        assert ("  reachability: a → b, a → target, b → a, b → target, target → a, target → b"
                in _lines(proc.stdout))


class TestContainmentVariable:
    def test_unknown_value_refused_by_doctor_and_run(self, demo: tuple[Path, dict[str, str]]) -> None:
        """A MURMUR_CONTAINMENT naming no class is E-RUN-011 (doctor: exit 1; run: exit 2)."""
        project, env = demo
        bad = {**env, "MURMUR_CONTAINMENT": "group"}
        proc = mur("doctor", "--roster", cwd=project, env=bad)
        assert proc.returncode == 1 and "error[E-RUN-011]" in proc.stderr
        proc = mur("run", "--roster", str(project), "--task", "x", cwd=project, env=bad)
        assert proc.returncode == 2 and "error[E-RUN-011]" in proc.stderr
        for ok_value in ("auto", "GROUPS", " groups "):
            assert mur("doctor", "--roster", cwd=project, env={**env, "MURMUR_CONTAINMENT": ok_value}).returncode == 0
