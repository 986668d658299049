"""Tests of the signal policy: first signal winds down, second exits 143."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

from murmur.session.signals import (
    CASCADE_SIGNAL,
    SESSION_SIGNALS,
    EarlySignals,
    counted,
    hold_signals_to_exit,
    signal_watcher,
)
from murmur.session.winddown import WindDown


class Recorder:
    def __init__(self) -> None:
        self.reasons: list[WindDown] = []

    def trigger(self, reason: WindDown) -> None:
        self.reasons.append(reason)


class FakeReceiver:
    """An async iterator over fixed signal numbers (no generator to leave unclosed)."""

    def __init__(self, *sigs: int) -> None:
        self._sigs = list(sigs)

    def __aiter__(self) -> AsyncIterator[int]:
        return self

    async def __anext__(self) -> int:
        if not self._sigs:
            raise StopAsyncIteration
        return self._sigs.pop(0)


class TestWatcher:
    async def test_first_winds_down_second_exits(self) -> None:
        """One signal triggers a wind-down naming it; the second calls the exit with 143."""
        exits: list[int] = []
        ctl = Recorder()
        await signal_watcher(FakeReceiver(signal.SIGTERM, signal.SIGINT), exit_fn=exits.append)(ctl)
        assert [r.detail for r in ctl.reasons] == ["SIGTERM"]
        assert ctl.reasons[0].cancel_note == "the session received SIGTERM"
        assert exits == [143]

    async def test_early_signal_counts(self) -> None:
        """A signal received before the loop counts: the next one exits at once."""
        exits: list[int] = []
        ctl = Recorder()
        await signal_watcher(FakeReceiver(signal.SIGHUP), already=1, exit_fn=exits.append)(ctl)
        assert ctl.reasons == [] and exits == [143]


class TestEarly:
    def test_remember_then_exit(self) -> None:
        """The pre-loop handler remembers the first signal and exits on the second."""
        exits: list[int] = []
        early = EarlySignals(exits.append)
        early.handler(signal.SIGTERM, None)
        assert early.received == ["SIGTERM"] and exits == []
        early.handler(signal.SIGINT, None)
        assert exits == [143]

    async def test_a_signal_the_loop_handled_still_counts_after_it(self) -> None:
        """The loop's signal is noted in the early handlers, so one landing after ``trio.run``
        has returned is the second (it used to be a first, and the status was lost)."""
        exits: list[int] = []
        early = EarlySignals(exits.append)
        ctl = Recorder()
        receiver = counted(FakeReceiver(signal.SIGINT, CASCADE_SIGNAL), early)
        await signal_watcher(receiver, exit_fn=exits.append)(ctl)
        assert early.received == ["SIGINT"]  # the cascade signal is never counted
        assert exits == []
        early.handler(signal.SIGINT, None)  # after the loop: Trio handed the handler back
        assert exits == [143]

    def test_the_launcher_exits_128_plus_the_second_signal(self) -> None:
        exits: list[int] = []
        early = EarlySignals(exits.append, second_status=lambda signum: 128 + signum)
        early.note(signal.SIGTERM)
        early.handler(signal.SIGHUP, None)
        assert exits == [128 + signal.SIGHUP]

    def test_held_signals_are_ignored_and_stay_ignored(self) -> None:
        """Once the status is decided, a late signal cannot end the process by the signal."""
        import os

        saved = {sig: signal.getsignal(sig) for sig in (*SESSION_SIGNALS, CASCADE_SIGNAL)}
        try:
            hold_signals_to_exit()
            assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in saved)
            os.kill(os.getpid(), signal.SIGTERM)  # would end this test run under SIG_DFL
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
