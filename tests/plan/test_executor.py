"""Tests of the plan workload: DAG concurrency, failure policy, retries, conditions, cancel."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from murmur.manifest.model import Capabilities, Manifest, ShellCaps, SpawnCaps
from murmur.plan import PlanWorkload, parse_plan
from murmur.workload import TaskContext, TaskOutcome, TaskServices

from .procs import live_members, wait_group_gone

ALLOW = ("echo", "sh", "cat", "wc", "find", "grep", "nosuchbinary-murmur")
MANIFEST = Manifest(
    name="demo",
    version="0.1.0",
    plan="plan.yaml",
    capabilities=Capabilities(shell=ShellCaps(allow=ALLOW), spawn=SpawnCaps(allow=("local/helper",))),
)
TASK_EVENT = "evt_" + "0" * 32


class FakeTrace:
    """A TraceSink keeping records in memory."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        event_id = f"evt_{len(self.records) + 1:032x}"
        self.records.append({"event_type": event_type, "event_id": event_id, "parent_id": parent_id, **fields})
        return event_id

    def of(self, event_type: str) -> list[dict[str, object]]:
        return [r for r in self.records if r["event_type"] == event_type]

    def steps(self, step: str) -> list[tuple[object, object]]:
        """(status, attempt) of each plan_step record of ``step``."""
        return [(r["status"], r["attempt"]) for r in self.of("plan_step") if r["step"] == step]


def make_ctx(
    workdir: Path, text: str = "hello", services: TaskServices | None = None, trace: FakeTrace | None = None
) -> TaskContext:
    records = workdir / "records"
    return TaskContext(
        session_id="ses_" + "1" * 32,
        task_id="tsk_" + "2" * 32,
        context_id="ctx_" + "3" * 32,
        text=text,
        origin="user",
        trust="trusted",
        manifest=MANIFEST,
        capsule_root=workdir,
        workdir=workdir,
        records_dir=records,
        trace=trace or FakeTrace(),
        task_event_id=TASK_EVENT,
        shell_env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        services=services or TaskServices(),
    )


def workload(text: str) -> PlanWorkload:
    return PlanWorkload(parse_plan(textwrap.dedent(text), MANIFEST), Path("."))


async def run(text: str, ctx: TaskContext) -> TaskOutcome:
    return await workload(text).run_task(ctx)


def members(handler):  # type: ignore[no-untyped-def]
    """TaskServices whose call_member answers directly through ``handler(member, task)``."""

    async def call_member(member: str, task: str) -> Mapping[str, object]:
        return await handler(member, task)

    return TaskServices(call_member=call_member, callees=("a", "b", "c", "slow", "bad"))


