"""The delegation contributor and runtime, in-process: registration, completions, lifelines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
import trio

from murmur.delegation import completion as comp
from murmur.delegation.book import DelegationBook, Entry
from murmur.delegation.contributor import (
    PlanCompletions,
    completion_summary,
    completion_warning,
    install,
)
from murmur.delegation.spawner import SpawnerHandle
from murmur.errors import DiagnosticError
from murmur.ids import new_id
from murmur.manifest.model import (
    AfterTask,
    Capabilities,
    Lifecycle,
    Manifest,
    SpawnCaps,
    TaskAcceptance,
)
from murmur.roost.client import RoostClient
from murmur.session.lifecycle import Policy
from murmur.session.records import records_root
from murmur.session.winddown import signal_wind_down
from murmur.workload import TaskContext, TaskOutcome
from session.helpers import EchoWorkload, GateWorkload, make_setup, running

from .conftest import StartRoost


def capsule(name: str = "orch", *, spawn: tuple[str, ...] = (), acceptance: str = "queue", after: str = "sleep",
            depth: int = 4) -> Manifest:
    return Manifest(
        name, "0.1.0",
        capabilities=Capabilities(spawn=SpawnCaps(spawn) if spawn else None),
        lifecycle=Lifecycle(task_acceptance=TaskAcceptance(acceptance), after_task=AfterTask(after), queue_depth=depth),
    )


def closed_stdin() -> int:
    """A stdin that is already at end of file."""
    r, w = os.pipe()
    os.close(w)
    return r


def approval_stdin(text: str) -> int:
    r, w = os.pipe()
    os.write(w, text.encode())
    os.close(w)
    return r


def handle_for(url: str, session_id: str, *, dlg: str | None = None) -> SpawnerHandle:
    return SpawnerHandle(url, session_id, "ctx_parent", "trusted", dlg or new_id("dlg"))


class TestInstall:
    def test_ordinary_capsule_is_untouched(self, tmp_path: Path) -> None:
        """A capsule that neither delegates nor was delegated gets nothing and needs no daemon."""
        setup = make_setup(tmp_path, capsule(), EchoWorkload())
        assert install(setup, {}, stdin_fd=closed_stdin()) is None
        assert (setup.start_hooks, setup.end_hooks, setup.watchers, setup.services) == ([], [], [], None)

    @pytest.mark.parametrize("url", [None, "", "   "])
    def test_delegating_capsule_needs_roost_url(self, tmp_path: Path, url: str | None) -> None:
        """spawn.allow without MURMUR_ROOST_URL refuses the launch with E-RUN-019."""
        setup = make_setup(tmp_path, capsule(spawn=("worker",)), EchoWorkload())
        env = {} if url is None else {"MURMUR_ROOST_URL": url}
        with pytest.raises(DiagnosticError) as info:
            install(setup, env, stdin_fd=closed_stdin())
        assert info.value.code == "E-RUN-019" and "MURMUR_ROOST_URL is not set" in str(info.value)
        # the hint names the real start command (mur-roost refuses --help: it takes only its flags)
        assert "`mur-roost --port 7700 --spawn-allow <this capsule's name>`; see spec/roost.md" in str(info.value)
        assert "--help" not in str(info.value)

    def test_bad_spawner_refuses(self, tmp_path: Path) -> None:
        """An unreadable MURMUR_SPAWNER is E-RUN-020, never showing the value."""
        setup = make_setup(tmp_path, capsule(), EchoWorkload())
        with pytest.raises(DiagnosticError) as info:
            install(setup, {"MURMUR_SPAWNER": "msc1.not-a-handle"}, stdin_fd=closed_stdin())
        assert info.value.code == "E-RUN-020" and "msc1" not in str(info.value)

    @pytest.mark.parametrize(("value", "reason"), [("abc", "not a decimal"), ("1", "standard stream"), ("999999", "not open")])
    def test_bad_lifeline_refuses(self, tmp_path: Path, value: str, reason: str) -> None:
        """An unusable MURMUR_SPAWNER_LIFELINE is E-RUN-020 with the lifeline reason."""
        setup = make_setup(tmp_path, capsule(), EchoWorkload())
        with pytest.raises(DiagnosticError) as info:
            install(setup, {"MURMUR_SPAWNER_LIFELINE": value}, stdin_fd=closed_stdin())
        assert info.value.code == "E-RUN-020" and reason in str(info.value)

    def test_delegated_child_setup(self, tmp_path: Path) -> None:
        """A delegated child keeps its records in its own directory and names its parent."""
        setup = make_setup(tmp_path, capsule("worker"), EchoWorkload())
        old = setup.records.root
        handle = handle_for("http://127.0.0.1:9", "ses_" + "9" * 32)
        runtime = install(setup, {"MURMUR_SPAWNER": handle.encode(), "MURMUR_ROOST_URL": "http://127.0.0.1:9"},
                          stdin_fd=approval_stdin("msa1.token-from-parent\n"))
        assert runtime is not None and runtime.registers and "msa1" not in repr(runtime)
        assert setup.records.root == tmp_path / ".murmur" / setup.session_id
        assert setup.records.out.is_dir() and not old.exists()
        assert not any(records_root().rglob(setup.session_id))
        assert setup.trace_start_fields == {"spawned_by": handle.session_id, "delegation_id": handle.delegation_id}
        assert setup.services is None  # it may not delegate itself

    def test_delegated_child_with_approval_needs_roost_url(self, tmp_path: Path) -> None:
        """A child launched under an approval must register, so it needs MURMUR_ROOST_URL."""
        setup = make_setup(tmp_path, capsule("worker"), EchoWorkload())
        handle = handle_for("http://127.0.0.1:9", "ses_" + "9" * 32)
        with pytest.raises(DiagnosticError) as info:
            install(setup, {"MURMUR_SPAWNER": handle.encode()}, stdin_fd=approval_stdin("msa1.x"))
        assert info.value.code == "E-RUN-019" and "msa1" not in str(info.value)

    def test_warning_printed_at_launch(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A delegating capsule that cannot receive completions is warned (W-SEC-020), not refused."""
        setup = make_setup(tmp_path, capsule(spawn=("worker",), acceptance="single", after="exit"), EchoWorkload())
        assert install(setup, {"MURMUR_ROOST_URL": "http://127.0.0.1:9"}, stdin_fd=closed_stdin()) is not None
        err = capsys.readouterr().err
        assert err.startswith("[capsule-runtime] warning[W-SEC-020]: capsule orch declares capabilities.spawn.allow")
        assert err.rstrip().endswith("(https://docs.murmur.nexus/reference/diagnostics/#w-sec-020)")


