"""A capsule's shell steps inside its class, end to end through ``mur run`` (issue 25)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.e2e.sandbox.conftest import backed

from murmur.manifest.model import Containment

pytestmark = pytest.mark.e2e

MANIFEST = "name: fence\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n{floor}  shell:\n    allow: [cat, sh]\n"
PLAN = 'steps:\n  - id: s\n    shell: {argv}\noutput: "{{{{ steps.s.output }}}}"\n'


def _run(tmp_path: Path, argv: list[str], *, floor: str | None = None, flag: str | None = None,
         env: dict[str, str] | None = None) -> tuple[int, str, dict[str, object]]:
    capsule = tmp_path / "capsule"
    capsule.mkdir(exist_ok=True)
    (capsule / "murmur.yaml").write_text(MANIFEST.format(floor=f"  containment: {floor}\n" if floor else ""))
    (capsule / "plan.yaml").write_text(PLAN.format(argv=json.dumps(argv)))
    work = tmp_path / f"work-{len(list(tmp_path.glob('work-*')))}"
    cmd = [sys.executable, "-m", "murmur.cli.mur", "run", "--task", "go", "--workdir", str(work)]
    if flag:
        cmd += ["--containment", flag]
    done = subprocess.run(cmd, cwd=capsule, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    start: dict[str, object] = {}
    for trace in Path(os.environ["MURMUR_HOME"]).rglob("trace.jsonl"):
        if str(work) in str(trace):
            for line in trace.read_text().splitlines():
                record = json.loads(line)
                if record.get("event_type") == "session_start":
                    start = record
    return done.returncode, done.stdout + done.stderr, start


def test_reading_outside_the_grant_succeeds_under_advisory_and_fails_under_scoped(tmp_path: Path) -> None:
    backed(Containment.SCOPED)
    secret = tmp_path / "outside.txt"
    secret.write_text("outside-the-grant\n")
    rc, out, _ = _run(tmp_path, ["cat", str(secret)])
    assert rc == 0 and "outside-the-grant" in out, out
    rc, out, _ = _run(tmp_path, ["cat", str(secret)], floor="scoped")
    assert rc != 0 and "outside-the-grant" not in out
    # the grant sentence first, then what was refused; the terminal's reason is never cut
    assert ("reason: plan step `s` failed: running at containment advisory (`capabilities.containment`, "
            "`mur run --containment`) would allow it, or copying it into the workdir: the scoped sandbox "
            f"refused `{secret}`") in " ".join(out.split()), out
    assert "outside the workdir grant (capabilities.filesystem.scope `.` of" in " ".join(out.split())
    assert "…" not in out, out


def test_under_sealed_a_path_outside_the_root_is_said_to_be_absent(tmp_path: Path) -> None:
    backed(Containment.SEALED)
    secret = tmp_path / "outside.txt"
    secret.write_text("outside-the-grant\n")
    rc, out, _ = _run(tmp_path, ["cat", str(secret)], floor="sealed")
    assert rc != 0 and "outside-the-grant" not in out
    assert (f"the sealed sandbox has no `{secret}`: its root holds only the workdir, the runtime trees, "
            "the fixed /etc grant and /dev") in " ".join(out.split()), out
    rc, out, _ = _run(tmp_path, ["cat", str(secret)])
    assert rc == 0 and "outside-the-grant" in out  # the control


def test_a_capsule_granted_only_sh_cannot_run_ls_through_sh(tmp_path: Path) -> None:
    backed(Containment.SCOPED)
    rc, out, _ = _run(tmp_path, ["sh", "-c", "ls"])
    assert rc == 0, out  # the control: advisory runs it
    rc, out, _ = _run(tmp_path, ["sh", "-c", "ls"], floor="scoped")
    assert rc != 0
    assert ("reason: plan step `s` failed: adding `ls` to capabilities.shell.allow would allow it "
            "(`capabilities.shell.allow: [cat, sh, ls]`): the scoped sandbox refused to run `ls`") in out, out
    # seed 003's message, line for line
    assert ("  [sandbox] `ls` is not in capsule 'fence''s capabilities.shell.allow, so the kernel refused "
            "to exec it.\n"
            "  This is decided when the capsule starts — there is no approval prompt for it.\n"
            "  No capsule or member that 'fence' may call holds `ls`.\n"
            "  To grant it here instead, add `ls` to capabilities.shell.allow in fence's murmur.yaml "
            "(`capabilities.shell.allow: [cat, sh, ls]`), reinstall, and restart the session.") in out, out


@pytest.mark.parametrize("klass", ["scoped", "sealed"])
def test_a_declared_floor_runs_the_shell_step_inside_the_class(tmp_path: Path, klass: str) -> None:
    backed(Containment(klass))
    probe = "cat /etc/hostname >/dev/null 2>&1 && echo etc-readable || echo etc-fenced"
    rc, out, start = _run(tmp_path, ["sh", "-c", probe], floor=klass)
    assert rc == 0 and "etc-fenced" in out, out
    assert start.get("containment_achieved") == klass
    rc, out, _ = _run(tmp_path, ["sh", "-c", probe])
    assert rc == 0 and "etc-readable" in out  # the control


def test_flag_and_parent_class_raise_and_never_lower(tmp_path: Path) -> None:
    backed(Containment.SCOPED)
    _, _, start = _run(tmp_path, ["cat", "/dev/null"], flag="scoped")
    assert start.get("containment_achieved") == "scoped"
    # A delegated child is started with its parent's class as MURMUR_SANDBOX_FLOOR: a child
    # manifest with no floor (or a lower one) runs at its parent's.
    _, _, start = _run(tmp_path, ["cat", "/dev/null"], floor="advisory", env={"MURMUR_SANDBOX_FLOOR": "scoped"})
    assert start.get("containment_achieved") == "scoped"


def test_doctor_prints_the_class_achieved(tmp_path: Path) -> None:
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    (capsule / "murmur.yaml").write_text(MANIFEST.format(floor="  containment: scoped\n"))
    (capsule / "plan.yaml").write_text(PLAN.format(argv='["cat", "/dev/null"]'))
    done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "doctor"], cwd=capsule,
                          capture_output=True, text=True, timeout=60)
    assert "is the highest class this host backs" in done.stdout
    best = done.stdout.split("sandbox: ", 1)[1].split(" ", 1)[0]
    if best == "advisory":
        assert done.returncode == 1 and "E-CAP-003" in done.stdout + done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "sandbox: capsule fence runs at scoped (capabilities.containment: scoped): the kernel holds" \
            in done.stdout, done.stdout
        assert "over the host's filesystem" in done.stdout


def test_doctor_under_sealed_names_the_class_its_source_and_its_root(tmp_path: Path) -> None:
    backed(Containment.SEALED)
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    (capsule / "murmur.yaml").write_text(MANIFEST.format(floor="  containment: scoped\n"))
    (capsule / "plan.yaml").write_text(PLAN.format(argv='["cat", "/dev/null"]'))
    env = {**os.environ, "MURMUR_SANDBOX_CLASS": "sealed"}
    done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "doctor"], cwd=capsule,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("sandbox: capsule fence runs at sealed (MURMUR_SANDBOX_CLASS=sealed): the kernel holds its "
            "commands to its grants (Landlock, seccomp, a network namespace) inside a root of their own: "
            "the workdir, the runtime trees, a fixed /etc and /dev") in done.stdout, done.stdout
    # a host made to lack a mount namespace: the refusal names what raised the class and how to lower it
    done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "doctor"], cwd=capsule, capture_output=True,
                          text=True, timeout=60, env={**env, "MURMUR_SANDBOX_HOST": "no-mountns"})
    assert done.returncode == 1
    assert "the containment class is sealed (MURMUR_SANDBOX_CLASS=sealed), but this host cannot back it" \
        in done.stdout, done.stdout
    assert "unset MURMUR_SANDBOX_CLASS" in done.stdout


@pytest.mark.parametrize("klass", ["scoped", "sealed"])
def test_a_venv_python_granted_by_name_runs_inside_the_class(tmp_path: Path, klass: str) -> None:
    """A venv's ``python3`` is a symlink into a base interpreter elsewhere: granted by name, it
    runs with its real interpreter tree, its standard library and its ``pyvenv.cfg`` (so
    ``sys.prefix`` is the venv), as under advisory."""
    backed(Containment(klass))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    assert (venv / "bin" / "python3").is_symlink()
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    probe = "import sys, json; print('PREFIX=' + sys.prefix, json.dumps([1]))"
    outs = {}
    for run_class in ("advisory", klass):
        (capsule / "murmur.yaml").write_text(
            f"name: fence\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  containment: {run_class}\n"
            "  shell:\n    allow: [python3]\n")
        (capsule / "plan.yaml").write_text(PLAN.format(argv=json.dumps(["python3", "-c", probe])))
        env = {**os.environ, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
        env.pop("MURMUR_SANDBOX_CLASS", None)
        done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "run", "--task", "go", "--workdir",
                               str(tmp_path / f"work-{run_class}")], cwd=capsule, capture_output=True, text=True,
                              timeout=120, env=env)
        outs[run_class] = (done.returncode, done.stdout + done.stderr)
    assert outs["advisory"][0] == 0 and f"PREFIX={venv} [1]" in outs["advisory"][1], outs  # the control
    assert outs[klass][0] == 0 and f"PREFIX={venv} [1]" in outs[klass][1], outs[klass]


def test_a_process_ceiling_refusal_names_the_figure_and_the_key_to_raise(tmp_path: Path) -> None:
    backed(Containment.SCOPED)
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    burst = "i=0; while [ $i -lt 30 ]; do sleep 2 & i=$((i+1)); done; wait; echo all-forked"
    (capsule / "plan.yaml").write_text(PLAN.format(argv=json.dumps(["sh", "-c", burst])))
    outs = {}
    for klass in ("advisory", "scoped"):
        (capsule / "murmur.yaml").write_text(
            f"name: fence\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  containment: {klass}\n"
            "  shell:\n    allow: [sh, sleep]\n  resources:\n    max_processes: 8\n")
        env = {k: v for k, v in os.environ.items() if k != "MURMUR_SANDBOX_CLASS"}
        done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "run", "--task", "go", "--workdir",
                               str(tmp_path / f"work-{klass}")], cwd=capsule, capture_output=True, text=True,
                              timeout=120, env=env)
        outs[klass] = (done.returncode, done.stdout + done.stderr)
    assert outs["advisory"][0] == 0 and "all-forked" in outs["advisory"][1], outs  # the control
    rc, out = outs["scoped"]
    assert rc != 0 and "all-forked" not in out
    assert ("reason: plan step `s` failed: raising capabilities.resources.max_processes (now 8 processes) would "
            "allow it: the process-count ceiling stopped it (a fork failed)") in out, out


def test_a_version_manager_shim_is_told_to_put_the_real_interpreter_first(tmp_path: Path) -> None:
    """``python3`` on PATH is a pyenv-style shim (a bash script that execs its manager's own
    script): under advisory it runs; under scoped the manager's script is refused and the reason
    says what would allow it (no denied-binary message: no grant of the manager would do)."""
    backed(Containment.SCOPED)
    root = tmp_path / "fakeenv"
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    shim = root / "shims" / "python3"
    shim.write_text(f'#!/usr/bin/env bash\nexec "{root}/libexec/pyenv" exec "${{0##*/}}" "$@"\n')
    manager = root / "libexec" / "pyenv"
    manager.write_text('#!/usr/bin/env bash\nshift 2\nexec /usr/bin/python3 "$@"\n')
    for f in (shim, manager):
        f.chmod(0o755)
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3 for the fake manager to run")
    capsule = tmp_path / "capsule"
    capsule.mkdir()
    (capsule / "plan.yaml").write_text(PLAN.format(argv=json.dumps(["python3", "-c", "print('ran-' + 'python')"])))
    outs = {}
    for klass in ("advisory", "scoped"):
        (capsule / "murmur.yaml").write_text(
            f"name: fence\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  containment: {klass}\n"
            "  shell:\n    allow: [python3]\n")
        env = {**{k: v for k, v in os.environ.items() if k != "MURMUR_SANDBOX_CLASS"},
               "PATH": f"{root / 'shims'}:/usr/bin:/bin"}
        done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "run", "--task", "go", "--workdir",
                               str(tmp_path / f"work-{klass}")], cwd=capsule, capture_output=True, text=True,
                              timeout=120, env=env)
        outs[klass] = (done.returncode, done.stdout + done.stderr)
    assert outs["advisory"][0] == 0 and "ran-python" in outs["advisory"][1], outs  # the control
    rc, out = outs["scoped"]
    flat = " ".join(out.split())
    assert rc != 0 and "ran-python" not in out
    assert ("reason: plan step `s` failed: putting the real `python3`'s directory first on PATH "
            f"(`$(pyenv prefix)/bin`, or a venv's bin) would allow it: `python3` on PATH is a pyenv shim ({shim})") \
        in flat, out
    assert "[sandbox]" not in out


def test_under_sealed_the_synthetic_accounts_are_readable(tmp_path: Path) -> None:
    """Sealed: ``/etc/passwd`` and ``/etc/group`` are the root's synthetic ones, and readable
    (``id``, ``getpass`` read them): no host account appears; advisory reads the host's."""
    backed(Containment.SEALED)
    host = Path("/etc/passwd").read_text()
    others = [line.split(":", 1)[0] for line in host.splitlines() if line and not line.startswith("root:")]
    if not others:
        pytest.skip("the host's /etc/passwd names no account but root")
    rc, out, _ = _run(tmp_path, ["cat", "/etc/passwd", "/etc/group"])
    assert rc == 0 and f"{others[0]}:" in out  # the control: the host's accounts
    rc, out, _ = _run(tmp_path, ["cat", "/etc/passwd", "/etc/group"], floor="sealed")
    assert rc == 0, out
    assert "root:x:0:" in out and f"{others[0]}:" not in out, out