class TestBasics:
    async def test_scaffold_plan_answers(self, tmp_path: Path) -> None:
        """The scaffold's echo plan answers `received: <task>` (trailing newline removed)."""
        trace = FakeTrace()
        out = await run(
            """\
            steps:
              - id: answer
                shell: [echo, "received: {{ task }}"]
            output: "{{ steps.answer.stdout }}"
            """,
            make_ctx(tmp_path, "hi there", trace=trace),
        )
        assert out == TaskOutcome("ok", "received: hi there")
        (shell,) = trace.of("shell")
        assert shell["parent_id"] == TASK_EVENT and shell["task_id"] == "tsk_" + "2" * 32
        assert (shell["binary"], shell["command"], shell["exit_code"]) == ("echo", "echo 'received: hi there'", 0)
        assert (shell["stdout_bytes"], shell["stderr_bytes"], shell["step"]) == (19, 0, "answer")
        (step,) = trace.of("plan_step")
        assert {k: step[k] for k in ("step", "kind", "status", "attempt")} == {
            "step": "answer", "kind": "shell", "status": "ok", "attempt": 1
        }
        assert isinstance(step["duration_ms"], int) and step["parent_id"] == TASK_EVENT

    async def test_shell_steps_are_offered_to_the_sessions_starter(self, tmp_path: Path) -> None:
        """A shell step's command goes to ``services.starter`` first (resolved, in its unit's
        directory on the cgroup class); one that answers None leaves it to the exec path."""
        asked: list[tuple[list[str], str]] = []

        class Declining:
            async def exec_into(self, argv: list[str], executable: str, *_a: object, **_k: object) -> None:
                asked.append((argv, executable))

        from murmur import containment

        out = await run(
            """\
            steps:
              - id: answer
                shell: [echo, "via {{ task }}"]
            output: "{{ steps.answer.stdout }}"
            """,
            make_ctx(tmp_path, "x", services=TaskServices(starter=Declining())),
        )
        assert out == TaskOutcome("ok", "via x")
        if containment.here().host.name == containment.CGROUP:
            assert [(a, os.path.basename(e)) for a, e in asked] == [(["echo", "via x"], "echo")]
        else:  # groups class: the starter is not asked
            assert asked == []

    async def test_task_text_is_one_argument(self, tmp_path: Path) -> None:
        """Task text with shell metacharacters reaches argv as one literal argument."""
        ctx = make_ctx(tmp_path, "x; touch pwned $(id)")
        out = await run(
            """\
            steps:
              - id: a
                shell: [echo, "{{ task }}"]
            output: "{{ steps.a.stdout }}"
            """,
            ctx,
        )
        assert out.answer == "x; touch pwned $(id)"
        assert not (tmp_path / "pwned").exists()

    async def test_session_and_formation_ids_reach_templates(self, tmp_path: Path) -> None:
        """`{{ session_id }}` and `{{ formation_id }}` render the task context's ids."""
        ctx = make_ctx(tmp_path)
        ctx.formation_id = "frm_" + "4" * 32
        out = await run(
            """\
            steps:
              - id: a
                template: "{{ session_id }}"
            output: "{{ steps.a.output }} {{ formation_id }}"
            """,
            ctx,
        )
        assert out == TaskOutcome("ok", f"ses_{'1' * 32} frm_{'4' * 32}")

    async def test_shell_runs_in_workdir_and_counts(self, tmp_path: Path) -> None:
        """Shell steps run in the workdir; each command counts as a shell call."""
        (tmp_path / "f.txt").write_text("a\nb\nc\n")
        ctx = make_ctx(tmp_path, "audit f.txt")
        out = await run(
            """\
            steps:
              - id: lines
                shell: [wc, -l, "{{ task.words[1] }}"]
              - id: again
                shell: [cat, "{{ task | after: 'audit ' }}"]
            output: "{{ steps.lines.stdout | word: 0 }} / {{ steps.again.stdout | line: -1 }}"
            """,
            ctx,
        )
        assert out.answer == "3 / c"
        assert ctx.usage.shell_calls == 2

    async def test_template_and_write_steps(self, tmp_path: Path) -> None:
        """A report is rendered and written without any binary."""
        out = await run(
            """\
            steps:
              - id: greet
                shell: [echo, hello]
              - id: report
                template: |
                  # Report for {{ task }}
                  - greeting: {{ steps.greet.stdout }}
                depends_on: [greet]
              - id: save
                write: {path: "out/{{ task }}.md", content: "{{ steps.report.output }}"}
                depends_on: [report]
            output: "{{ steps.save.output }}"
            """,
            make_ctx(tmp_path, "demo"),
        )
        assert out == TaskOutcome("ok", "out/demo.md")
        assert (tmp_path / "out/demo.md").read_text() == "# Report for demo\n- greeting: hello\n"
        assert not list((tmp_path / "out").glob(".*"))  # no temporary file left

    async def test_write_outside_workdir_fails(self, tmp_path: Path) -> None:
        """A rendered write path that leaves the workdir fails the step."""
        work = tmp_path / "w"
        work.mkdir()
        out = await run(
            """\
            steps:
              - id: save
                write: {path: "{{ task }}", content: x}
            output: done
            """,
            make_ctx(work, "../escape.txt"),
        )
        assert out.status == "failed" and "leaves the workdir" in out.answer
        assert not (tmp_path / "escape.txt").exists()

    async def test_write_through_symlink_out_fails(self, tmp_path: Path) -> None:
        """A symlink inside the workdir cannot carry a write outside it."""
        work = tmp_path / "w"
        work.mkdir()
        (work / "link").symlink_to(tmp_path)
        out = await run(
            """\
            steps:
              - id: save
                write: {path: link/x.txt, content: x}
            output: done
            """,
            make_ctx(work),
        )
        assert out.status == "failed" and "leaves the workdir" in out.answer
        assert not (tmp_path / "x.txt").exists()


