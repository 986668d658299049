"""Tests of `mur run` option handling and launch preparation (in process)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from murmur.assembly import RunOptions, contributors, load_env_file, prepare, read_task
from murmur.assembly import options as run_options
from murmur.cli import run_session
from murmur.cli.mur import build_parser, main
from murmur.cli.run_session import run_prepared
from murmur.errors import DiagnosticError, UsageError
from murmur.manifest.model import AfterTask, TaskAcceptance
from murmur.session import Contribution
from murmur.session.trace import read_trace
from murmur.workload import TaskContext, TaskOutcome

ECHO_MANIFEST = """\
name: echo
version: 0.1.0
plan: plan.yaml
capabilities:
  shell:
    allow: [echo]
lifecycle:
  task_acceptance: queue
  after_task: sleep
"""
ECHO_PLAN = 'steps:\n  - id: say\n    shell: [echo, "echo: {{ task }}"]\noutput: "{{ steps.say.stdout }}"\n'


@pytest.fixture
def capsule(tmp_path: Path) -> Path:
    """A plan capsule source directory."""
    d = tmp_path / "echo"
    d.mkdir()
    (d / "murmur.yaml").write_text(ECHO_MANIFEST)
    (d / "plan.yaml").write_text(ECHO_PLAN)
    return d


def parse(*argv: str) -> object:
    parser, _ = build_parser("run")
    return parser.parse_args(list(argv))


class TestParser:
    def test_defaults(self) -> None:
        """No options: no roster, no task, human mode."""
        ns = parse()
        assert (ns.roster, ns.task, ns.json, ns.capsule) == (None, None, False, None)  # type: ignore[attr-defined]

    def test_roster_bare_and_path(self) -> None:
        """--roster alone means ./roster.yaml (empty string); with a value, that path."""
        assert parse("--roster").roster == ""  # type: ignore[attr-defined]
        assert parse("--roster", "team").roster == "team"  # type: ignore[attr-defined]

    def test_help_documents_deadline(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--help explains the --deadline forms and the exit statuses."""
        assert main(["run", "--help"]) == 0
        out = capsys.readouterr().out
        assert "RFC 3339" in out and "90s" in out and "143" in out
        statuses = out[out.index("exit status:") :]
        for status in ("0 ok", "1 the deciding task", "2 command-line", "70 an internal", "130 interrupted", "143 forced"):
            assert status in " ".join(statuses.split()), status

    def test_roster_refuses_other_flags(self) -> None:
        """--roster with a flag it does not combine with is a usage error (exit 2)."""
        assert main(["run", "--roster", "--capsule", "local/x"]) == 2


