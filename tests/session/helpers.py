"""Shared test doubles for session tests: workloads, a session runner, a JSON-RPC client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from murmur.ids import new_id
from murmur.manifest.model import (
    AfterTask,
    Authentication,
    DoorCredential,
    Exports,
    Lifecycle,
    Manifest,
    Network,
    PeerTasks,
    TaskAcceptance,
)
from murmur.session.lifecycle import Policy
from murmur.session.records import create_records, records_dir_for
from murmur.session.session import Session
from murmur.session.setup import SessionSetup, SessionSummary
from murmur.session.winddown import signal_wind_down
from murmur.workload import TaskContext, TaskOutcome

A2A = {"A2A-Version": "1.0"}


class EchoWorkload:
    """Answers ``echo: <text>`` at once."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Echo the task text."""
        await trio.lowlevel.checkpoint()
        return TaskOutcome("ok", f"echo: {ctx.text}")


class FailWorkload:
    """Fails every task with a fixed message."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Fail."""
        await trio.lowlevel.checkpoint()
        return TaskOutcome("failed", "it broke")


class CrashWorkload:
    """Raises from every task (a workload bug)."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Raise."""
        await trio.lowlevel.checkpoint()
        raise RuntimeError("kaboom")


class GateWorkload:
    """Each task starts, signals ``started``, and waits until released (or cancelled).

    ``order`` records task texts in start order; ``cancelled`` those that saw cancellation.
    """

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()
        self.order: list[str] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Wait for the gate."""
        self.order.append(ctx.text)
        self.started.set()
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.cancelled.append(ctx.text)
            raise
        self.finished.append(ctx.text)
        return TaskOutcome("ok", f"done: {ctx.text}")

    def reset(self) -> None:
        """New events for the next task."""
        self.started = trio.Event()
        self.release = trio.Event()


class SleepWorkload:
    """Answers after ``delay`` seconds (for cancel races)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Sleep, then echo."""
        await trio.sleep(self.delay)
        return TaskOutcome("ok", f"echo: {ctx.text}")


def manifest(
    *,
    acceptance: str = "queue",
    after: str = "sleep",
    depth: int = 4,
    auth: dict[str, tuple[str, ...]] | None = None,
    peer: bool = False,
    name: str = "echo",
) -> Manifest:
    """A small manifest with the given lifecycle / authentication."""
    network = None
    if auth is not None:
        network = Network(Authentication("bearer", tuple(DoorCredential(n, s) for n, s in auth.items())))
    return Manifest(
        name=name,
        version="0.1.0",
        lifecycle=Lifecycle(task_acceptance=TaskAcceptance(acceptance), after_task=AfterTask(after), queue_depth=depth),
        network=network,
        exports=Exports(PeerTasks(True)) if peer else None,
    )


def make_setup(workdir: Path, m: Manifest, workload: Any, **kw: Any) -> SessionSetup:
    """A SessionSetup with a fresh records directory and no guard."""
    sid = new_id("ses")
    rec = create_records(records_dir_for(workdir, sid))
    policy_kw = {k: kw.pop(k) for k in ("launch_task", "idle_timeout", "no_idle_timeout") if k in kw}
    if "task_text" in kw:
        policy_kw.setdefault("launch_task", kw["task_text"] is not None)
    policy = Policy.build(m.lifecycle, **policy_kw)
    kw.setdefault("guard", None)
    kw.setdefault("keepalive", 0.05)
    return SessionSetup(
        manifest=m, capsule_root=workdir, workdir=workdir, session_id=sid, records=rec, policy=policy, workload=workload, **kw
    )


@attrs.define
class Handle:
    """A session running in the test's nursery."""

    session: Session
    ready: dict[str, Any]
    done: trio.Event
    box: dict[str, SessionSummary]

    @property
    def url(self) -> str:
        """The door's base URL."""
        return str(self.ready["url"])

    @property
    def summary(self) -> SessionSummary:
        """How the session ended (after ``done``)."""
        return self.box["summary"]

    async def wait(self, timeout: float = 10.0) -> SessionSummary:
        """Wait for the session to end."""
        with trio.fail_after(timeout):
            await self.done.wait()
        return self.summary


@asynccontextmanager
async def running(setup: SessionSetup) -> AsyncIterator[Handle]:
    """Run a session in a nursery; wind it down at exit if it is still running."""
    session = Session(setup)
    ready: dict[str, Any] = {}
    up = trio.Event()
    done = trio.Event()
    box: dict[str, SessionSummary] = {}

    async def go() -> None:
        try:
            box["summary"] = await session.run(lambda r: (ready.update(r), up.set()))
        finally:
            done.set()
            up.set()

    async with trio.open_nursery() as n:
        n.start_soon(go)
        await up.wait()
        handle = Handle(session, ready, done, box)
        try:
            yield handle
        finally:
            if not done.is_set():
                session.wind_down(signal_wind_down("SIGTERM"))
            with trio.fail_after(10):
                await done.wait()


def send_params(text: str, **config: Any) -> dict[str, Any]:
    """SendMessage params for one text part."""
    params: dict[str, Any] = {"message": {"messageId": new_id("msg"), "role": "ROLE_USER", "parts": [{"text": text}]}}
    if config:
        params["configuration"] = config
    return params


async def rpc(
    client: httpx.AsyncClient, method: str, params: Any = None, *, headers: dict[str, str] | None = None, rid: Any = 1
) -> httpx.Response:
    """POST one JSON-RPC request (A2A-Version 1.0 unless headers override)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return await client.post("/", json=body, headers={**A2A, **(headers or {})})


async def result(client: httpx.AsyncClient, method: str, params: Any = None, **kw: Any) -> Any:
    """The ``result`` of a successful call (asserts HTTP 200 and no error)."""
    r = await rpc(client, method, params, **kw)
    assert r.status_code == 200, r.text
    data = r.json()
    assert "error" not in data, data
    return data["result"]


async def error_code(client: httpx.AsyncClient, method: str, params: Any = None, **kw: Any) -> int:
    """The JSON-RPC error code of a failing call (asserts HTTP 200)."""
    r = await rpc(client, method, params, **kw)
    assert r.status_code == 200, r.text
    return int(r.json()["error"]["code"])


def sse_events(raw: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body's ``data:`` lines."""
    return [json.loads(line[5:]) for line in raw.splitlines() if line.startswith("data:")]