class TestWarning:
    @pytest.mark.parametrize(
        ("acceptance", "after", "depth", "warned"),
        [
            ("queue", "sleep", 1, None),
            ("queue", "sleep", 0, "queue_depth is 0"),
            ("queue", "exit", 4, "after_task is exit"),
            ("single", "sleep", 4, "task_acceptance is single"),
            ("none", "exit", 4, "task_acceptance is none"),
        ],
    )
    def test_receivable_lifecycles(self, acceptance: str, after: str, depth: int, warned: str | None) -> None:
        """Only queue + sleep with a queue depth of at least 1 receives completions."""
        m = capsule(spawn=("w",), acceptance=acceptance, after=after, depth=depth)
        diag = completion_warning("orch", Policy.build(m.lifecycle))
        if warned is None:
            assert diag is None
        else:
            assert diag is not None and diag.code == "W-SEC-020" and warned in diag.message


class TestPlanCompletions:
    async def test_completion_task_is_a_record(self, tmp_path: Path) -> None:
        """A completion-origin task is summarised, never a new plan run; others run the plan."""
        ran: list[str] = []

        class Plan:
            async def run_task(self, ctx: TaskContext) -> TaskOutcome:
                ran.append(ctx.text)
                return TaskOutcome("ok", "planned")

        wrapped = PlanCompletions(Plan())
        setup = make_setup(tmp_path, capsule(), wrapped)
        text = json.dumps({"delegation_id": "dlg_1", "capsule_name": "w", "capsule_version": "0.1.0", "status": "crashed",
                           "detail": "exit status 3"})
        ctx = TaskContext("ses_x", "tsk_1", "ctx_1", text, "completion", "trusted", setup.manifest, tmp_path, tmp_path,
                          tmp_path, None, "evt_1", {})  # type: ignore[arg-type]
        assert await wrapped.run_task(ctx) == TaskOutcome("ok", "delegation dlg_1 (w@0.1.0) ended crashed: exit status 3")
        ctx.origin = "event"
        assert (await wrapped.run_task(ctx)).answer == "planned" and ran == [text]
        assert completion_summary("junk") == "a delegation ended (its completion could not be read)"


