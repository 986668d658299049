"""Tests of plan loading: the schema, grants, the graph, and coded diagnostics with lines."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.manifest.model import Capabilities, Manifest, ShellCaps, SpawnCaps
from murmur.plan import load_plan, parse_plan
from murmur.plan.steps import (
    CapsuleAction,
    MemberAction,
    OnError,
    ShellAction,
    TemplateAction,
    WriteAction,
)

MANIFEST = Manifest(
    name="demo",
    version="0.1.0",
    plan="plan.yaml",
    capabilities=Capabilities(
        shell=ShellCaps(allow=("echo", "wc", "find", "sh")),
        spawn=SpawnCaps(allow=("local/helper",)),
    ),
)


def parse(text: str, manifest: Manifest = MANIFEST):  # type: ignore[no-untyped-def]
    return parse_plan(textwrap.dedent(text), manifest, path="caps/plan.yaml")


def refusal(text: str, manifest: Manifest = MANIFEST) -> DiagnosticError:
    with pytest.raises(DiagnosticError) as info:
        parse(text, manifest)
    return info.value


def codes_lines(err: DiagnosticError) -> list[tuple[str, int | None]]:
    return [(d.code, d.location.line if d.location else None) for d in err.diagnostics]


class TestAccepted:
    def test_scaffold_plan(self) -> None:
        """The `mur new` scaffold's one-step plan loads."""
        plan = parse(
            """\
            steps:
              - id: answer
                shell: [echo, "received: {{ task }}"]
            output: "{{ steps.answer.stdout }}"
            """
        )
        (step,) = plan.steps
        assert step.id == "answer" and step.kind == "shell" and step.line == 2
        assert isinstance(step.action, ShellAction) and step.action.binary == "echo"
        assert plan.output.steps == {"answer"}

    def test_every_kind_and_option(self) -> None:
        """All five kinds, depends_on, if, on_error, retries, timeout load."""
        plan = parse(
            """\
            description: everything
            steps:
              - id: count
                shell: [wc, -l, 3]
                retries: 2
                timeout: 1.5
              - id: ask
                capsule: local/helper
                version: 0.2.0
                task: "summarise {{ steps.count.stdout }}"
                depends_on: [count]
                on_error: continue
              - id: call
                member: reviewer
                task: "{{ task }}"
                if: "{{ task }} contains review"
              - id: report
                template: |
                  # Report
                  {{ steps.ask.output }}
                depends_on: [ask]
              - id: save
                write: {path: out/report.md, content: "{{ steps.report.output }}"}
                depends_on: [report]
            output: "{{ steps.save.output }}"
            """
        )
        kinds = [(s.id, s.kind) for s in plan.steps]
        assert kinds == [("count", "shell"), ("ask", "capsule"), ("call", "member"), ("report", "template"), ("save", "write")]
        count, ask, call, report, save = plan.steps
        assert (count.retries, count.timeout) == (2, 1.5)
        assert [t.source for t in count.action.argv] == ["wc", "-l", "3"]  # type: ignore[union-attr]
        assert isinstance(ask.action, CapsuleAction) and ask.action.version == "0.2.0"
        assert ask.on_error is OnError.CONTINUE and ask.depends_on == ("count",)
        assert isinstance(call.action, MemberAction) and call.condition is not None
        assert isinstance(report.action, TemplateAction)
        assert isinstance(save.action, WriteAction)


