"""The blocked-loop guard (tests/loop_guard.py) catches a blocking step, and only that (issue 31).

These are sync tests that call :func:`guarded_run` themselves, so the guard's verdict is the
thing under test; the session, formation and delegation tests run under it through
``tests/conftest.py``.
"""

from __future__ import annotations

import os
import time

import pytest
import trio

from loop_guard import BLOCKED_LIMIT, LoopGuard, guarded_run
from murmur import procs
from murmur.containment import Unit


def test_a_sleeping_step_is_caught_and_named() -> None:
    async def main() -> None:
        async def sleeper() -> None:
            time.sleep(2 * BLOCKED_LIMIT)  # noqa: ASYNC251 - the blocking call the guard must catch

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper, name="sleeper")

    guard = LoopGuard()
    trio.run(main, instruments=[guard])
    assert [name for name, _ in guard.blocked] == ["sleeper"]
    assert guard.blocked[0][1] >= 2 * BLOCKED_LIMIT * 0.9
    with pytest.raises(AssertionError, match="blocked for more than 100 ms by one task step: sleeper"):
        guard.check()


def test_waiting_in_trio_is_not_blocking() -> None:
    """The negative control: the same time spent in a Trio wait, and a short busy step."""
    async def main() -> None:
        await trio.sleep(2 * BLOCKED_LIMIT)
        end = time.perf_counter() + BLOCKED_LIMIT / 5
        while time.perf_counter() < end:
            pass

    guarded_run(main)


async def _release_a_running_unit() -> None:
    proc = await procs.open_process(["sleep", "60"], label="cmd", env=dict(os.environ))
    assert proc.unit is not None
    with trio.fail_after(10):
        while not proc.unit.populated():  # noqa: ASYNC110 - the trampoline joins a moment after the start
            await trio.sleep(0.005)
    await proc.unit.release()  # kills the sleep, waits for the unit to empty, removes it
    assert not proc.unit.populated()
    with trio.fail_after(10):
        await proc.wait()


def test_unit_release_does_not_block_the_loop() -> None:
    guarded_run(_release_a_running_unit)


def test_a_sleep_put_back_in_unit_release_fails_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    real = Unit.release

    async def release_with_sleep(self: Unit) -> None:
        time.sleep(0.2)  # noqa: ASYNC251 - what Unit.release did before issue 31, put back
        await real(self)

    monkeypatch.setattr(Unit, "release", release_with_sleep)
    with pytest.raises(AssertionError, match="blocked for more than 100 ms"):
        guarded_run(_release_a_running_unit)