class TestRegistration:
    async def test_registers_and_deregisters(self, tmp_path: Path, roost: StartRoost) -> None:
        """A delegating session registers at launch and deregisters with its outcome at the end."""
        m = capsule(spawn=("worker",))
        url = await roost([m, capsule("worker")], spawn_allow=["orch"])
        setup = make_setup(tmp_path, m, EchoWorkload())
        runtime = install(setup, {"MURMUR_ROOST_URL": url}, stdin_fd=closed_stdin())
        assert runtime is not None
        async with running(setup) as h, RoostClient(url) as client:
            assert runtime.registered and "msc1" not in repr(runtime)
            figures = await client.status(setup.session_id)
            assert figures is not None and (figures.status, figures.depth_remaining) == ("running", 3)
            h.session.wind_down(signal_wind_down("SIGTERM"))
            summary = await h.wait()
            assert summary.status == "ok"
            figures = await client.status(setup.session_id)
            assert figures is not None and figures.status == "complete"
        assert not runtime.registered

    async def test_unreachable_roost_refuses_launch(self, tmp_path: Path) -> None:
        """No daemon answering: the launch is refused with E-RUN-019 before readiness."""
        async with trio.open_nursery():
            with trio.socket.socket() as s:
                await s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        setup = make_setup(tmp_path, capsule(spawn=("worker",)), EchoWorkload())
        install(setup, {"MURMUR_ROOST_URL": f"http://127.0.0.1:{port}"}, stdin_fd=closed_stdin())
        async with running(setup) as h:
            summary = await h.wait()
        assert summary.diagnostic is not None and summary.diagnostic.code == "E-RUN-019"
        assert "did not answer" in summary.diagnostic.message and h.ready == {}
        hint = summary.diagnostic.hint or ""
        assert "mur-roost --port 7700 --spawn-allow" in hint and "spec/roost.md" in hint and "--help" not in hint

    async def test_refused_registration_refuses_launch(self, tmp_path: Path, roost: StartRoost) -> None:
        """The daemon's refusal (not in --spawn-allow) is E-RUN-019 carrying its message."""
        m = capsule(spawn=("worker",))
        url = await roost([m], spawn_allow=["someone-else"])
        setup = make_setup(tmp_path, m, EchoWorkload())
        install(setup, {"MURMUR_ROOST_URL": url}, stdin_fd=closed_stdin())
        async with running(setup) as h:
            summary = await h.wait()
        assert summary.diagnostic is not None and summary.diagnostic.code == "E-RUN-019"
        assert "capsule 'orch' is not in --spawn-allow" in summary.diagnostic.message

    async def test_unresolvable_capsule_hint_names_the_install(self, tmp_path: Path, roost: StartRoost) -> None:
        """Allowed but absent from the daemon's registry (a 500): the hint says where to install
        the artifact, not to change --spawn-allow (which already names it)."""
        m = capsule(spawn=("worker",))
        url = await roost([], spawn_allow=["orch"])
        setup = make_setup(tmp_path, m, EchoWorkload())
        install(setup, {"MURMUR_ROOST_URL": url}, stdin_fd=closed_stdin())
        async with running(setup) as h:
            summary = await h.wait()
        assert summary.diagnostic is not None and summary.diagnostic.code == "E-RUN-019"
        assert "could not be resolved from this daemon's registry" in summary.diagnostic.message
        hint = summary.diagnostic.hint or ""
        assert "mur install -g" in hint and "--registry-path" in hint and "--spawn-allow" not in hint

    async def test_spawn_refusal_is_a_refused_result(self, tmp_path: Path, roost: StartRoost) -> None:
        """The delegate service answers a daemon refusal with status refused and its sentence."""
        m = capsule(spawn=("worker", "other"))
        registry_view = capsule(spawn=("worker",))
        url = await roost([registry_view, capsule("worker")], spawn_allow=["orch"])
        gate = GateWorkload()
        setup = make_setup(tmp_path, m, gate)
        install(setup, {"MURMUR_ROOST_URL": url}, stdin_fd=closed_stdin())
        async with running(setup) as h:
            assert setup.services is not None
            task = h.session.book.new(text="t", message={}, origin="user", trust="trusted", lane="user", source="a2a")
            delegate = setup.services(task).delegate
            assert delegate is not None
            result = await delegate("other", "0.1.0", "hello", False)
        assert dict(result) == {"capsule": "other", "version": "0.1.0", "status": "refused",
                                "output": "capsule 'other' is not in parent's spawn_allow"}
        records = [json.loads(line) for line in setup.records.trace.read_text().splitlines()]
        (d,) = [r for r in records if r["event_type"] == "delegation"]
        assert (d["outcome"], d["delegation_id"], d["reason"]) == ("refused", None, "capsule 'other' is not in parent's spawn_allow")


