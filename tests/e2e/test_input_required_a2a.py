"""The official a2a-sdk client completes a multi-turn exchange with a live door of ours.

The session runs ``tests/e2e/ask_driver.py`` (`mur run` with a workload that asks through
``TaskContext.request_input``): the task reaches INPUT_REQUIRED, the client answers with the
same taskId, the task completes — blocking and streaming — and the routing refusals come back
as the SDK's mapped errors (-32001 TaskNotFoundError, -32004 UnsupportedOperationError,
-32602 InvalidParamsError).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError

from ._session import ECHO_PLAN, MUR, MurProcess, env_for, write_capsule

pytestmark = pytest.mark.e2e
DRIVER = [sys.executable, str(Path(__file__).with_name("ask_driver.py"))]
PROMPT = "Which environment? (staging or prod)"


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MurProcess]:
    root = tmp_path_factory.mktemp("ask")
    capsule = write_capsule(root, "asker", plan=ECHO_PLAN, allow=["echo"])
    p = MurProcess(["--json", "--lifecycle-task-acceptance", "queue", "--lifecycle-after-task", "sleep"],
                   cwd=capsule, env=env_for(root / "home"), cmd=DRIVER)
    try:
        p.read_ready()
        yield p
    finally:
        p.close()


def request(text: str, *, task_id: str | None = None, context_id: str | None = None) -> SendMessageRequest:
    msg = Message(message_id=f"m-{text}-{id(text)}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id is not None:
        msg.task_id = task_id
    if context_id is not None:
        msg.context_id = context_id
    return SendMessageRequest(message=msg)


async def collect(stream: Any) -> list[StreamResponse]:
    return [ev async for ev in stream]


def test_blocking_multi_turn(door: MurProcess) -> None:
    """INPUT_REQUIRED with the prompt artifact; the answer with the same taskId completes it."""

    async def go() -> tuple[Any, Any, Any]:
        client = await create_client(door.url, client_config=ClientConfig(streaming=False))
        try:
            asked = (await collect(client.send_message(request("ask"))))[-1].task
            seen = await client.get_task(GetTaskRequest(id=asked.id))
            done = (await collect(client.send_message(request("staging", task_id=asked.id,
                                                              context_id=asked.context_id))))[-1].task
            return asked, seen, done
        finally:
            await client.close()

    asked, seen, done = asyncio.run(go())
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [(a.artifact_id, a.parts[0].text) for a in seen.artifacts] == [("prompt", PROMPT)]
    assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[-1].parts[0].text == "deploying to staging"


def test_streaming_multi_turn(door: MurProcess) -> None:
    """The streaming client sees input-required, answers on the same taskId, and sees resumed and completed."""

    async def go() -> list[StreamResponse]:
        streamer = await create_client(door.url)
        answerer = await create_client(door.url, client_config=ClientConfig(streaming=False))
        events: list[StreamResponse] = []
        try:
            async for ev in streamer.send_message(request("ask")):
                events.append(ev)
                if ev.WhichOneof("payload") == "status_update" and \
                        ev.status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    su = ev.status_update
                    await collect(answerer.send_message(request("prod", task_id=su.task_id, context_id=su.context_id)))
            return events
        finally:
            await streamer.close()
            await answerer.close()

    events = asyncio.run(asyncio.wait_for(go(), 30))
    states = [(ev.status_update.status.state, ev.status_update.status.message.parts[0].text
               if ev.status_update.status.message.parts else "")
              for ev in events if ev.WhichOneof("payload") == "status_update"]
    assert (TaskState.TASK_STATE_INPUT_REQUIRED, PROMPT) in states
    i = states.index((TaskState.TASK_STATE_INPUT_REQUIRED, PROMPT))
    assert states[i + 1] == (TaskState.TASK_STATE_WORKING, "resumed")
    assert states[-1] == (TaskState.TASK_STATE_COMPLETED, "deploying to prod")
    assert [ev.artifact_update.artifact.parts[0].text for ev in events
            if ev.WhichOneof("payload") == "artifact_update"] == ["deploying to prod"]


def test_refusals_come_back_as_the_codes_named(door: MurProcess) -> None:
    """Unknown taskId -32001; another contextId -32602; an ended task -32004."""

    async def go() -> None:
        client = await create_client(door.url, client_config=ClientConfig(streaming=False))
        try:
            with pytest.raises(TaskNotFoundError):
                await collect(client.send_message(request("x", task_id="tsk_unknown")))
            asked = (await collect(client.send_message(request("ask"))))[-1].task
            with pytest.raises(InvalidParamsError):
                await collect(client.send_message(request("x", task_id=asked.id, context_id="ctx_other")))
            await collect(client.send_message(request("staging", task_id=asked.id, context_id=asked.context_id)))
            with pytest.raises(UnsupportedOperationError):
                await collect(client.send_message(request("again", task_id=asked.id, context_id=asked.context_id)))
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_waiting_task_shows_in_mur_ps(door: MurProcess) -> None:
    """`mur ps` and `mur ps --tree` show the session input-required with the prompt on one line."""
    env = door_env(door)

    async def ask() -> Any:
        client = await create_client(door.url, client_config=ClientConfig(streaming=False))
        try:
            return (await collect(client.send_message(request("ask from ps"))))[-1].task
        finally:
            await client.close()

    async def answer(task: Any) -> Any:
        client = await create_client(door.url, client_config=ClientConfig(streaming=False))
        try:
            return (await collect(client.send_message(request("prod", task_id=task.id,
                                                              context_id=task.context_id))))[-1].task
        finally:
            await client.close()

    task = asyncio.run(ask())
    try:
        flat = subprocess.run([*MUR, "ps"], env=env, capture_output=True, text=True, timeout=60)
        rows = subprocess.run([*MUR, "ps", "--json"], env=env, capture_output=True, text=True, timeout=60)
        tree = subprocess.run([*MUR, "ps", "--tree"], env=env, capture_output=True, text=True, timeout=60)
    finally:
        done = asyncio.run(answer(task))
    sid = door.ready["session_id"]
    row = next(line for line in flat.stdout.splitlines() if line.startswith(sid))
    assert " input-required " in row
    assert f"  └─ {task.id} input-required: {PROMPT}" in flat.stdout.splitlines()
    (listed,) = [r for r in json.loads(rows.stdout) if r["session_id"] == sid]
    assert listed["status"] == "input-required" and listed["waiting"] == [{"task_id": task.id, "prompt": PROMPT}]
    (line,) = [x for x in tree.stdout.splitlines() if "asker" in x]
    assert "input-required" in line and f"[{PROMPT}]" in line
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    after = subprocess.run([*MUR, "ps", "--json"], env=env, capture_output=True, text=True, timeout=60)
    (again,) = [r for r in json.loads(after.stdout) if r["session_id"] == sid]
    assert again["status"] == "running" and again["waiting"] == []


def door_env(door: MurProcess) -> dict[str, str]:
    """The environment the door's session runs with (its MURMUR_HOME)."""
    home = Path(str(door.ready["records_dir"])).parents[0]
    while home.name != "records":
        home = home.parent
    return {**os.environ, "MURMUR_HOME": str(home.parent)}
