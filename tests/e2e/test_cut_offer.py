"""A ``call-member`` offer cut after the member took it leaves no work behind.

Specification: ``spec/formation.md`` "``call-member``" and ``spec/door.md`` "Cancelling by the
offer's messageId". The member is a real ``mur run`` door; the caller is the real
:class:`murmur.formation.member.calls.CallEngine` over real HTTP, with the answer to its offer held
back (as a slow or lost reply would be), so the member has taken the task but the caller never
learnt its id. The calling task then ends (a cancel): the member's task ends ``canceled``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from murmur.formation.member.addresses import AddressBook
from murmur.formation.member.calls import CallEngine

from ._session import SLEEP_PLAN, MurProcess, env_for, write_capsule

pytestmark = [pytest.mark.e2e]


class _HeldAnswers(httpx.AsyncBaseTransport):
    """Real HTTP, except that the answer to a ``SendMessage`` never comes back."""

    def __init__(self) -> None:
        self._real = httpx.AsyncHTTPTransport()
        self.taken = trio.Event()
        self.methods: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        method = json.loads(request.content).get("method")
        self.methods.append(method)
        response = await self._real.handle_async_request(request)
        await response.aread()
        if method == "SendMessage":
            self.taken.set()
            await trio.sleep_forever()
        return response

    async def aclose(self) -> None:
        await self._real.aclose()


@pytest.fixture
def member(tmp_path: Path) -> Iterator[MurProcess]:
    capsule = write_capsule(tmp_path, "worker", plan=SLEEP_PLAN, allow=["sleep"])
    manifest = capsule / "murmur.yaml"
    manifest.write_text(manifest.read_text() + "exports:\n  peer_tasks:\n    accept: true\n")
    p = MurProcess(["--json"], cwd=capsule, env=env_for(tmp_path / "home"))
    try:
        p.read_ready()
        yield p
    finally:
        p.close()


def _tasks(url: str) -> list[dict[str, object]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    got = httpx.post(url.rstrip("/") + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
    return list(got["result"]["tasks"])


async def test_a_caller_cancelled_mid_offer_leaves_the_member_task_canceled(member: MurProcess) -> None:
    book = AddressBook(["worker"])
    book.update({"worker": member.url})
    held = _HeldAnswers()
    engine = CallEngine(member="lead", tokens={"worker": "t"}, addresses=book, network_allow=["localhost"],
                        transport=held, in_flight_grace=0.2)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(engine.run)

            async def calling_task() -> None:
                await engine.call("tsk_caller", "untrusted", "worker", "30")

            nursery.start_soon(calling_task)
            await held.taken.wait()  # the member took it; its answer is held back
            (working,) = await trio.to_thread.run_sync(_tasks, member.url)
            assert working["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")  # type: ignore[index]
            engine.task_ended("tsk_caller")  # the calling task was cancelled
            await engine.drain()
            nursery.cancel_scope.cancel()
    assert "CancelTask" in held.methods
    (task,) = await trio.to_thread.run_sync(_tasks, member.url)
    assert task["id"] == working["id"]
    assert task["status"]["state"] == "TASK_STATE_CANCELED"  # type: ignore[index]
