"""Kill scenarios with real `mur run` members (the `mur new --roster` scaffold).

The members are real sessions (``murmur.formation.member.member``: the channel, ``formation_id`` in
the readiness line, the formation lifeline). The launcher side is also proven with the fake
member in the other e2e modules.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._census import Formation
from ._formation import alive, wait_for

pytestmark = [pytest.mark.e2e]


def _mur(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "murmur.cli.mur", *args], cwd=cwd, check=True,
                   capture_output=True, env=env)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`mur new --roster demo`, each member built and installed globally, once for the module:
    the directory holding the project (``demo/``) and the MURMUR_HOME of the installs
    (``home/``). The tests get copies (:func:`demo`); what they test is the launch."""
    root = tmp_path_factory.mktemp("demo-built")
    env = {**os.environ, "MURMUR_HOME": str(root / "home")}
    _mur("new", "--roster", "demo", cwd=root, env=env)
    for member, capsule in (("lead", "demo-lead"), ("worker", "demo-worker")):
        _mur("build", member, cwd=root / "demo", env=env)
        _mur("install", "-g", f"{member}/{capsule}-0.1.0.mur.zip", cwd=root / "demo", env=env)
    return root


@pytest.fixture
def demo(built: Path, tmp_path: Path, murmur_home: Path) -> Path:
    """The built project copied into ``tmp_path``, its members installed in this test's
    MURMUR_HOME: the store copied, each ``installed.json``'s ``source`` naming the copy, as
    `mur install -g` from the copy would have recorded it."""
    demo = tmp_path / "demo"
    shutil.copytree(built / "demo", demo, symlinks=True)
    shutil.copytree(built / "home" / "artifacts", murmur_home / "artifacts", symlinks=True)
    for record in (murmur_home / "artifacts").rglob("installed.json"):
        doc = json.loads(record.read_text())
        doc["source"] = str(demo / Path(doc["source"]).relative_to(built / "demo"))
        record.write_text(json.dumps(doc, indent=2) + "\n")
    return demo


class Real:
    """A real `mur run --roster` with real members; everything is killed at teardown."""

    def __init__(self, demo: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.out = demo.parent / "launcher.out"
        self.err = demo.parent / "launcher.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "murmur.cli.mur", "run", "--roster", str(demo), "--json", *args],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=demo.parent,
                start_new_session=True, env=env,
            )
        self.formation_id: str | None = None
        self.found: Formation | None = None

    def lines(self) -> list[dict[str, object]]:
        return [json.loads(x) for x in self.out.read_text().splitlines() if x.strip()]

    def wait_launched(self, timeout: float = 60.0) -> tuple[dict[str, object], dict[str, object]]:
        wait_for(lambda: len(self.lines()) >= 2 or self.proc.poll() is not None, timeout)
        lines = self.lines()
        assert len(lines) >= 2, self.err.read_text()
        self.formation_id = str(lines[0]["formation_id"])
        self.found = Formation(self.proc.pid, self.formation_id)
        self.found.record()
        return lines[0], lines[1]

    def members(self) -> list[int]:
        """Every process of this formation still alive (members, the starter, children): by
        the tree recorded at launch and by the formation's containment unit."""
        return self.found.left() if self.found is not None else []

    def kill_everything(self) -> None:
        """SIGKILL the launcher and what is left of its formation, but not its janitor (which
        then removes the formation's units)."""
        for pid in [self.proc.pid, *(self.found.to_kill() if self.found is not None else [])]:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def real(demo: Path) -> Iterator[type[Real]]:
    made: list[Real] = []

    class Tracked(Real):
        def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
            super().__init__(demo, *args, env=env)
            made.append(self)

    yield Tracked
    for r in made:
        r.kill_everything()


def _trace_events(records_root: Path, session_id: str) -> list[str]:
    (trace,) = records_root.rglob(f"{session_id}/trace.jsonl")
    return [json.loads(x)["event_type"] for x in trace.read_text().splitlines()]