class TestRefused:
    def test_not_yaml(self) -> None:
        """Broken YAML is E-PLN-002 at its line."""
        err = refusal("steps: [\n  - id: a\nx: : y\n")
        assert err.code == "E-PLN-002"
        assert err.diagnostics[0].location is not None and err.diagnostics[0].location.line

    def test_not_mapping(self) -> None:
        """A plan that is a list is E-PLN-002."""
        assert refusal("- a\n- b\n").code == "E-PLN-002"

    def test_duplicate_yaml_key(self) -> None:
        """A key written twice is E-PLN-002, not silently merged."""
        err = refusal('steps:\n  - id: a\n    template: x\noutput: a\noutput: b\n')
        assert codes_lines(err) == [("E-PLN-002", 5)]

    def test_unknown_keys_and_missing_output(self) -> None:
        """Unknown keys are named at their lines; missing output is reported too."""
        err = refusal(
            """\
            steps:
              - id: a
                template: x
                retry: 2
            extra: 1
            """
        )
        assert ("E-PLN-002", 4) in codes_lines(err)
        assert ("E-PLN-002", 5) in codes_lines(err)
        assert any("no `output`" in d.message for d in err.diagnostics)

    def test_empty_steps(self) -> None:
        """A plan without steps is refused."""
        assert refusal("steps: []\noutput: x\n").code == "E-PLN-002"

    def test_duplicate_ids(self) -> None:
        """A step id declared twice is E-PLN-003 at the second step, naming the first line."""
        err = refusal(
            """\
            steps:
              - id: a
                template: x
              - id: a
                template: y
            output: x
            """
        )
        assert codes_lines(err) == [("E-PLN-003", 4)]
        assert "first on line 2" in err.diagnostics[0].message

    @pytest.mark.parametrize("bad", ["1abc", "a b", "", "x" * 65])
    def test_malformed_id(self, bad: str) -> None:
        """Malformed ids are E-PLN-003."""
        assert refusal(f'steps:\n  - id: "{bad}"\n    template: x\noutput: x\n').code == "E-PLN-003"

    def test_no_action_or_two(self) -> None:
        """A step needs exactly one action (E-PLN-004)."""
        err = refusal(
            """\
            steps:
              - id: a
              - id: b
                template: x
                shell: [echo]
            output: x
            """
        )
        assert codes_lines(err) == [("E-PLN-004", 2), ("E-PLN-004", 3)]

    def test_unknown_dependency(self) -> None:
        """depends_on naming no step is E-PLN-005 with the declared ids."""
        err = refusal("steps:\n  - id: a\n    template: x\n    depends_on: [zz]\noutput: x\n")
        assert codes_lines(err) == [("E-PLN-005", 2)]
        assert err.diagnostics[0].hint == "declared steps: a"

    def test_unknown_dependency_reported_beside_other_faults(self) -> None:
        """An unknown dependency is reported even when another step is invalid."""
        err = refusal(
            """\
            steps:
              - id: a
                shell: [rm]
              - id: b
                template: x
                depends_on: [a, zz]
            output: x
            """
        )
        assert codes_lines(err) == [("E-PLN-006", 3), ("E-PLN-005", 4)]

    def test_self_dependency(self) -> None:
        """A step depending on itself is E-PLN-005."""
        assert refusal("steps:\n  - id: a\n    template: x\n    depends_on: [a]\noutput: x\n").code == "E-PLN-005"

    def test_cycle(self) -> None:
        """A cycle is E-PLN-005 naming its path."""
        err = refusal(
            """\
            steps:
              - id: a
                template: x
                depends_on: [c]
              - id: b
                template: x
                depends_on: [a]
              - id: c
                template: x
                depends_on: [b]
            output: x
            """
        )
        assert err.code == "E-PLN-005"
        assert "a -> c -> b -> a" in err.diagnostics[0].message

    def test_binary_not_allowed_names_grant(self) -> None:
        """A shell binary outside shell.allow is E-PLN-006 with the grant in the hint."""
        err = refusal("steps:\n  - id: a\n    shell: [rm, -rf, x]\noutput: x\n")
        assert codes_lines(err) == [("E-PLN-006", 3)]
        assert err.diagnostics[0].hint == (
            "add it to murmur.yaml: `capabilities.shell.allow: [echo, wc, find, sh, rm]`, or send "
            "the work to a member or capsule that holds it (`mur agent who --can rm`)")

    def test_no_shell_block_at_all(self) -> None:
        """Without a shell block every shell step is refused."""
        bare = Manifest(name="d", version="0.1.0", plan="plan.yaml")
        assert refusal("steps:\n  - id: a\n    shell: [echo]\noutput: x\n", bare).code == "E-PLN-006"

    def test_binary_path_or_template(self) -> None:
        """A path or a templated binary is E-PLN-006."""
        assert refusal("steps:\n  - id: a\n    shell: [/bin/echo]\noutput: x\n").code == "E-PLN-006"
        assert refusal('steps:\n  - id: a\n    shell: ["{{ task }}"]\noutput: x\n').code == "E-PLN-006"

    def test_shell_string_refused(self) -> None:
        """A command line string instead of argv is E-PLN-002 with a hint."""
        err = refusal('steps:\n  - id: a\n    shell: "echo hi"\noutput: x\n')
        assert err.code == "E-PLN-002" and "argv" in err.diagnostics[0].message

    def test_capsule_not_granted(self) -> None:
        """A capsule step outside spawn.allow is E-PLN-007 naming the grant."""
        err = refusal("steps:\n  - id: a\n    capsule: local/other\n    version: 1.0.0\n    task: x\noutput: x\n")
        assert codes_lines(err) == [("E-PLN-007", 3)]
        assert "capabilities.spawn.allow: [local/helper, local/other]" in (err.diagnostics[0].hint or "")

    @pytest.mark.parametrize("version", ["latest", '""', None])
    def test_capsule_version_exact(self, version: str | None) -> None:
        """A capsule step needs an exact version (not a reserved word)."""
        vline = f"    version: {version}\n" if version is not None else ""
        err = refusal(f"steps:\n  - id: a\n    capsule: local/helper\n{vline}    task: x\noutput: x\n")
        assert err.code == "E-PLN-007"

    def test_task_on_wrong_kind(self) -> None:
        """`task` on a shell step is refused."""
        assert refusal("steps:\n  - id: a\n    shell: [echo]\n    task: x\noutput: x\n").code == "E-PLN-002"

    def test_bad_options(self) -> None:
        """on_error, retries and timeout values are checked."""
        err = refusal(
            """\
            steps:
              - id: a
                template: x
                on_error: ignore
                retries: -1
                timeout: 0
            output: x
            """
        )
        assert codes_lines(err) == [("E-PLN-002", 4), ("E-PLN-002", 5), ("E-PLN-002", 6)]

    def test_template_errors(self) -> None:
        """Malformed templates and conditions are E-PLN-008 at their keys."""
        err = refusal(
            """\
            steps:
              - id: a
                template: "{{ tsk }}"
              - id: b
                template: x
                if: "{{ task }}==1"
            output: "{{ task"
            """
        )
        assert codes_lines(err) == [("E-PLN-008", 3), ("E-PLN-008", 6), ("E-PLN-008", 7)]

    def test_reads_step_without_depending(self) -> None:
        """A template reading a step it does not depend on is E-PLN-008 with a hint."""
        err = refusal(
            """\
            steps:
              - id: a
                template: x
              - id: b
                shell: [echo, "{{ steps.a.stdout }}"]
            output: "{{ steps.b.stdout }} {{ steps.zz.stdout }}"
            """
        )
        assert codes_lines(err) == [("E-PLN-008", 4), ("E-PLN-008", 6)]
        assert err.diagnostics[0].hint == "add `depends_on: [a]` so `a` finishes first"

    def test_transitive_reads_allowed(self) -> None:
        """Reading an indirect ancestor is fine."""
        parse(
            """\
            steps:
              - id: a
                template: x
              - id: b
                template: y
                depends_on: [a]
              - id: c
                template: "{{ steps.a.output }}"
                depends_on: [b]
            output: x
            """
        )

    @pytest.mark.parametrize("path", ["/etc/passwd", "../up.md", "a/../../b", "."])
    def test_write_path(self, path: str) -> None:
        """A literal write path that is absolute or leaves the workdir is E-PLN-009."""
        err = refusal(f'steps:\n  - id: a\n    write: {{path: "{path}", content: x}}\noutput: x\n')
        assert err.code == "E-PLN-009"

    @pytest.mark.parametrize("codes", ["[]", "[256]", "[true]", "0", "[a]"])
    def test_ok_exit_codes(self, codes: str) -> None:
        """ok_exit_codes must be a non-empty list of 0-255."""
        err = refusal(f"steps:\n  - id: a\n    shell: [echo]\n    ok_exit_codes: {codes}\noutput: x\n")
        assert codes_lines(err) == [("E-PLN-002", 4)]

    def test_ok_exit_codes_only_on_shell(self) -> None:
        """ok_exit_codes belongs to shell steps."""
        assert refusal("steps:\n  - id: a\n    template: x\n    ok_exit_codes: [1]\noutput: x\n").code == "E-PLN-002"

    def test_write_shape(self) -> None:
        """`write` needs exactly path and content."""
        assert refusal("steps:\n  - id: a\n    write: {path: x}\noutput: x\n").code == "E-PLN-002"

    def test_rendered_location(self) -> None:
        """Diagnostics render with the plan path and line."""
        err = refusal("steps:\n  - id: a\n    shell: [rm]\noutput: x\n")
        assert err.diagnostics[0].render().splitlines()[1] == "  --> caps/plan.yaml:3"