class TestPrepare:
    def test_manifest_run(self, capsule: Path) -> None:
        """./murmur.yaml: the plan workload, records made, policy from the manifest."""
        setup = prepare(RunOptions(), environ={}, cwd=capsule)
        assert setup.manifest.name == "echo" and setup.capsule_root == capsule.resolve()
        assert setup.workdir == capsule.resolve() and setup.records.root.is_dir()
        assert setup.policy.acceptance is TaskAcceptance.QUEUE and setup.policy.idle_timeout is None
        assert type(setup.workload).__name__ == "PlanWorkload" and setup.workload_kind == "plan"

    def test_overrides_and_deadline(self, capsule: Path, tmp_path: Path) -> None:
        """Lifecycle overrides, --deadline from now, --workdir created, --task read."""
        opts = RunOptions(
            task_acceptance="single", after_task="exit", deadline="90s", workdir=str(tmp_path / "w"), task="t"
        )
        setup = prepare(opts, environ={"MURMUR_A2A_TIMEOUT_SECS": "5"}, cwd=capsule, now=1000.0)
        assert setup.policy.acceptance is TaskAcceptance.SINGLE and setup.policy.after_task is AfterTask.EXIT
        assert setup.deadline == 1090.0 and setup.task_text == "t"
        assert (tmp_path / "w").is_dir() and setup.workdir == (tmp_path / "w").resolve()
        assert setup.policy.idle_timeout is None  # a launch task waits for nothing

    @pytest.mark.parametrize(("raw", "bound"), [(None, 600), ("7", 7), (" 9 ", 9), ("0", 600), ("1.5", 600), ("٣", 600)])
    def test_delegation_bound_resolved_once(self, capsule: Path, raw: str | None, bound: int) -> None:
        """MURMUR_DELEGATION_TIMEOUT_SECS is read once, at composition, onto the setup (issue 31)."""
        environ = {} if raw is None else {"MURMUR_DELEGATION_TIMEOUT_SECS": raw}
        setup = prepare(RunOptions(), environ=environ, cwd=capsule)
        assert setup.delegation_bound_secs == bound

    def test_workdir_parent_must_exist(self, capsule: Path, tmp_path: Path) -> None:
        """--workdir in a directory that does not exist is refused and nothing is created."""
        with pytest.raises(DiagnosticError) as info:
            prepare(RunOptions(workdir=str(tmp_path / "nonexistent" / "dir")), environ={}, cwd=capsule)
        assert info.value.code == "E-IO-001" and not (tmp_path / "nonexistent").exists()

    def test_past_deadline_refused(self, capsule: Path) -> None:
        """An RFC 3339 --deadline already past is a usage error before anything starts;
        a formation member (which inherits the moment) is not refused."""
        with pytest.raises(UsageError) as info:
            prepare(RunOptions(deadline="2001-01-01T00:00:00Z"), environ={}, cwd=capsule)
        assert info.value.code == "E-RUN-054" and "already past" in info.value.diagnostics[0].message
        assert not list(capsule.glob("**/ses_*"))

    def test_internal_port(self, capsule: Path) -> None:
        """network.internal_port binds that loopback port; a busy one is E-RUN-010."""
        import socket

        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        (capsule / "murmur.yaml").write_text(ECHO_MANIFEST + f"network:\n  internal_port: {port}\n")
        try:
            with pytest.raises(DiagnosticError) as info:
                prepare(RunOptions(), environ={}, cwd=capsule)
            assert info.value.code == "E-RUN-010" and str(port) in info.value.diagnostics[0].message
        finally:
            holder.close()
        setup = prepare(RunOptions(), environ={}, cwd=capsule)
        assert setup.bind == f"127.0.0.1:{port}"

    def test_system_prompt_on_a_plan_capsule(self, capsule: Path) -> None:
        """--system-prompt exists; a plan capsule refuses it (it has no model to prompt)."""
        ns = build_parser("run")[0].parse_args(["--system-prompt", "be brief"])
        assert ns.system_prompt == "be brief"
        with pytest.raises(DiagnosticError) as info:
            prepare(RunOptions(system_prompt="be brief"), environ={}, cwd=capsule)
        assert info.value.code == "E-CLI-001"

    def test_mur_version_mismatch_warns(self, capsule: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A mur_version other than the running one warns W-MAN-001 and the launch goes on."""
        (capsule / "murmur.yaml").write_text(ECHO_MANIFEST + 'mur_version: "0.0.0-other"\n')
        setup = prepare(RunOptions(), environ={}, cwd=capsule)
        assert setup.manifest.mur_version == "0.0.0-other"
        assert "warning[W-MAN-001]" in capsys.readouterr().err

    def test_idle_timeout_from_env(self, capsule: Path) -> None:
        """MURMUR_A2A_TIMEOUT_SECS sets the idle rule."""
        setup = prepare(RunOptions(task_acceptance="single"), environ={"MURMUR_A2A_TIMEOUT_SECS": "5"}, cwd=capsule)
        assert setup.policy.idle_timeout == 5.0

    @pytest.mark.parametrize(
        "opts",
        [
            RunOptions(capsule="local/x"),
            RunOptions(capsule_version="1.0.0"),
            RunOptions(capsule="local/x", capsule_version="1.0.0", manifest="m.yaml"),
            RunOptions(deadline="whenever"),
        ],
    )
    def test_usage_errors(self, capsule: Path, opts: RunOptions) -> None:
        """Incomplete or conflicting capsule options and bad deadlines are usage errors."""
        with pytest.raises(UsageError):
            prepare(opts, environ={}, cwd=capsule)

    def test_containment_floor(self, capsule: Path) -> None:
        """A floor the host cannot back is refused with E-CAP-003 naming what it lacks."""
        with pytest.raises(DiagnosticError) as info:
            prepare(RunOptions(containment="scoped"), environ={"MURMUR_SANDBOX_HOST": "no-landlock"}, cwd=capsule)
        assert info.value.code == "E-CAP-003" and "Landlock" in info.value.diagnostics[0].message

    def test_no_workload(self, tmp_path: Path) -> None:
        """A manifest with neither plan nor inference is E-MAN-005 (it would need a component)."""
        (tmp_path / "murmur.yaml").write_text("name: bare\nversion: 0.1.0\n")
        with pytest.raises(DiagnosticError) as info:
            prepare(RunOptions(), environ={}, cwd=tmp_path)
        assert info.value.code == "E-MAN-005"

    def test_contributors(self, capsule: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every contributor extends the setup, in order, with the session's environment."""
        seen: list[str] = []

        def first(setup: Any, environ: Mapping[str, str]) -> None:
            seen.append("first:" + environ.get("X", ""))
            setup.readiness_fields["formation_id"] = "frm_x"

        def second(setup: Any, environ: Mapping[str, str]) -> None:
            seen.append("second:" + setup.readiness_fields["formation_id"])

        monkeypatch.setattr(contributors, "CONTRIBUTORS", (first, second))
        setup = prepare(RunOptions(), environ={"X": "1"}, cwd=capsule)
        assert seen == ["first:1", "second:frm_x"] and setup.readiness_fields == {"formation_id": "frm_x"}

    def test_contributor_order(self) -> None:
        """The formation side runs before the tree (which reads its fields), the tree before the
        delegation side (which reads the lineage); span export last (its after-end hook runs
        after the journal's)."""
        assert (
            contributors.formation_member, contributors.process_tree, contributors.delegated_child,
            contributors.sandboxed, contributors.span_export,
        ) == contributors.CONTRIBUTORS

    def test_contributions_are_merged_once_the_root_s_first(self, capsule: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
        """What the contributors return is merged after all have run (none sees another's
        watchers on the setup): the composition root's own first, then each contributor's, a
        contributor's several in the order it gives them."""
        def named(name: str) -> Any:
            async def watcher(ctl: object) -> None:
                pass

            watcher.__name__ = name
            return watcher

        root, one, two, three = (named(n) for n in ("root", "one", "two", "three"))
        seen: list[list[Any]] = []

        def first(setup: Any, environ: Mapping[str, str]) -> Contribution:
            seen.append(list(setup.watchers))
            return Contribution(watchers=(one,))

        def second(setup: Any, environ: Mapping[str, str]) -> tuple[Contribution | None, ...]:
            seen.append(list(setup.watchers))
            return Contribution(watchers=(two,)), None, Contribution(watchers=(three,))

        monkeypatch.setattr(contributors, "CONTRIBUTORS", ())
        setup = prepare(RunOptions(), environ={}, cwd=capsule)
        before = list(setup.watchers)
        monkeypatch.setattr(contributors, "CONTRIBUTORS", (first, second))
        contributors.contribute(setup, {}, [Contribution(watchers=(root,)), None])
        assert seen == [before, before]
        assert setup.watchers == [*before, root, one, two, three]


class TestHelpers:
    def test_env_file(self, tmp_path: Path) -> None:
        """.env lines: comments, export, quotes; malformed lines skipped; env wins."""
        (tmp_path / ".env").write_text('# c\nexport A=1\nB="two words"\nbad line\n9X=no\nC=\'q\'\n')
        assert load_env_file(tmp_path / ".env") == {"A": "1", "B": "two words", "C": "q"}
        assert load_env_file(tmp_path / "absent") == {}
        env = run_options.session_environ(RunOptions(), {"A": "env"}, tmp_path)
        assert env["A"] == "env" and env["B"] == "two words"
        assert "B" not in run_options.session_environ(RunOptions(no_env_file=True), {}, tmp_path)

    def test_read_task(self, tmp_path: Path) -> None:
        """--task: a file's contents, else the text verbatim."""
        (tmp_path / "t.md").write_text("from file")
        assert read_task("t.md", tmp_path) == "from file"
        assert read_task("just words", tmp_path) == "just words"
        assert read_task("missing.md", tmp_path) == "missing.md"

    def test_task_file_bounded(self, tmp_path: Path) -> None:
        """A --task file over 16 MiB is E-IO-003, not read whole."""
        with (tmp_path / "big.md").open("wb") as fh:
            fh.truncate(run_options.MAX_TASK_FILE_BYTES + 1)
        with pytest.raises(DiagnosticError) as info:
            read_task("big.md", tmp_path)
        assert info.value.code == "E-IO-003" and "larger than 16 MiB" in str(info.value)

    @pytest.mark.parametrize("name", ["/dev/zero", "./fifo", "./adir"])
    def test_task_path_that_is_not_a_regular_file(self, tmp_path: Path, name: str) -> None:
        """A path (a value with ``/``) naming a device, a FIFO or a directory is E-IO-003, read
        no further and never sent as the task's text; a bare word stays text."""
        os.mkfifo(tmp_path / "fifo")
        (tmp_path / "adir").mkdir()
        with pytest.raises(DiagnosticError) as info:  # a FIFO is refused before any open
            read_task(name, tmp_path)
        assert info.value.code == "E-IO-003" and "cannot read the task file" in str(info.value)
        assert read_task("adir", tmp_path) == "adir"

    def test_env_file_fifo_does_not_hang(self, tmp_path: Path) -> None:
        os.mkfifo(tmp_path / ".env")
        assert load_env_file(tmp_path / ".env") == {}


class EchoWorkload:
    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        return TaskOutcome("ok", f"echo: {ctx.text}")


class FailWorkload:
    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        return TaskOutcome("failed", "plan step `a` failed: `ls` exited with status 2: no such file")


class TestRunPrepared:
    def test_json_mode_output(self, capsule: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json: exactly one readiness line on stdout; the status goes nowhere else."""
        setup = prepare(RunOptions(task="hi", json=True), environ={}, cwd=capsule)
        setup.workload = EchoWorkload()
        assert run_prepared(setup, json_mode=True) == 0
        out, err = capsys.readouterr()
        lines = out.splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["session_id"] == setup.session_id
        assert err == ""

    def test_human_mode_output(self, capsule: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Human mode: session/records/url/status on stderr, the answer on stdout."""
        setup = prepare(RunOptions(task="hi"), environ={}, cwd=capsule)
        setup.workload = EchoWorkload()
        assert run_prepared(setup, json_mode=False, verbose=True) == 0
        out, err = capsys.readouterr()
        assert out == "echo: hi\n"
        lines = err.splitlines()
        assert lines[0] == f"session: {setup.session_id}" and lines[1].startswith("records: ")
        assert lines[2].startswith("murmur: url http://127.0.0.1:") and lines[3].startswith("workdir: ")
        assert lines[-1] == "status: ok"

    def test_human_mode_shows_failure_reason(
        self, capsule: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Human mode: a failed deciding task's reason comes before E-RUN-040 on stderr."""
        setup = prepare(RunOptions(task="hi"), environ={}, cwd=capsule)
        setup.workload = FailWorkload()
        assert run_prepared(setup, json_mode=False) == 1
        out, err = capsys.readouterr()
        assert out == ""
        lines = err.splitlines()
        i = lines.index("status: failed")
        assert lines[i + 1] == (
            "reason: plan step `a` failed: `ls` exited with status 2: no such file")
        assert lines[i + 2].startswith("error[E-RUN-040]: ")

    def test_json_mode_never_prints_reason(
        self, capsule: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--json: the reason is not printed; stdout stays one readiness line."""
        setup = prepare(RunOptions(task="hi", json=True), environ={}, cwd=capsule)
        setup.workload = FailWorkload()
        assert run_prepared(setup, json_mode=True) == 1
        out, err = capsys.readouterr()
        assert len(out.splitlines()) == 1 and "reason" not in out
        assert "reason:" not in err and "error[E-RUN-040]" in err


class TestReasonText:
    def test_bounded(self) -> None:
        """At most five lines of the reason, each wrapped at 240 characters, then an ellipsis line."""
        text = run_session.reason_text("x" * 500 + "\n" + "\n".join(f"l{i}" for i in range(10)))
        lines = text.splitlines()
        assert len(lines) == 8 and lines[-1] == "  …"
        assert lines[:3] == ["reason: " + "x" * 240, "  " + "x" * 240, "  " + "x" * 20]
        assert lines[3:7] == ["  l0", "  l1", "  l2", "  l3"]

    def test_a_long_sentence_is_wrapped_never_cut(self) -> None:
        """A refusal's sentence longer than a line keeps its last words (the grant it names)."""
        sentence = "word " * 100 + "`capabilities.shell.allow: [sh, cat, ls]`"
        text = run_session.reason_text(sentence)
        assert "…" not in text and " ".join(text.replace("reason: ", "").split()) == " ".join(sentence.split())
        assert max(len(line) for line in text.splitlines()) <= 240 + len("reason: ")
        huge = run_session.reason_text("y" * 5000)
        assert huge.endswith("…") and len(huge.replace("\n", "")) < 1400

    def test_short_reason_kept_whole(self) -> None:
        """A one-line reason is shown as is."""
        assert run_session.reason_text("it broke\n") == "reason: it broke"


def _chattr_works(tmp: Path) -> bool:
    probe = tmp / "chattr-probe"
    probe.mkdir()
    try:
        ok = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    except OSError:
        return False
    if ok:
        subprocess.run(["chattr", "-i", str(probe)], check=True)
    return ok


class GatedEcho:
    """Echo, after ``before_answer`` ran (to break the disk while the task runs)."""

    def __init__(self, before_answer: Any) -> None:
        self.before_answer = before_answer

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        self.before_answer()
        return TaskOutcome("ok", f"echo: {ctx.text}")


class TestDisksThatFail:
    """A session that could not record its outcome never reports success (issue 16)."""

    def test_result_lost_to_enospc_keeps_the_answer(
        self, capsule: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ENOSPC on out/: the answer still on stdout, `status: failed`, E-RUN-007, exit 1."""
        from murmur.session import records

        real = records.write_private

        def full_disk(path: Path, text: str) -> None:
            if path.parent.name == "out":
                raise OSError(errno.ENOSPC, "No space left on device")
            real(path, text)

        monkeypatch.setattr(records, "write_private", full_disk)
        setup = prepare(RunOptions(task="hi"), environ={}, cwd=capsule)
        setup.workload = EchoWorkload()
        assert run_prepared(setup, json_mode=False) == 1
        out, err = capsys.readouterr()
        assert out == "echo: hi\n"
        lines = err.splitlines()
        i = lines.index("status: failed")
        assert lines[i + 1] == (
            "error[E-RUN-007]: the session's records could not be written: No space left on device "
            "(and 1 more file); its outcome is not on disk")
        assert "Traceback" not in err and "Logging error" not in err
        assert not setup.records.result.exists()
        end = [r for r in read_trace(setup.records.trace) if r["event_type"] == "session_end"]
        assert end[0]["exit_status"] == "failed"

    def test_records_made_immutable_mid_run(
        self, capsule: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """chattr +i on out/ and logs/ while the task runs (root only): E-RUN-007, answer kept."""
        if not _chattr_works(tmp_path):
            pytest.skip("chattr +i is not available here (needs root and a file system that has it)")
        setup = prepare(RunOptions(task="hi"), environ={}, cwd=capsule)
        locked = [setup.records.out, setup.records.logs]

        def lock() -> None:
            subprocess.run(["chattr", "+i", *map(str, locked)], check=True)

        setup.workload = GatedEcho(lock)
        try:
            code = run_prepared(setup, json_mode=False)
        finally:
            subprocess.run(["chattr", "-i", *map(str, locked)], check=False)
        out, err = capsys.readouterr()
        assert (code, out) == (1, "echo: hi\n")
        assert "status: failed" in err.splitlines()
        assert "error[E-RUN-007]: the session's records could not be written: Operation not permitted" in err
        assert "Traceback" not in err and "Logging error" not in err

    def test_running_record_left_behind_is_coded(
        self, capsule: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """The running record cannot be removed: E-IO-003 naming it, exit 1, no traceback."""
        from murmur.session import running_record as running

        stuck = tmp_path / "stuck"
        stuck.mkdir()
        monkeypatch.setattr(running, "record_path", lambda session_id: stuck)
        setup = prepare(RunOptions(task="hi"), environ={}, cwd=capsule)
        setup.workload = EchoWorkload()
        assert run_prepared(setup, json_mode=False) == 1
        out, err = capsys.readouterr()
        assert out == "echo: hi\n"
        assert "error[E-IO-003]: the running record could not be removed: Is a directory" in err
        assert f"  --> {stuck}" in err and "Traceback" not in err


def test_log_file_that_cannot_be_written_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log line lost to a full disk is dropped and counted, never a `--- Logging error ---`."""
    import logging

    from murmur.session.records import QuietFileHandler

    class FullDisk:
        def write(self, text: str) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    handler = QuietFileHandler(tmp_path / "door.log", encoding="utf-8")
    handler.stream.close()
    handler.stream = FullDisk()  # type: ignore[assignment]
    log = logging.getLogger("test.quiet")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.error("one line")
    finally:
        log.removeHandler(handler)
        handler.stream = None  # type: ignore[assignment]
        handler.close()
    assert handler.dropped == 1
    assert capsys.readouterr().err == ""