class TestRealMembers:
    def test_task_end_to_end(self, real: type[Real], murmur_home: Path) -> None:
        """The scaffold runs: the entry calls worker; every member ends; exit 0."""
        run = real("--task", "hello")
        formation, entry = run.wait_launched()
        assert entry["formation_id"] == formation["formation_id"]
        assert run.proc.wait(60) == 0, run.err.read_text()
        assert run.members() == []
        for peer in formation["peers"]:  # type: ignore[attr-defined]
            events = _trace_events(murmur_home / "records", peer["session_id"])
            assert "formation_ended" in events and events[-1] == "session_end"
        # issue 30 item 5: the entry member's row says `(entry)`, and only its row
        shown = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "ps", "--tree"], capture_output=True,
                               text=True, timeout=60, check=True).stdout
        rows = [ln for ln in shown.splitlines() if "(entry)" in ln]
        assert len(rows) == 1 and f"ses_…{str(entry['session_id'])[-4:]}" in rows[0], shown
        doc = json.loads(subprocess.run([sys.executable, "-m", "murmur.cli.mur", "ps", "--tree", "--json"],
                                        capture_output=True, text=True, timeout=60, check=True).stdout)
        (frm,) = [r for r in doc["roots"] if r["id"] == formation["formation_id"]]
        assert [c["lineage"].get("entry", False) for c in frm["children"]].count(True) == 1, frm
        assert all("caps" not in c for c in frm["children"]), frm  # no cap written: none shown

    def test_roster_tree_caps_reach_every_member(self, real: type[Real], demo: Path, murmur_home: Path) -> None:
        """Issue 30 item 3: the roster's `max_tree_total` / `max_same_capsule_chain` keys, tightened
        by `mur run --roster --max-tree-total`, are every member's tree caps (their journal
        start, shown by `mur ps --tree --json`); without them a member shows none."""
        roster = demo / "roster.yaml"
        roster.write_text(roster.read_text() + "max_tree_total: 5\nmax_same_capsule_chain: 2\n")
        run = real("--task", "hello", "--max-tree-total", "3")
        formation, _entry = run.wait_launched()
        assert run.proc.wait(60) == 0, run.err.read_text()
        doc = json.loads(subprocess.run([sys.executable, "-m", "murmur.cli.mur", "ps", "--tree", "--json"],
                                        capture_output=True, text=True, timeout=60, check=True).stdout)
        (frm,) = [r for r in doc["roots"] if r["id"] == formation["formation_id"]]
        assert [c.get("caps") for c in frm["children"]] == [{"max_tree_total": 3, "max_same_capsule_chain": 2}] * 2

    @pytest.mark.parametrize("path", ["warm", "exec"])
    def test_members_show_exactly_their_environment(self, real: type[Real], path: str) -> None:
        """``/proc/<member>/environ`` holds exactly the member's environment on both start
        paths: the launcher's variables a member is not given (``MURMUR_SPAWNER_LIFELINE``)
        are not in it, its own formation's are; ``cmdline`` shows ``mur run --capsule …``."""
        env = dict(os.environ, MURMUR_STARTER="on" if path == "warm" else "off", MURMUR_SPAWNER_LIFELINE="99")
        env.pop("MURMUR_FORMATION_ID", None)
        run = real(env=env)
        formation, entry = run.wait_launched()
        pids = [int(entry["pid"]), *(int(p["pid"]) for p in formation["peers"])]  # type: ignore[attr-defined]
        for pid in pids:
            shown = [x.decode() for x in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if x]
            names = {x.split("=", 1)[0] for x in shown}
            assert "MURMUR_SPAWNER_LIFELINE" not in names, names
            assert f"MURMUR_FORMATION_ID={formation['formation_id']}" in shown
            assert {"MURMUR_FORMATION_CHANNEL", "MURMUR_FORMATION_LIFELINE"} <= names
            assert names <= set(env) | {"MURMUR_FORMATION_ID", "MURMUR_FORMATION_CHANNEL", "MURMUR_FORMATION_LIFELINE",
                                        "MURMUR_HOST_WARNINGS_REPORTED", "MURMUR_CONTAINMENT_UNIT",
                                        "TRACEPARENT"}, names  # the formation's span (spec/trace.md)
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert b"run" in argv and b"--capsule" in argv, argv
            if path == "warm":
                assert argv[:2] == [b"mur", b"run"], argv

    @pytest.mark.parametrize("target", ["launcher", "entry", "group"])
    def test_kill(self, real: type[Real], murmur_home: Path, target: str) -> None:
        """kill -KILL of the launcher, the entry member or the launcher's group: nothing left."""
        run = real()
        formation, entry = run.wait_launched()
        assert run.members()
        t0 = time.monotonic()
        if target == "launcher":
            os.kill(run.proc.pid, signal.SIGKILL)
        elif target == "entry":
            os.kill(int(entry["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
        else:
            os.killpg(run.proc.pid, signal.SIGKILL)
        took = wait_for(lambda: not run.members(), 30.0)
        print(f"\n[kill suite, real members] kill -KILL {target}: nothing left after "
              f"{time.monotonic() - t0:.2f}s")
        assert took < 30.0
        if target == "entry":
            assert run.proc.wait(30) == 137
        for peer in formation["peers"]:  # type: ignore[attr-defined]
            events = _trace_events(murmur_home / "records", peer["session_id"])
            assert events[-1] == "session_end"

    def test_sigterm(self, real: type[Real]) -> None:
        """SIGTERM to the launcher: every lifeline closes; the idle entry ends ok; exit 143."""
        run = real()
        run.wait_launched()
        os.kill(run.proc.pid, signal.SIGTERM)
        assert run.proc.wait(30) == 143
        assert run.members() == []

    def test_deadline_after_entry_started(self, real: type[Real]) -> None:
        """--deadline after the entry started: members end at that moment; exit 1 (E-RUN-053)."""
        # The deadline must fall after the entry started, which a loaded machine may not reach
        # in 6 s: a launch the deadline beat (no entry line) is retried with twice the time.
        for secs in (6, 12, 24, 48):
            run = real("--deadline", f"{secs}s")
            wait_for(lambda r=run: len(r.lines()) >= 2 or r.proc.poll() is not None, 60.0 + secs)
            if len(run.lines()) >= 2:
                break
            assert run.proc.wait(40) == 1 and "E-RUN-053" in run.err.read_text()
            run.kill_everything()
        run.wait_launched()
        assert run.proc.wait(40 + secs) == 1
        assert "E-RUN-053" in run.err.read_text()
        assert run.members() == []


# Fault injection for one member, loaded through PYTHONPATH by every process of the launch but
# active only in the member running $HANG_CAPSULE: once it has written `formation_ended`, its
# event loop blocks for good, so only the session's own 20 s guard can end it.
SITECUSTOMIZE = """
import os, sys
_want = os.environ.get("HANG_CAPSULE")
if _want and "--capsule" in sys.argv and sys.argv[sys.argv.index("--capsule") + 1] == _want:
    import time
    from murmur.session import trace as _trace
    _emit = _trace.TraceWriter.emit
    def emit(self, event_type, /, **kw):
        out = _emit(self, event_type, **kw)
        if event_type == "formation_ended":
            time.sleep(3600)
        return out
    _trace.TraceWriter.emit = emit
"""

MANIFEST = """name: {name}
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: {acceptance}
  after_task: {after}
capabilities:
  shell:
    allow: [echo]
"""
PLAN = """steps:
  - id: answer
    shell: [echo, "done: {{ task }}"]
output: "{{ steps.answer.stdout }}"
"""


def _plan_project(root: Path, names: list[str]) -> Path:
    """A roster of plan capsules (the first is the entry member), installed in the project."""
    proj = root / "proj"
    proj.mkdir()
    lines = ["roster_version: 1", "members:"]
    for i, name in enumerate(names):
        src = root / "src" / name
        src.mkdir(parents=True)
        entry = i == 0
        (src / "murmur.yaml").write_text(MANIFEST.format(
            name=f"r-{name}", acceptance="single" if entry else "queue",
            after="exit" if entry else "sleep"))
        (src / "plan.yaml").write_text(PLAN)
        _mur("build", str(src), cwd=root)
        _mur("install", str(src / f"r-{name}-0.1.0.mur.zip"), cwd=proj)
        lines += [f"  - name: {name}", f"    capsule: local/r-{name}", "    version: 0.1.0"]
        if entry:
            lines.append("    entry: true")
    (proj / "roster.yaml").write_text("\n".join(lines) + "\n")
    return proj


@pytest.mark.slow
class TestRealStubborn:
    def test_teardown_hangs_and_member_stopped(self, tmp_path: Path) -> None:
        """A real member whose teardown hangs exits 143 20 s after its lifeline closed (its
        own guard; no SIGKILL); a real member that cannot run at all (SIGSTOP) is SIGKILLed
        25 s after the launcher closed its lifeline; then the launcher exits 143."""
        proj = _plan_project(tmp_path, ["lead", "hang", "frozen"])
        hook = tmp_path / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        # the fault is injected at interpreter start-up: each member must be a fresh
        # interpreter (the warm starter's members share its start-up; spec/formation.md)
        env = dict(os.environ, HANG_CAPSULE="local/r-hang", MURMUR_STARTER="off",
                   PYTHONPATH=os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]))
        out = tmp_path / "launcher.out"
        with out.open("wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "murmur.cli.mur", "run", "--roster", str(proj), "--json"],
                stdout=fh, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                cwd=tmp_path, start_new_session=True)
        pids: dict[str, int] = {}
        try:
            wait_for(lambda: len(out.read_text().splitlines()) >= 2, 60)
            formation = json.loads(out.read_text().splitlines()[0])
            pids = {p["name"]: p["pid"] for p in formation["peers"]}
            os.kill(pids["frozen"], signal.SIGSTOP)
            t0 = time.monotonic()
            os.kill(proc.pid, signal.SIGTERM)
            hang_gone = wait_for(lambda: not alive(pids["hang"]), 30)
            frozen_gone = wait_for(lambda: not alive(pids["frozen"]), 30)
            status = proc.wait(30)
            total = time.monotonic() - t0
            print(f"\n[kill suite, real members] hanging teardown exited after {hang_gone:.2f}s; "
                  f"stopped member killed after {frozen_gone + hang_gone:.2f}s; launcher {total:.2f}s")
            assert status == 143
            assert 19.5 <= hang_gone <= 23.0  # its own guard, well before the launcher's kill
            assert 24.5 <= frozen_gone + hang_gone <= 29.0
        finally:
            for pid in [proc.pid, *pids.values()]:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            proc.wait(10)