class TestScaffolds:
    def test_capsule_scaffold_plan_loads(self) -> None:
        """The `mur new` scaffold's plan loads against its own manifest."""
        from murmur.manifest.load import parse_manifest
        from murmur.manifest.scaffold import capsule_files

        files = capsule_files("demo")
        manifest = parse_manifest(files["murmur.yaml"], path="murmur.yaml")
        plan = parse_plan(files[manifest.plan or ""], manifest)
        assert [s.kind for s in plan.steps] == ["shell"]

    def test_roster_scaffold_plans_load(self) -> None:
        """Both members of the roster scaffold have plans that load."""
        from murmur.formation.roster.roster_scaffold import roster_files
        from murmur.manifest.load import parse_manifest

        files = roster_files("team")
        for member in ("lead", "worker"):
            manifest = parse_manifest(files[f"{member}/murmur.yaml"], path="murmur.yaml")
            parse_plan(files[f"{member}/{manifest.plan}"], manifest)


class TestLoadPlan:
    def test_reads_file(self, tmp_path: Path) -> None:
        """load_plan reads the file the manifest names."""
        (tmp_path / "plan.yaml").write_text("steps:\n  - id: a\n    template: hi\noutput: x\n")
        plan = load_plan(tmp_path, MANIFEST)
        assert plan.path == str(tmp_path / "plan.yaml")

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing plan file is E-PLN-001."""
        with pytest.raises(DiagnosticError) as info:
            load_plan(tmp_path, MANIFEST)
        assert info.value.code == "E-PLN-001" and "does not exist" in str(info.value)

    @pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
    def test_not_a_regular_file(self, tmp_path: Path, kind: str) -> None:
        """A plan that is a FIFO or /dev/zero is E-PLN-001 naming the path; nothing is read."""
        p = tmp_path / "plan.yaml"
        os.mkfifo(p) if kind == "fifo" else p.symlink_to("/dev/zero")
        with pytest.raises(DiagnosticError) as info:
            load_plan(tmp_path, MANIFEST)
        d = info.value.diagnostics[0]
        assert d.code == "E-PLN-001" and "not a regular file" in d.message
        assert d.location is not None and d.location.path == str(p)

    def test_deep_nesting_is_coded(self) -> None:
        """A plan nested 600 levels deep (1.2 KB) is E-PLN-002, not a RecursionError."""
        err = refusal("steps: " + "[" * 600 + "]" * 600 + "\noutput: x\n")
        assert err.code == "E-PLN-002" and "nests too deeply" in str(err)

    @pytest.mark.parametrize("plan", ["../plan.yaml", "/etc/plan.yaml", None])
    def test_bad_reference(self, tmp_path: Path, plan: str | None) -> None:
        """A plan path outside the capsule (or none) is E-PLN-001."""
        m = Manifest(name="d", version="0.1.0", plan=plan)
        with pytest.raises(DiagnosticError) as info:
            load_plan(tmp_path, m)
        assert info.value.code == "E-PLN-001"
