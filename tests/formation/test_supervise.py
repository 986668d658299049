"""Tests of stopping one member: lifeline close, the kill bound, reaping (fakes, MockClock)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from murmur.exitstatus import describe, shell_status
from murmur.formation.launch.supervise import (
    Failure,
    PeerBoard,
    exited_before_reporting,
    stop_member,
)

from ._fakes import FakeMember, Script


def _member(script: Script, nursery: trio.Nursery) -> FakeMember:
    from murmur.formation.launch.supervise import MemberSpec

    m = FakeMember(MemberSpec("m", ("x",), {}, "/", b"", True), script, "frm_" + "0" * 32)
    nursery.start_soon(m.life)
    return m


class TestStopMember:
    async def test_cooperative(self, autojump_clock: trio.testing.MockClock) -> None:
        """A member that winds down on EOF is reaped without a kill."""
        async with trio.open_nursery() as n:
            m = _member(Script(teardown=2.0, report_after=None), n)
            await trio.sleep(1.0)
            stopped = await stop_member(m, kill_after=25.0)
        assert stopped.returncode == 0 and stopped.by_launcher and not stopped.killed
        assert m.exited_at - m.lifeline_closed_at == pytest.approx(2.0)

    async def test_stubborn(self, autojump_clock: trio.testing.MockClock) -> None:
        """A member ignoring EOF is SIGKILLed exactly kill_after seconds after the close."""
        async with trio.open_nursery() as n:
            m = _member(Script(on_lifeline="ignore", report_after=None), n)
            stopped = await stop_member(m, kill_after=25.0)
        assert stopped.killed and stopped.returncode == -9
        assert m.killed_at - m.lifeline_closed_at == pytest.approx(25.0)

    async def test_already_exited(self, autojump_clock: trio.testing.MockClock) -> None:
        """A member that already exited was not stopped by the launcher."""
        async with trio.open_nursery() as n:
            m = _member(Script(exit_after=1.0, exit_code=5, report_after=None), n)
            await m.wait()
            stopped = await stop_member(m, kill_after=25.0)
        assert stopped.returncode == 5 and not stopped.by_launcher and not stopped.killed

    async def test_shielded_under_cancel(self, autojump_clock: trio.testing.MockClock) -> None:
        """Inside a cancelled scope, a shielded stop still waits the full bound."""
        async with trio.open_nursery() as n:
            m = _member(Script(on_lifeline="ignore", report_after=None), n)
            with trio.CancelScope() as scope:
                scope.cancel()
                with trio.CancelScope(shield=True):
                    stopped = await stop_member(m, kill_after=25.0)
        assert stopped.killed and trio.current_time() == pytest.approx(25.0)


class TestWording:
    @pytest.mark.parametrize(("code", "text", "shell"),
                             [(0, "status 0", 0), (3, "status 3", 3), (-9, "signal SIGKILL", 137),
                              (-15, "signal SIGTERM", 143)])
    def test_status(self, code: int, text: str, shell: int) -> None:
        """Exit statuses read as the host reports them."""
        assert describe(code) == text and shell_status(code) == shell

    def test_stderr_quoted(self) -> None:
        """The last stderr lines follow the reason, one indented line each."""
        r = exited_before_reporting(1, ["", "error[E-RUN-008]: not installed"])
        assert r == ("exited with status 1 before reporting; its last stderr lines:\n"
                     "    | error[E-RUN-008]: not installed")


class TestBoard:
    def test_settles_on_all_ready_or_first_failure(self) -> None:
        """The board settles when every peer is ready, or at the first refusal."""
        empty = PeerBoard([])
        assert empty.settled.is_set()
        b = PeerBoard(["a", "b"])
        b.mark_failed(Failure("b", "x"))
        assert b.settled.is_set() and [f.name for f in b.failures_in_order()] == ["b"]
