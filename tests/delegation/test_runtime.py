"""The delegation runtime's completion handler: awaited completions while the session closes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import trio

from murmur.delegation import completion as comp
from murmur.delegation.book import Entry
from murmur.delegation.contributor import install
from murmur.delegation.runtime import DelegationRuntime
from murmur.delegation.spawner import SpawnerHandle
from murmur.ids import new_id
from murmur.manifest.model import AfterTask, Lifecycle, Manifest, TaskAcceptance
from murmur.session.setup import SessionSetup, SessionSummary
from session.helpers import EchoWorkload, make_setup, running


def capsule(name: str, acceptance: str = "queue", after: str = "sleep") -> Manifest:
    return Manifest(
        name, "0.1.0",
        lifecycle=Lifecycle(task_acceptance=TaskAcceptance(acceptance), after_task=AfterTask(after), queue_depth=1),
    )


def closed_stdin() -> int:
    r, w = os.pipe()
    os.close(w)
    return r


def parent_with_runtime(workdir: Path) -> tuple[SessionSetup, DelegationRuntime]:
    """A launch-task parent whose completions go through a DelegationRuntime (no daemon needed)."""
    setup = make_setup(workdir, capsule("boss"), EchoWorkload(), task_text="hi")
    events: list[tuple[str, dict[str, Any]]] = []
    runtime = DelegationRuntime(setup, {}, roost_url=None, spawner=None, approval=None, lifeline_fd=None)
    runtime.book._emit = lambda event, **fields: events.append((event, fields))
    setup.start_hooks.append(runtime.start)
    setup.completion_handler = runtime.completion
    return setup, runtime


async def post(url: str, handle: SpawnerHandle, status: str = "ok") -> dict[str, Any]:
    c = comp.Completion(handle.delegation_id, "kid", "0.1.0", None, status, "/x", 1)
    async with httpx.AsyncClient() as client:
        r = await client.post(url + "/", json=comp.request_body(handle, c), headers=comp.request_headers(handle))
    body: dict[str, Any] = r.json()
    return body


class TestCompletionWhileClosing:
    async def test_released_child_reports_into_a_closing_parent(self, tmp_path: Path) -> None:
        """A child reporting after its parent's launch task ended is delivered; no task is queued."""
        parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
        parent_dir.mkdir()
        child_dir.mkdir()
        parent, runtime = parent_with_runtime(parent_dir)
        dlg = new_id("dlg")
        runtime.book.open(Entry(dlg, "kid", "0.1.0", "ctx_parent", "trusted", "child"))
        seen: dict[str, Any] = {}

        async def child_reports_at_close(summary: SessionSummary) -> None:
            session = runtime._session
            assert session is not None and session.url is not None
            seen["closing"] = session.closing
            handle = SpawnerHandle(session.url, parent.session_id, "ctx_parent", "trusted", dlg)
            child = make_setup(child_dir, capsule("kid", "single", "exit"), EchoWorkload(), task_text="job")
            install(child, {"MURMUR_SPAWNER": handle.encode()}, stdin_fd=closed_stdin())
            async with running(child) as c:
                seen["child"] = await c.wait()

        parent.end_hooks.append(child_reports_at_close)
        async with running(parent) as p:
            summary = await p.wait()
            tasks = p.session.all_tasks()
        assert summary.status == "ok" and seen["closing"] is True and seen["child"].status == "ok"
        data = comp.read_completion(child_dir)
        assert data is not None
        assert (data["reported_by"], data["status"], data["delivered"], data["delivery_error"]) == ("child", "ok", True, None)
        assert [t.origin for t in tasks] == ["user"]  # taken without a task: the runner has stopped
        entry = runtime.book.get(dlg)
        assert entry is not None and (entry.closed, entry.outcome) == (True, "ok")

    async def test_closing_parent_still_refuses_what_it_does_not_await(self, tmp_path: Path) -> None:
        """While closing, an unknown delegation and a settled one are still refused with -31002."""
        parent, runtime = parent_with_runtime(tmp_path)
        dlg = new_id("dlg")
        runtime.book.open(Entry(dlg, "kid", "0.1.0", "ctx_parent", "trusted", "child"))
        answers: list[dict[str, Any]] = []

        async def post_at_close(summary: SessionSummary) -> None:
            session = runtime._session
            assert session is not None and session.url is not None
            for d in (new_id("dlg"), dlg, dlg):
                answers.append(await post(session.url, SpawnerHandle(session.url, parent.session_id, "ctx_parent", "trusted", d)))

        parent.end_hooks.append(post_at_close)
        async with running(parent) as p:
            await p.wait()
        unknown, taken, again = answers
        assert unknown["error"]["code"] == -31002
        assert unknown["error"]["message"].startswith("this session awaits no completion for delegation dlg_")
        assert comp.delivery_problem(200, taken) is None
        assert (again["error"]["code"], again["error"]["message"]) == (
            -31002, f"delegation {dlg} has already reported its outcome")

    async def test_open_parent_still_queues_a_completion_task(self, tmp_path: Path) -> None:
        """Before the session closes, an accepted completion is a bg-lane task as before."""
        setup = make_setup(tmp_path, capsule("boss"), EchoWorkload())
        runtime = DelegationRuntime(setup, {}, roost_url=None, spawner=None, approval=None, lifeline_fd=None)
        runtime.book._emit = lambda *a, **k: None
        setup.start_hooks.append(runtime.start)
        setup.completion_handler = runtime.completion
        dlg = new_id("dlg")
        runtime.book.open(Entry(dlg, "kid", "0.1.0", "ctx_parent", "trusted", "child"))
        async with running(setup) as p:
            assert p.url is not None
            answer = await post(p.url, SpawnerHandle(p.url, setup.session_id, "ctx_parent", "trusted", dlg))
            (task,) = p.session.all_tasks()
            with trio.fail_after(5):
                while not task.terminal:
                    await task.changed().wait()
        assert comp.delivery_problem(200, answer) is None
        assert (task.origin, task.lane, task.context_id) == ("completion", "bg", "ctx_parent")