class TestAuditExample:
    PLAN = """\
        steps:
          - id: files
            shell: [find, "{{ task.words[1] | default: '.' }}", -type, f, -name, "*.py"]
          - id: todos
            shell: [grep, -rn, TODO, "{{ task.words[1] | default: '.' }}"]
            ok_exit_codes: [0, 1]
          - id: loc
            shell: [sh, -c, 'find "$1" -type f -name "*.py" -exec cat {} + | wc -l', sh, "{{ task.words[1] }}"]
          - id: report
            template: |
              # Audit of {{ task.words[1] }}
              - Python files: {{ steps.files.stdout | count_lines }}
              - Lines: {{ steps.loc.stdout | trim }}
              - TODO markers: {{ steps.todos.stdout | count_lines }}
            depends_on: [files, todos, loc]
          - id: save
            write: {path: "audit-{{ task.words[1] }}.md", content: "{{ steps.report.output }}"}
            depends_on: [report]
        output: "{{ steps.report.output }}"
        """

    async def test_audit_directory_named_in_task(self, tmp_path: Path) -> None:
        """find/grep/wc on a directory named in the task, assembled into a Markdown report."""
        src = tmp_path / "src"
        src.mkdir()
        (src / "a.py").write_text("x = 1  # TODO tidy\ny = 2\n")
        (src / "b.py").write_text("z = 3\n")
        (src / "notes.txt").write_text("TODO later\n")
        out = await run(self.PLAN, make_ctx(tmp_path, "audit src"))
        expected = "# Audit of src\n- Python files: 2\n- Lines: 3\n- TODO markers: 2\n"
        assert out == TaskOutcome("ok", expected)
        assert (tmp_path / "audit-src.md").read_text() == expected

    async def test_grep_without_matches_is_ok(self, tmp_path: Path) -> None:
        """grep exiting 1 (no match) counts as success under ok_exit_codes: [0, 1]."""
        (tmp_path / "src").mkdir()
        out = await run(self.PLAN, make_ctx(tmp_path, "audit src"))
        assert out.status == "ok" and "- TODO markers: 0" in out.answer


