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
    """Remembers signals that arrive before the session's receiver is installed."""

    def __init__(self, exit_fn: Callable[[int], None] = forced_exit) -> None:
        self.received: list[str] = []
        self.cascade = False
        self._exit_fn = exit_fn

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler: remember the first, exit 143 on the second."""
        self.received.append(signal.Signals(signum).name)
        if len(self.received) >= 2:
            self._exit_fn(143)

    def cascade_handler(self, signum: int, frame: FrameType | None) -> None:
        """The cascade signal before the loop runs: remembered, never counted."""
        self.cascade = True


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
