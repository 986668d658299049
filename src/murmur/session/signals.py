"""Signals: the first SIGTERM/SIGINT/SIGHUP winds the session down, the second exits 143.

Two layers (spec/session.md "Wind-down"):

* :func:`install_early_handlers`, called before anything slow: a signal that arrives before
  the Trio loop runs is remembered (a second one exits 143 at once), so a launcher's SIGTERM
  during start-up is never a ``-15`` death.
* :func:`signal_watcher`, a session watcher reading a ``trio.open_signal_receiver``: each
  signal counts; the first triggers the wind-down (``signal_wind_down``), the second exits
  143 at once, whatever else started the wind-down first. :data:`CASCADE_SIGNAL` (SIGUSR1,
  the tree's cascade) winds down too and is never counted.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from types import FrameType
from typing import Protocol

from murmur.session.winddown import WindDown, cascade_wind_down, forced_exit, signal_wind_down

SESSION_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CASCADE_SIGNAL = signal.SIGUSR1
"""The cascade (spec/tree.md): winds the session down like a first SIGTERM, but is not
counted by the second-signal rule, so the SIGTERM its parent sends later is still a first."""


class _Trigger(Protocol):
    def trigger(self, reason: WindDown) -> None: ...


class EarlySignals:
    """Counts this process's signals from before the Trio loop runs until the process exits.

    Installed first thing; Trio's receiver takes the signals over while the loop runs, and
    hands them back when it closes (:func:`counted` notes each one here meanwhile), so a
    signal that lands after ``trio.run`` returned is still the second one it is.

    Args:
        exit_fn (Callable[[int], None]): the forced exit.
        second_status (Callable[[int], int]): the status a second signal exits with, given
            its number: 143 for a session (spec/session.md), ``128 + signum`` for a formation's
            launcher (spec/formation.md).
    """

    def __init__(
        self,
        exit_fn: Callable[[int], None] = forced_exit,
        second_status: Callable[[int], int] = lambda signum: 143,
    ) -> None:
        self.received: list[str] = []
        self.cascade = False
        self._exit_fn = exit_fn
        self.second_status = second_status

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler: remember the first, force the exit on the second."""
        self.note(signum)
        if len(self.received) >= 2:
            self._exit_fn(self.second_status(signum))

    def note(self, signum: int) -> None:
        """Count ``signum`` (one that Trio's receiver handled)."""
        self.received.append(signal.Signals(signum).name)

    def cascade_handler(self, signum: int, frame: FrameType | None) -> None:
        """The cascade signal before the loop runs: remembered, never counted."""
        self.cascade = True


class counted:
    """``receiver``'s signals, each first noted in ``early`` (the cascade signal is not).

    Args:
        receiver: from ``trio.open_signal_receiver``.
        early (EarlySignals | None): where the count lives until the process exits.
    """

    def __init__(self, receiver: AsyncIterator[int], early: EarlySignals | None) -> None:
        self._receiver = receiver
        self._early = early

    def __aiter__(self) -> counted:
        return self

    async def __anext__(self) -> int:
        signum = await self._receiver.__anext__()
        if self._early is not None and signum != CASCADE_SIGNAL:
            self._early.note(signum)
        return signum


def hold_signals_to_exit() -> None:
    """Ignore the session signals for the rest of this process: call it once the exit status
    is decided. The interpreter's finalization restores the default action of every signal
    with a Python handler, under which a late signal ends the process by the signal (status
    -15) instead of its status; it leaves an ignored one alone. Blocking would not do: a
    signal blocked in the main thread is delivered to another thread (spec/session.md
    "Wind-down")."""
    for sig in (*SESSION_SIGNALS, CASCADE_SIGNAL):
        signal.signal(sig, signal.SIG_IGN)


def install_early_handlers(exit_fn: Callable[[int], None] = forced_exit) -> EarlySignals:
    """Install :class:`EarlySignals` for SIGTERM, SIGINT and SIGHUP; returns it."""
    early = EarlySignals(exit_fn)
    for sig in SESSION_SIGNALS:
        signal.signal(sig, early.handler)
    signal.signal(CASCADE_SIGNAL, early.cascade_handler)
    return early


def signal_watcher(
    receiver: AsyncIterator[int],
    *,
    already: int = 0,
    exit_fn: Callable[[int], None] = forced_exit,
) -> Callable[[_Trigger], Awaitable[None]]:
    """A session watcher over a Trio signal receiver.

    Args:
        receiver: from ``trio.open_signal_receiver(*SESSION_SIGNALS)``.
        already (int): signals already received before the receiver existed.
        exit_fn (Callable[[int], None]): the forced exit (status 143).
    """

    async def watch(ctl: _Trigger) -> None:
        count = already
        async for signum in receiver:
            if signum == CASCADE_SIGNAL:
                ctl.trigger(cascade_wind_down())
                continue
            count += 1
            if count >= 2:
                exit_fn(143)
                return
            ctl.trigger(signal_wind_down(signal.Signals(signum).name))

    return watch
