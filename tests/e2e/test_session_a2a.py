"""Interop: the official a2a-sdk 1.x client against live `mur run` processes (public and bearer)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AuthInterceptor,
    ClientCallContext,
    ClientConfig,
    InMemoryContextCredentialStore,
    create_client,
)
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from ._session import SLEEP_PLAN, MurProcess, env_for, write_capsule

pytestmark = pytest.mark.e2e
T = TypeVar("T")
CAPSULE_EXT = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1"


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an asyncio coroutine function (the SDK is asyncio-based)."""
    return asyncio.run(fn())  # type: ignore[arg-type]


def message(text: str) -> Message:
    return Message(message_id=f"m-{text}-{id(text)}", role=Role.ROLE_USER, parts=[Part(text=text)])


def send(text: str, *, immediately: bool = False) -> SendMessageRequest:
    req = SendMessageRequest(message=message(text))
    if immediately:
        req.configuration.return_immediately = True
    return req


@pytest.fixture(scope="module")
def public_door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MurProcess]:
    """One queue+sleep session serving a public door, shared by this module's tests."""
    root = tmp_path_factory.mktemp("a2a-public")
    capsule = write_capsule(root, "slow", plan=SLEEP_PLAN, allow=["sleep"])
    p = MurProcess(["--json"], cwd=capsule, env=env_for(root / "home"))
    try:
        p.read_ready()
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module")
def bearer_door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MurProcess]:
    """One session serving an authenticated door with a `reader` credential."""
    root = tmp_path_factory.mktemp("a2a-bearer")
    capsule = write_capsule(root, "guarded", plan=SLEEP_PLAN, allow=["sleep"], auth={"reader": ["GetTask", "ListTasks"]})
    p = MurProcess(["--json"], cwd=capsule, env=env_for(root / "home"))
    try:
        p.read_ready()
        yield p
    finally:
        p.close()


async def collect(stream: Any) -> list[StreamResponse]:
    return [ev async for ev in stream]


class TestPublicDoor:
    def test_card(self, public_door: MurProcess) -> None:
        """create_client reads the card: JSON-RPC 1.0 interface, streaming, the session id."""

        async def go() -> Any:
            async with httpx.AsyncClient() as http:
                return await A2ACardResolver(http, public_door.url).get_agent_card()

        card = run(go)
        assert card.name == "slow" and card.version == "0.1.0"
        assert card.capabilities.streaming
        iface = card.supported_interfaces[0]
        assert (iface.protocol_binding, iface.protocol_version, iface.url) == ("JSONRPC", "1.0", public_door.url + "/")
        exts = {e.uri: e for e in card.capabilities.extensions}
        assert exts[CAPSULE_EXT].params["sessionId"] == public_door.ready["session_id"]

    def test_send_get_list(self, public_door: MurProcess) -> None:
        """Blocking SendMessage completes with the answer; GetTask and ListTasks agree."""

        async def go() -> tuple[Any, Any, Any]:
            client = await create_client(public_door.url, client_config=ClientConfig(streaming=False))
            try:
                events = await collect(client.send_message(send("0")))
                task = events[-1].task
                got = await client.get_task(GetTaskRequest(id=task.id))
                listed = await client.list_tasks(ListTasksRequest())
                with pytest.raises(TaskNotFoundError):
                    await client.get_task(GetTaskRequest(id="tsk_unknown"))
                return task, got, listed
            finally:
                await client.close()

        task, got, listed = run(go)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "slept 0"
        assert got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.id in [t.id for t in listed.tasks] and listed.total_size >= 1

    def test_streaming_send(self, public_door: MurProcess) -> None:
        """The default (streaming) client sees task, working, artifact and completed."""

        async def go() -> list[StreamResponse]:
            client = await create_client(public_door.url)
            try:
                return await collect(client.send_message(send("0")))
            finally:
                await client.close()

        events = run(go)
        kinds = [ev.WhichOneof("payload") for ev in events]
        assert kinds == ["task", "status_update", "artifact_update", "status_update"]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

    def test_cancel_and_subscribe(self, public_door: MurProcess) -> None:
        """Subscribe to a running task past the client's 5 s read timeout, then cancel it."""

        async def go() -> tuple[list[StreamResponse], Any]:
            client = await create_client(public_door.url)
            poller = await create_client(public_door.url, client_config=ClientConfig(streaming=False))
            try:
                first = await collect(poller.send_message(send("60", immediately=True)))
                tid = first[0].task.id
                assert first[0].task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
                sub = asyncio.create_task(collect(client.subscribe(SubscribeToTaskRequest(id=tid))))
                await asyncio.sleep(6)  # longer than httpx's default 5 s: keep-alives hold it open
                assert not sub.done()
                canceled = await client.cancel_task(CancelTaskRequest(id=tid))
                events = await asyncio.wait_for(sub, 10)
                with pytest.raises(TaskNotCancelableError):
                    await client.cancel_task(CancelTaskRequest(id=tid))
                return events, canceled
            finally:
                await client.close()
                await poller.close()

        events, canceled = run(lambda: asyncio.wait_for(go(), 40))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert events[0].WhichOneof("payload") == "task"
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED


class TestBearerDoor:
    def test_without_token_refused(self, bearer_door: MurProcess) -> None:
        """Without a credential the SDK gets HTTP 401 (the card itself is public)."""

        async def go() -> None:
            async with httpx.AsyncClient() as http:
                card = await A2ACardResolver(http, bearer_door.url).get_agent_card()
            assert "bearer" in card.security_schemes
            client = await create_client(bearer_door.url, client_config=ClientConfig(streaming=False))
            try:
                with pytest.raises(A2AClientError, match="401"):
                    await collect(client.send_message(send("0")))
            finally:
                await client.close()

        run(go)

    def test_with_tokens(self, bearer_door: MurProcess) -> None:
        """With the operator token the SDK sends; the reader token reads but may not send."""
        tokens = bearer_door.ready["tokens"]

        async def go() -> Any:
            store = InMemoryContextCredentialStore()
            await store.set_credentials("op", "bearer", tokens["operator"])
            await store.set_credentials("rd", "bearer", tokens["reader"])
            client = await create_client(
                bearer_door.url, client_config=ClientConfig(streaming=False), interceptors=[AuthInterceptor(store)]
            )
            op = ClientCallContext(state={"sessionId": "op"})
            rd = ClientCallContext(state={"sessionId": "rd"})
            try:
                events = await collect(client.send_message(send("0"), context=op))
                task = events[-1].task
                got = await client.get_task(GetTaskRequest(id=task.id), context=rd)
                with pytest.raises(A2AClientError, match="403"):
                    await collect(client.send_message(send("0"), context=rd))
                return got
            finally:
                await client.close()

        got = run(go)
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
