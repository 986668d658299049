"""end_within: ask, grace, SIGKILL, reap — under MockClock with a scripted process."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from murmur.procs import end_within


class Scripted:
    """A process that exits ``exits_after`` seconds after it is asked (never, when None)."""

    def __init__(self, exits_after: float | None, *, running: bool = True) -> None:
        self.exits_after = exits_after
        self.returncode: int | None = None if running else 0
        self.done = trio.Event()
        if not running:
            self.done.set()
        self.log: list[tuple[str, float]] = []
        self.nursery: trio.Nursery | None = None

    def ask(self) -> None:
        self.log.append(("ask", trio.current_time()))
        if self.exits_after is not None and self.returncode is None:
            assert self.nursery is not None
            self.nursery.start_soon(self._exit_later)

    async def _exit_later(self) -> None:
        assert self.exits_after is not None
        await trio.sleep(self.exits_after)
        self._exit(143)

    def _exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self.done.set()

    def kill(self) -> None:
        self.log.append(("kill", trio.current_time()))
        self._exit(-9)

    async def wait(self) -> None:
        await self.done.wait()


@pytest.mark.parametrize(
    ("exits_after", "running", "killed", "code", "log"),
    [
        (3.0, True, False, 143, [("ask", 0.0)]),  # ends within the grace: never killed
        (None, True, True, -9, [("ask", 0.0), ("kill", 10.0)]),  # ignores the ask: killed at the grace
        (10.5, True, True, -9, [("ask", 0.0), ("kill", 10.0)]),  # would end just too late
        (None, False, False, 0, [("ask", 0.0)]),  # already reaped: asked (lifeline closed), nothing more
    ],
)
async def test_escalation(
    autojump_clock: trio.testing.MockClock,
    exits_after: float | None,
    running: bool,
    killed: bool,
    code: int,
    log: list[tuple[str, float]],
) -> None:
    """The ask comes first, the kill exactly ``grace`` later and only if still alive; reaped after."""
    proc = Scripted(exits_after, running=running)
    async with trio.open_nursery() as n:
        proc.nursery = n
        got = await end_within(10.0, ask=proc.ask, alive=lambda: proc.returncode is None, wait=proc.wait, kill=proc.kill)
        n.cancel_scope.cancel()
    assert (got, proc.returncode, proc.log) == (killed, code, log)


async def test_finishes_shielded_under_cancellation(autojump_clock: trio.testing.MockClock) -> None:
    """Run shielded inside a cancelled scope, it still waits the grace and kills."""
    proc = Scripted(None)
    async with trio.open_nursery() as n:
        proc.nursery = n
        with trio.CancelScope() as outer:
            outer.cancel()
            with trio.CancelScope(shield=True):
                await end_within(5.0, ask=proc.ask, alive=lambda: proc.returncode is None, wait=proc.wait, kill=proc.kill)
        n.cancel_scope.cancel()
    assert proc.log == [("ask", 0.0), ("kill", 5.0)] and proc.returncode == -9
