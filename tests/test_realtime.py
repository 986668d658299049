"""murmur.realtime.wait_real: a real-time bound that holds an autojumping MockClock still."""

from __future__ import annotations

import threading
import time

import trio
import trio.testing

from murmur import realtime


def test_it_waits_on_trio_s_own_function() -> None:
    """The private import names what trio.testing exports (an upgrade that moves it fails here)."""
    assert realtime.wait_all_tasks_blocked is trio.testing.wait_all_tasks_blocked


async def test_a_thread_s_work_does_not_jump_the_clock(autojump_clock: trio.testing.MockClock) -> None:
    """While a thread works for real time, virtual time stays put: a timer does not fire."""
    done = trio.Event()
    token = trio.lowlevel.current_trio_token()
    threading.Thread(target=lambda: (time.sleep(0.1), token.run_sync_soon(done.set)), daemon=True).start()
    t0 = trio.current_time()
    with trio.move_on_after(30) as timer:
        assert await realtime.wait_real(done.wait, 10.0)
    assert not timer.cancelled_caught
    assert trio.current_time() - t0 < 1.0


async def test_the_bound_is_real_seconds(autojump_clock: trio.testing.MockClock) -> None:
    """Nothing happens: the wait gives up after its bound in real seconds, not at once."""
    t0 = time.monotonic()
    assert not await realtime.wait_real(trio.sleep_forever, 0.2)
    assert time.monotonic() - t0 >= 0.2