class TestConcurrency:
    async def test_independent_steps_run_concurrently(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """Two independent steps each wait for the other's event: only concurrency finishes."""
        events = {"a": trio.Event(), "b": trio.Event()}

        async def handler(member: str, task: str) -> Mapping[str, object]:
            events[member].set()
            await events["b" if member == "a" else "a"].wait()
            return {"status": "completed", "output": f"{member}:{task}"}

        with trio.fail_after(60):
            out = await run(
                """\
                steps:
                  - id: one
                    member: a
                    task: x
                  - id: two
                    member: b
                    task: y
                output: "{{ steps.one.output }} {{ steps.two.output }}"
                """,
                make_ctx(tmp_path, services=members(handler)),
            )
        assert out == TaskOutcome("ok", "a:x b:y")

    async def test_dependants_wait_for_all_dependencies(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """A step starts only after every dependency finished, and sees their outputs."""
        order: list[str] = []
        release = trio.Event()

        async def handler(member: str, task: str) -> Mapping[str, object]:
            order.append(f"start {member}")
            if member == "b":
                await release.wait()
            order.append(f"end {member}")
            return {"status": "completed", "output": task}

        async def releaser() -> None:
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(order) == ["end a", "start a", "start b"]  # c has not started
            release.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(releaser)
            out = await run(
                """\
                steps:
                  - id: one
                    member: a
                    task: A
                  - id: two
                    member: b
                    task: B
                  - id: three
                    member: c
                    task: "{{ steps.one.output }}+{{ steps.two.output }}"
                    depends_on: [one, two]
                output: "{{ steps.three.output }}"
                """,
                make_ctx(tmp_path, services=members(handler)),
            )
        assert order[-2:] == ["start c", "end c"]
        assert out.answer == "A+B"


class TestFailurePolicy:
    async def test_fail_cancels_running_siblings(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """A failed step under on_error: fail fails the task and cancels running steps."""
        slow_started = trio.Event()
        trace = FakeTrace()

        async def handler(member: str, task: str) -> Mapping[str, object]:
            if member == "slow":
                slow_started.set()
                await trio.sleep_forever()
            await slow_started.wait()
            return {"status": "failed", "output": "it broke\nbadly"}

        out = await run(
            """\
            steps:
              - id: forever
                member: slow
                task: x
              - id: broken
                member: bad
                task: y
              - id: never
                template: z
                depends_on: [broken]
            output: unreachable
            """,
            make_ctx(tmp_path, services=members(handler), trace=trace),
        )
        assert out == TaskOutcome("failed", "plan step `broken` failed: member `bad` ended failed: badly")
        assert trace.steps("forever") == [("canceled", 1)]
        assert trace.steps("never") == []

    async def test_continue_lets_dependants_run(self, tmp_path: Path) -> None:
        """A failed step under on_error: continue is recorded and dependants still run."""
        out = await run(
            """\
            steps:
              - id: check
                shell: [sh, -c, "echo partial; echo nope >&2; exit 4"]
                on_error: continue
              - id: after
                template: "{{ steps.check.status }} {{ steps.check.exit_code }} {{ steps.check.stdout }} {{ steps.check.stderr }}"
                depends_on: [check]
            output: "{{ steps.after.output }}"
            """,
            make_ctx(tmp_path),
        )
        assert out == TaskOutcome("ok", "failed 4 partial nope")

    async def test_shell_failure_reason(self, tmp_path: Path) -> None:
        """A failed shell step's reason names the binary, status and last stderr line."""
        out = await run(
            """\
            steps:
              - id: x
                shell: [sh, -c, "echo first >&2; echo last words >&2; exit 2"]
            output: x
            """,
            make_ctx(tmp_path),
        )
        assert out == TaskOutcome("failed", "plan step `x` failed: `sh` exited with status 2: last words")

    async def test_binary_missing_at_runtime(self, tmp_path: Path) -> None:
        """An allowed binary missing from PATH fails the step; no shell call is counted."""
        ctx = make_ctx(tmp_path)
        out = await run(
            """\
            steps:
              - id: x
                shell: [nosuchbinary-murmur]
            output: x
            """,
            ctx,
        )
        assert out.status == "failed" and "not found on PATH" in out.answer
        assert ctx.usage.shell_calls == 0


class TestRetries:
    PLAN = """\
        steps:
          - id: flaky
            shell: [sh, -c, 'n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo try $n; [ $n -ge 3 ]']
            retries: {retries}
        output: "{{{{ steps.flaky.stdout }}}}"
        """

    async def test_succeeds_within_retries(self, tmp_path: Path) -> None:
        """A step failing twice succeeds on its third attempt with retries: 2."""
        trace = FakeTrace()
        out = await run(self.PLAN.format(retries=2), make_ctx(tmp_path, trace=trace))
        assert out == TaskOutcome("ok", "try 3")
        assert trace.steps("flaky") == [("failed", 1), ("failed", 2), ("ok", 3)]
        assert len(trace.of("shell")) == 3

    async def test_exhausted(self, tmp_path: Path) -> None:
        """With retries: 1 the step fails after two attempts."""
        trace = FakeTrace()
        out = await run(self.PLAN.format(retries=1), make_ctx(tmp_path, trace=trace))
        assert out.status == "failed"
        assert trace.steps("flaky") == [("failed", 1), ("failed", 2)]


class TestConditions:
    async def test_false_condition_skips(self, tmp_path: Path) -> None:
        """A false `if` skips the step; dependants still run and see `skipped`."""
        trace = FakeTrace()
        out = await run(
            """\
            steps:
              - id: probe
                shell: [sh, -c, "exit 1"]
                on_error: continue
              - id: fix
                shell: [echo, fixing]
                if: "{{ steps.probe.exit_code }} == 0"
                depends_on: [probe]
              - id: report
                template: "fix={{ steps.fix.status }} out=[{{ steps.fix.stdout }}]"
                depends_on: [fix]
            output: "{{ steps.report.output }}"
            """,
            make_ctx(tmp_path, trace=trace),
        )
        assert out.answer == "fix=skipped out=[]"
        assert trace.steps("fix") == [("skipped", 0)]

    async def test_true_condition_runs(self, tmp_path: Path) -> None:
        """A true `if` runs the step."""
        out = await run(
            """\
            steps:
              - id: go
                shell: [echo, ran]
                if: "{{ task }} contains please"
            output: "{{ steps.go.stdout }}"
            """,
            make_ctx(tmp_path, "please run"),
        )
        assert out.answer == "ran"

    async def test_undecidable_condition_fails_step(self, tmp_path: Path) -> None:
        """A condition comparing text with < fails the step with the reason."""
        out = await run(
            """\
            steps:
              - id: go
                template: x
                if: "{{ task }} < 3"
            output: x
            """,
            make_ctx(tmp_path, "abc"),
        )
        assert out.status == "failed" and "must be numbers" in out.answer


class TestServices:
    CAPSULE = """\
        steps:
          - id: ask
            capsule: local/helper
            version: 0.1.0
            task: "summarise {{ task }}"
        output: "{{ steps.ask.output }}"
        """

    async def test_capsule_without_delegation_refused(self, tmp_path: Path) -> None:
        """A capsule step without the delegate service fails naming the grant."""
        out = await run(self.CAPSULE, make_ctx(tmp_path))
        assert out.status == "failed"
        assert "`capabilities.spawn.allow: [local/helper]`" in out.answer

    async def test_capsule_delegates_and_waits(self, tmp_path: Path) -> None:
        """A capsule step calls delegate(capsule, version, task, wait=True) and uses its output."""
        calls: list[tuple[str, str, str, bool]] = []

        async def delegate(capsule: str, version: str, task: str, wait: bool) -> Mapping[str, object]:
            calls.append((capsule, version, task, wait))
            return {"status": "completed", "output": "short"}

        out = await run(self.CAPSULE, make_ctx(tmp_path, "doc", services=TaskServices(delegate=delegate)))
        assert out == TaskOutcome("ok", "short")
        assert calls == [("local/helper", "0.1.0", "summarise doc", True)]

    async def test_capsule_times_out_at_delegation_bound(
        self, tmp_path: Path, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A capsule step waits at most the session's delegation bound (resolved at
        composition and carried on the task context), then times out."""

        async def delegate(capsule: str, version: str, task: str, wait: bool) -> Mapping[str, object]:
            await trio.sleep_forever()
            raise AssertionError

        trace = FakeTrace()
        begun = trio.current_time()
        ctx = attrs.evolve(make_ctx(tmp_path, services=TaskServices(delegate=delegate), trace=trace),
                           delegation_bound_secs=7)
        out = await run(self.CAPSULE, ctx)
        assert trio.current_time() - begun == pytest.approx(7)
        assert out == TaskOutcome("failed", "plan step `ask` failed: timed out after 7 s")
        assert trace.steps("ask") == [("timed_out", 1)]

    async def test_member_without_edge_refused(self, tmp_path: Path) -> None:
        """A member step outside a formation fails naming the missing edge."""
        out = await run(
            """\
            steps:
              - id: call
                member: reviewer
                task: x
            output: x
            """,
            make_ctx(tmp_path),
        )
        assert out.status == "failed"
        assert "not a formation member with an edge to `reviewer`" in out.answer

    async def test_member_started_then_answer(self, tmp_path: Path) -> None:
        """A started call-member is followed by member_answer(call_id)."""

        async def call_member(member: str, task: str) -> Mapping[str, object]:
            return {"call_id": "mcl_1", "member": member, "status": "started", "task_id": "tsk_x"}

        async def member_answer(call_id: str) -> Mapping[str, object]:
            return {"call_id": call_id, "member": "reviewer", "status": "completed", "output": "LGTM"}

        services = TaskServices(call_member=call_member, member_answer=member_answer, callees=("reviewer",))
        out = await run(
            """\
            steps:
              - id: call
                member: reviewer
                task: "review {{ task }}"
            output: "{{ steps.call.output }}"
            """,
            make_ctx(tmp_path, services=services),
        )
        assert out == TaskOutcome("ok", "LGTM")

    async def test_step_timeout(self, tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
        """A step's own timeout bounds each attempt."""

        async def handler(member: str, task: str) -> Mapping[str, object]:
            await trio.sleep_forever()
            raise AssertionError

        trace = FakeTrace()
        out = await run(
            """\
            steps:
              - id: wait
                member: slow
                task: x
                timeout: 2
                retries: 1
            output: x
            """,
            make_ctx(tmp_path, services=members(handler), trace=trace),
        )
        assert out.answer == "plan step `wait` failed: timed out after 2 s"
        assert trace.steps("wait") == [("timed_out", 1), ("timed_out", 2)]


class TestCancel:
    async def test_cancel_kills_step_process_group(self, tmp_path: Path) -> None:
        """Cancelling the task kills `sh -c 'sleep 1000 & wait'` and its grandchild."""
        fifo = tmp_path / "pid.fifo"
        os.mkfifo(fifo)
        # Held read-write so the step's write never blocks and our read waits for data.
        stream = trio.lowlevel.FdStream(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        trace = FakeTrace()
        ctx = make_ctx(tmp_path, trace=trace)
        plan = """\
            steps:
              - id: quick
                shell: [echo, done]
              - id: hang
                shell: [sh, -c, 'echo $$ > pid.fifo; sleep 1000 & wait']
                depends_on: [quick]
              - id: after
                template: never
                depends_on: [hang]
            output: x
            """
        async with stream, trio.open_nursery() as nursery:
            nursery.start_soon(run, plan, ctx)
            with trio.fail_after(10):
                pgid = int(await stream.receive_some(64))
                while len(live_members(pgid)) < 2:  # noqa: ASYNC110 - /proc has no event
                    await trio.sleep(0.005)
            nursery.cancel_scope.cancel()
        assert await wait_group_gone(pgid) == []
        assert trace.steps("hang") == [("canceled", 1)]
        assert trace.steps("quick") == [("ok", 1)]
        assert trace.steps("after") == []