class TestCompletionPath:
    async def test_child_reports_to_parent(self, tmp_path: Path) -> None:
        """At its end a child claims completion.json, posts once, and the parent runs a bg task."""
        parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
        parent_dir.mkdir()
        child_dir.mkdir()
        parent = make_setup(parent_dir, capsule(), EchoWorkload())
        book = DelegationBook(lambda *a, **k: None)
        parent.completion_handler = book.decide
        async with running(parent) as p:
            handle = handle_for(p.url, parent.session_id)
            book.open(Entry(handle.delegation_id, "worker", "0.1.0", "ctx_parent", "trusted", "child"))
            child = make_setup(child_dir, capsule("worker", acceptance="single", after="exit"), EchoWorkload(),
                               task_text="job")
            install(child, {"MURMUR_SPAWNER": handle.encode()}, stdin_fd=closed_stdin())
            async with running(child) as c:
                summary = await c.wait()
            assert summary.status == "ok"
            # the post returned only after the parent's door took it, so the task exists now
            (task,) = [t for t in p.session.all_tasks() if t.origin == "completion"]
            with trio.fail_after(5):
                while not task.terminal:
                    await task.changed().wait()
        assert (task.lane, task.trust, task.context_id) == ("bg", "trusted", "ctx_parent")
        fields = json.loads(task.text)
        assert (fields["delegation_id"], fields["status"], fields["session_id"]) == (handle.delegation_id, "ok", child.session_id)
        assert fields["result_path"] == f".murmur/{child.session_id}/out/result.txt"
        assert (child_dir / fields["result_path"]).read_text() == "echo: job\n"
        data = comp.read_completion(child_dir)
        assert data is not None and (data["reported_by"], data["delivered"], data["delivery_error"]) == ("child", True, None)

    async def test_undelivered_completion_does_not_fail_the_child(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Parent gone: completion.json records an undelivered outcome, the child ends ok, one stderr line."""
        with trio.socket.socket() as s:
            await s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        handle = handle_for(f"http://127.0.0.1:{port}", "ses_" + "8" * 32)
        child = make_setup(tmp_path, capsule("worker", acceptance="single", after="exit"), EchoWorkload(), task_text="job")
        install(child, {"MURMUR_SPAWNER": handle.encode()}, stdin_fd=closed_stdin())
        async with running(child) as c:
            summary = await c.wait()
        assert summary.status == "ok" and summary.exit_code == 0
        data = comp.read_completion(tmp_path)
        assert data is not None and (data["status"], data["delivered"]) == ("ok", False)
        assert "did not answer" in data["delivery_error"]
        err = capsys.readouterr().err.splitlines()
        assert len([line for line in err if handle.delegation_id in line]) == 1

    async def test_launcher_claimed_first(self, tmp_path: Path) -> None:
        """When the launcher already reported, the child reports nothing."""
        handle = handle_for("http://127.0.0.1:9", "ses_" + "8" * 32)
        claimed = comp.Record(comp.Completion(handle.delegation_id, "worker", "0.1.0", None, "terminated", str(tmp_path), 1),
                              "launcher")
        assert comp.claim(tmp_path, claimed)
        child = make_setup(tmp_path, capsule("worker", acceptance="single", after="exit"), EchoWorkload(), task_text="job")
        install(child, {"MURMUR_SPAWNER": handle.encode()}, stdin_fd=closed_stdin())
        async with running(child) as c:
            await c.wait()
        data = comp.read_completion(tmp_path)
        assert data is not None and (data["reported_by"], data["status"]) == ("launcher", "terminated")

    async def test_misaddressed_completion(self, tmp_path: Path) -> None:
        """A completion for another session gets the seed's JSON-RPC error."""
        parent = make_setup(tmp_path, capsule(), EchoWorkload())
        async with running(parent) as p, httpx.AsyncClient() as client:
            handle = handle_for(p.url, "ses_" + "7" * 32)
            c = comp.Completion(handle.delegation_id, "w", "0.1.0", None, "ok", "/x", 1)
            r = await client.post(p.url + "/", json=comp.request_body(handle, c), headers=comp.request_headers(handle))
            err = r.json()["error"]
        assert err["code"] == -31001
        assert err["message"] == f"completion is addressed to session {handle.session_id}, which is not the session running here"


class TestSpawnerLifeline:
    async def test_eof_winds_the_child_down(self, tmp_path: Path) -> None:
        """The parent's end (lifeline EOF) writes spawner_ended and ends the child like SIGTERM."""
        r, w = os.pipe()
        handle = handle_for("http://127.0.0.1:9", "ses_" + "6" * 32)
        gate = GateWorkload()
        setup = make_setup(tmp_path, capsule("worker"), gate, task_text="job")
        install(setup, {"MURMUR_SPAWNER": handle.encode(), "MURMUR_SPAWNER_LIFELINE": str(r)}, stdin_fd=closed_stdin())
        async with running(setup) as h:
            with trio.fail_after(5):
                await gate.started.wait()
            os.close(w)
            summary = await h.wait()
        assert summary.status == "canceled" and gate.cancelled == ["job"]
        records = [json.loads(line) for line in setup.records.trace.read_text().splitlines()]
        (ended,) = [x for x in records if x["event_type"] == "spawner_ended"]
        assert (ended["spawned_by"], ended["delegation_id"]) == (handle.session_id, handle.delegation_id)
        kinds = [x["event_type"] for x in records]
        assert kinds.index("spawner_ended") < kinds.index("task_end")
        data = comp.read_completion(tmp_path)
        assert data is not None and (data["status"], data["delivered"]) == ("error", False)
