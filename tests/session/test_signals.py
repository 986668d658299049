"""Tests of the signal policy: first signal winds down, second exits 143."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

from murmur.session.signals import EarlySignals, signal_watcher
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
