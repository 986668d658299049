"""Tests of the shipped example formation (murmur/examples/audit): grants, envelope, roster,
and each member's plan run in-process against a fixture tree with known contents."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

import pytest

from e2e._demo import make_fixture
from murmur import registry
from murmur.demo.layout import CAPSULE_DIRS, copy_example, examples_dir, prepare_layout
from murmur.errors import DiagnosticError
from murmur.formation.roster.admission import admit_file, store_resolver
from murmur.manifest.load import load_manifest, parse_manifest
from murmur.plan import PlanWorkload
from murmur.plan.planfile import load_plan
from murmur.roost.envelope import lower, referee
from murmur.workload import TaskContext, TaskOutcome

EXAMPLE = examples_dir()

# capsule dir -> (shell.allow, network.allow, env.allow, spawn.allow, authenticated, serves peers)
GRANTS = {
    "lead": ((), ("127.0.0.1",), (), (), True, False),
    "inventory": (("sh", "find", "cut", "sort", "wc", "grep", "head"), (), (), (), True, True),
    "checker": (("python3",), ("127.0.0.1",), ("AUDIT_DESK_URL",), (), True, True),
    "desk": (("sh", "find", "cut", "sort", "grep", "python3"), (), (), ("audit-pycheck",), False, False),
    "pycheck": (("sh", "find", "cut", "sort", "grep", "python3"), (), (), (), False, False),
}


class TestManifests:
    @pytest.mark.parametrize("name", CAPSULE_DIRS)
    def test_commented_and_loads_with_its_plan(self, name: str) -> None:
        """Each manifest opens with comments a user can copy from, and its plan loads."""
        text = (EXAMPLE / name / "murmur.yaml").read_text()
        assert text.startswith("# audit-") and text.count("#") >= 5
        manifest = load_manifest(EXAMPLE / name)
        assert manifest.name == f"audit-{name}" and manifest.version == "0.1.0"
        load_plan(EXAMPLE / name, manifest)

    @pytest.mark.parametrize("name", CAPSULE_DIRS)
    def test_least_grants(self, name: str) -> None:
        """Each capsule holds exactly the grants the design gives it."""
        m = load_manifest(EXAMPLE / name)
        shell, network, env, spawn, authenticated, serves = GRANTS[name]
        assert (m.shell_allow, m.network_allow, m.env_allow, m.spawn_allow) == (shell, network, env, spawn)
        assert (m.authentication is not None, m.accepts_peer_tasks) == (authenticated, serves)

    @pytest.mark.parametrize("name", ["inventory", "checker", "pycheck"])
    def test_every_shell_grant_is_used(self, name: str) -> None:
        """A capsule that runs commands names every binary it is granted in its plan."""
        plan = (EXAMPLE / name / "plan.yaml").read_text()
        for binary in load_manifest(EXAMPLE / name).shell_allow:
            assert re.search(rf"(^|[\s\[|(]){re.escape(binary)}\b", plan, re.M), binary

    def test_the_delegating_desk_cannot_have_an_authenticated_door(self) -> None:
        """Why the desk is no member: authentication beside spawn.allow is E-MAN-003."""
        text = (EXAMPLE / "desk" / "murmur.yaml").read_text() + "network:\n  authentication:\n    scheme: bearer\n"
        with pytest.raises(DiagnosticError) as info:
            parse_manifest(text, path="murmur.yaml")
        assert [d.code for d in info.value.diagnostics] == ["E-MAN-003"]


class TestEnvelope:
    def test_the_child_passes_and_is_narrower_than_the_desk(self) -> None:
        """mur-roost's referee admits audit-pycheck under audit-desk, and not the reverse."""
        desk = lower(load_manifest(EXAMPLE / "desk"))
        child = lower(load_manifest(EXAMPLE / "pycheck"))
        assert referee(desk, child) is None
        refusal = referee(child, desk)
        assert refusal is not None and refusal.key == "capabilities.spawn.allow"


