"""Refusals of the capability socket's request line say what to change (spec/links.md; issue 32)."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from murmur.links import protocol as p
from murmur.links.service import _read_line


@pytest.mark.parametrize("task", ["", "   ", "\n\t"])
def test_an_empty_task_is_refused_with_a_hint(task: str) -> None:
    """`kid ""` used to send an empty task to a child; now nothing is started."""
    raw = json.dumps({"op": "link", "name": "kid", "task": task}).encode()
    with pytest.raises(p.BadRequest) as info:
        p.parse_request(raw)
    assert "the task for kid is empty" in str(info.value)
    assert info.value.hint is not None and 'kid "what to do"' in info.value.hint


def test_a_task_is_parsed() -> None:
    """Negative control: a task with words is a request."""
    req = p.parse_request(json.dumps({"op": "link", "name": "kid", "task": " hi "}).encode())
    assert (req.name, req.task) == ("kid", " hi ")


async def test_a_request_over_1_mib_is_refused_with_a_hint() -> None:
    send, receive = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send.send_all, b"x" * (p.REQUEST_LIMIT + 70000))
        with pytest.raises(p.BadRequest) as info:
            await _read_line(receive)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()
    assert "longer than 1 MiB" in str(info.value)
    assert info.value.hint is not None and "file" in info.value.hint