class TestRoster:
    def test_admitted_with_two_edges_and_no_warning(self, tmp_path: Path) -> None:
        """Installed, the roster admits three members, lead → inventory and lead → checker."""
        layout, _ = prepare_layout(tmp_path / "demo")
        copy_example(layout)  # builds write archives beside the sources: never into the package
        project = layout.project
        for name in CAPSULE_DIRS:
            registry.install(project / name, global_=False, project_dir=project)
        admitted = admit_file(project / "roster.yaml", resolve=store_resolver(project))
        assert [m.name for m in admitted.members] == ["lead", "inventory", "checker"]
        assert admitted.entry.name == "lead"
        assert [(e.caller, e.callee) for e in admitted.edges] == [("lead", "inventory"), ("lead", "checker")]
        assert admitted.warnings == ()


class _Trace:
    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        self.records.append({"event_type": event_type, **fields})
        return f"evt_{len(self.records)}"


def _ctx(tmp_path: Path, name: str, text: str) -> TaskContext:
    records = tmp_path / "records"
    (records / "tmp").mkdir(parents=True, exist_ok=True)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    return TaskContext(
        session_id="ses_" + "1" * 32, task_id="tsk_" + "2" * 32, context_id="ctx_" + "3" * 32,
        text=text, origin="peer", trust="trusted", manifest=load_manifest(EXAMPLE / name),
        capsule_root=EXAMPLE / name, workdir=tmp_path, records_dir=records, trace=_Trace(),
        task_event_id="evt_0", shell_env={"PATH": path, "TMPDIR": str(records / "tmp"), "HOME": str(records)})


async def _run(tmp_path: Path, name: str, text: str) -> TaskOutcome:
    manifest = load_manifest(EXAMPLE / name)
    return await PlanWorkload(load_plan(EXAMPLE / name, manifest), EXAMPLE / name).run_task(_ctx(tmp_path, name, text))


class TestPlans:
    async def test_inventory_of_the_fixture(self, tmp_path: Path) -> None:
        """The inventory plan counts files and lines, ranks files and lists markers exactly.

        A binary file counts as a file but has no lines (and is never "largest"); a newline in
        a file's name makes neither two files nor a phantom one."""
        tree = make_fixture(tmp_path)
        out = await _run(tmp_path, "inventory", f"inventory {tree}")
        assert out == TaskOutcome("ok", f"""\
Inventory by member `inventory` (session ses_{'1' * 32}):
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
  - `pkg/util.py:4`: # FIXME: handle errors""")

    async def test_inventory_of_a_missing_directory_fails(self, tmp_path: Path) -> None:
        """A path that is not a directory fails the task (it never audits the workdir instead)."""
        out = await _run(tmp_path, "inventory", f"inventory {tmp_path / 'missing'}")
        assert out.status == "failed" and "plan step" in out.answer

    async def test_checks_of_the_fixture(self, tmp_path: Path) -> None:
        """The check plan compiles every Python file and names the one that does not compile.

        The file whose name holds a newline is one Python file that compiles: no phantom
        finding for either half of its name."""
        tree = make_fixture(tmp_path)
        out = await _run(tmp_path, "pycheck", f"check {tree}")
        assert out.status == "ok", out.answer
        head, _, lint = out.answer.partition("- Syntax errors")
        assert head == (f"Checked by `audit-pycheck` (session ses_{'1' * 32}) with Python "
                        f"{platform.python_version()}, in {tmp_path}:\n- Python files: 5\n")
        syntax, _, lint = ("- Syntax errors" + lint).partition("\n- Lint")
        assert syntax == "- Syntax errors (`python3 -m py_compile`): 1\n  - `pkg/broken.py:1`: SyntaxError: invalid syntax"
        if importlib.util.find_spec("pyflakes") is None and importlib.util.find_spec("ruff") is None:
            assert lint == ": skipped (the python3 on PATH has neither pyflakes nor ruff)"
        else:
            assert lint.startswith(" findings (") and lint.endswith("imported but unused")
            assert "pkg/app.py:1:" in lint and lint.count("\n  - ") == 1
        assert not list(tree.rglob("*.cpython-311.pyc"))[1:], "no bytecode is written into the tree"

    async def test_desk_refuses_what_is_not_a_check(self, tmp_path: Path) -> None:
        """The desk's public door starts no child for a task that is not `check /path`."""
        out = await _run(tmp_path, "desk", "rm -rf /")
        assert out.status == "ok"
        assert out.answer.startswith('nothing checked: the check desk takes "check /absolute/path"')
