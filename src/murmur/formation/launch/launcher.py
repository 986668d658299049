"""``mur run --roster``: launch an admitted roster as a formation and end it cancel-correctly.

Specification: ``spec/formation.md`` "The launch, step by step", "Readiness" and "How a
formation ends".

The launch is a nursery tree::

    watchers nursery          signal watcher (SIGINT/SIGTERM/SIGHUP)
    └─ relays nursery         peers' stdout/stderr relays (drain briefly after the end)
       └─ members nursery     one supervisor per peer, then the entry member's supervisor
                              (its scope's deadline is the --deadline)

The members run in one cancel scope whose ``deadline`` is the formation's ``--deadline`` (on the
Trio clock); anything else that ends the formation calls :meth:`FormationLaunch.end`, which
records why and cancels that scope (once the scope is cancelled, later ends change nothing).
Every supervisor then stops its member in a shielded ``finally`` (close its lifeline; SIGKILL
its group 25 s later if it still runs; reap). So (the exit statuses: :mod:`.outcome`):

=========================================  ==============================================
The formation ends because                 The launcher
=========================================  ==============================================
the entry member's process ended           closes every peer's lifeline; exits with the
                                           entry member's status (128+sig when killed)
SIGINT, SIGTERM or SIGHUP                  closes every lifeline, the entry member's too;
                                           exits 130/143/129; a second signal SIGKILLs
                                           every member synchronously and exits at once
a peer did not come up                     closes every started member's lifeline; never
                                           starts the entry member; ``E-RUN-045``, exit 1
the ``--deadline`` fell                    closes every lifeline; before the entry member
                                           started: ``E-RUN-053``, exit 1; after: the entry
                                           member's status
the launcher was killed                    (the kernel closes every lifeline)
=========================================  ==============================================

:class:`FormationLaunch` is clock- and process-agnostic (spawner, probe, timers and signal
source are injected) so every row runs under MockClock with fake members.
"""

from __future__ import annotations

import json
import math
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import NoReturn, TextIO

import attrs
import trio

from murmur import exitstatus
from murmur.diagnostics import Diagnostic
from murmur.formation.launch import launchplan
from murmur.formation.launch.ending import EndReason, closing_diagnostics, exit_status
from murmur.formation.launch.launchplan import LaunchPlan
from murmur.formation.launch.supervise import (
    Failure,
    LiveMembers,
    PeerBoard,
    PeerContext,
    Probe,
    ReadyPeer,
    Spawner,
    Stopped,
    Timers,
    Verify,
    supervise_entry,
    supervise_peer,
)
from murmur.session import forced_exit
from murmur.stderr import say

FORMATION_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that end a formation (a second one ends the launcher at once)."""


@attrs.frozen
class LaunchResult:
    """How a launch ended.

    Attributes:
        exit_status (int): what ``mur run --roster`` exits with.
        reason (EndReason | None): why the formation ended.
        diagnostics (tuple[Diagnostic, ...]): refusals to print (after every member stopped).
        ready (tuple[ReadyPeer, ...]): the peers that came up, in roster order.
        stopped (Mapping[str, Stopped]): how each started member ended.
        entry_code (int | None): the entry member's returncode when it ran.
    """

    exit_status: int
    reason: EndReason | None
    diagnostics: tuple[Diagnostic, ...]
    ready: tuple[ReadyPeer, ...]
    stopped: Mapping[str, Stopped]
    entry_code: int | None


class FormationLaunch:
    """Steps 3-7 of a launch: start peers, wait for their doors, start the entry, end.

    Args:
        plan (LaunchPlan): what to start.
        spawner (Spawner): starts processes.
        probe (Probe | None): one door probe (None: the readiness line alone counts).
        timers (Timers): the bounds.
        deadline (float | None): the formation's moment on the Trio clock.
        verify (Mapping[str, Verify] | None): per member, the artifact re-hash run just
            before it starts (``E-RUN-047``).
        json_mode (bool): print the formation line on ``out``; else the formation block on
            ``err``.
        out (TextIO | None), err (TextIO | None): the launcher's stdout and stderr.
        exit_now (Callable[[int], NoReturn]): the immediate exit of a second signal.
    """

    def __init__(
        self,
        plan: LaunchPlan,
        *,
        spawner: Spawner,
        probe: Probe | None,
        timers: Timers | None = None,
        deadline: float | None = None,
        verify: Mapping[str, Verify] | None = None,
        json_mode: bool = False,
        out: TextIO | None = None,
        err: TextIO | None = None,
        exit_now: Callable[[int], NoReturn] = forced_exit,
    ) -> None:
        self.plan = plan
        self._spawner = spawner
        self._probe = probe
        self._timers = timers or Timers()
        self._deadline = deadline
        self._verify = dict(verify or {})
        self._json = json_mode
        self._out = out
        self._err = err
        self._exit_now = exit_now
        self.board = PeerBoard([p.member.name for p in plan.peers])
        self.live = LiveMembers()
        self.reason: EndReason | None = None  # an explicit end; the deadline is the scope's
        self.signum: int | None = None
        self.entry_started = False
        self.entry_code: int | None = None
        self.entry_pid: int | None = None
        self._entry_failure: Failure | None = None
        # every member runs in this scope; its deadline is the formation's --deadline
        self._members_scope = trio.CancelScope(deadline=math.inf if deadline is None else deadline)
        self.formation_line: dict[str, object] | None = None

    # -- ending ---------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether the formation is ending: :meth:`end` was called or the deadline fell."""
        return self.reason is not None or self._members_scope.cancel_called

    def end(self, reason: EndReason, signum: int | None = None) -> None:
        """End the formation (unless it is already ending): every member's lifeline will close."""
        if self.ended:
            return
        self.reason = reason
        self.signum = signum
        self._members_scope.cancel()

    async def _watch_signals(self, signals: AsyncIterator[int]) -> None:
        seen = 0
        async for signum in signals:
            seen += 1
            if seen > 1:
                # a second signal: nothing more is awaited, not even a shielded teardown
                self.live.kill_all()
                self._exit_now(128 + signum)
            self.end(EndReason.SIGNAL, signum)

    # -- the launch ---------------------------------------------------------------------

    async def run(self, signals: AsyncIterator[int] | None = None) -> LaunchResult:
        """Launch, hold and end the formation; returns once every member is reaped."""
        async with trio.open_nursery() as watchers:
            if signals is not None:
                watchers.start_soon(self._watch_signals, signals)
            async with trio.open_nursery() as relays:
                ctx = PeerContext(
                    formation_id=self.plan.formation_id,
                    spawner=self._spawner,
                    relays=relays,
                    board=self.board,
                    live=self.live,
                    probe=self._probe,
                    timers=self._timers,
                )
                with self._members_scope:
                    async with trio.open_nursery() as members:
                        members.start_soon(self._orchestrate, ctx, members)
                if self.reason is None and self._members_scope.cancelled_caught:
                    self.reason = EndReason.DEADLINE  # nothing else cancels without a reason
                relays.cancel_scope.deadline = trio.current_time() + self._timers.relay_drain
            watchers.cancel_scope.cancel()
        return self._result()

    async def _orchestrate(self, ctx: PeerContext, members: trio.Nursery) -> None:
        await trio.lowlevel.checkpoint()  # an end before the launch starts nothing
        for p in self.plan.peers:
            members.start_soon(
                partial(
                    supervise_peer,
                    ctx,
                    p.spec,
                    str(p.workdir),
                    verify=self._verify.get(p.member.name),
                    on_exit=self._peer_exited,
                )
            )
        await self.board.settled.wait()
        if self.board.failures:
            self.end(EndReason.PEER_FAILED)
            return
        urls = {name: peer.url for name, peer in self.board.ready.items()}
        # step 5: hand out addresses to each peer that may call others
        for p in self.plan.peers:
            if p.member.callees:
                line = launchplan.addresses_line(p.member.callees, urls)
                await self.board.handles[p.member.name].send_line(line)
        await trio.lowlevel.checkpoint()  # a deadline that fell meanwhile starts no entry
        entry = self.plan.entry
        check = self._verify.get(entry.name)
        if check is not None:
            changed = await check()
            if changed is not None:
                self._entry_failure = Failure(entry.name, changed, "E-RUN-047")
                self.end(EndReason.REFUSED)
                return
        self._announce()
        # step 6: the entry member, last, with its addresses and role already on its channel
        spec = launchplan.entry_spec_with_addresses(self.plan, urls)
        members.start_soon(
            partial(
                supervise_entry,
                ctx,
                spec,
                on_started=self._entry_started,
                on_failed=self._entry_failed,
                on_exit=self._entry_exited,
                on_stopped=self._entry_stopped,
            )
        )

    # -- callbacks ----------------------------------------------------------------------

    def _peer_exited(self, name: str, code: int) -> None:
        if not self.ended:
            self._say(f"[mur run] member '{name}' exited with {exitstatus.describe(code)}")

    def _entry_started(self, pid: int) -> None:
        self.entry_started = True
        self.entry_pid = pid

    def _entry_failed(self, reason: str) -> None:
        self._entry_failure = Failure(self.plan.entry.name, reason)
        self.end(EndReason.REFUSED)

    def _entry_exited(self, code: int) -> None:
        self.entry_code = code
        self.end(EndReason.ENTRY_ENDED)

    def _entry_stopped(self, stopped: Stopped) -> None:
        self.entry_code = stopped.returncode
        self.board.mark_stopped(self.plan.entry.name, stopped)
        if self.entry_pid is not None:
            self.board.started[self.plan.entry.name] = self.entry_pid

    # -- output ---------------------------------------------------------------------------

    def _say(self, line: str) -> None:
        say(line, self._err)

    def _announce(self) -> None:
        """The formation line (``--json``, stdout) or block (stderr), before the entry starts."""
        peers = [self.board.ready[p.member.name] for p in self.plan.peers]
        self.formation_line = {
            "entry": self.plan.entry.name,
            "formation_id": self.plan.formation_id,
            "peers": [
                {
                    "name": p.name,
                    "pid": p.pid,
                    "session_id": p.session_id,
                    "url": p.url,
                    "workdir": p.workdir,
                }
                for p in peers
            ],
        }
        if self._json:
            stream = self._out if self._out is not None else sys.stdout
            try:
                print(json.dumps(self.formation_line), file=stream, flush=True)
            except (OSError, ValueError):
                pass
            return
        entry = self.plan.entry
        lines = [f"formation: {self.plan.formation_id}", f"  entry: {entry.name} ({entry.coordinate})"]
        for p, plan in zip(peers, self.plan.peers, strict=True):
            lines.append(
                f"  peer: {p.name} ({plan.member.coordinate}) pid {p.pid} {p.url} "
                f"session {p.session_id} workdir {p.workdir}"
            )
        self._say("\n".join(lines))

    # -- result ---------------------------------------------------------------------------

    def _coordinate(self, name: str) -> str:
        if name == self.plan.entry.name:
            return self.plan.entry.coordinate
        for p in self.plan.peers:
            if p.member.name == name:
                return p.member.coordinate
        return "?"

    def _diagnostics(self) -> list[Diagnostic]:
        failures = list(self.board.failures_in_order())
        if self._entry_failure is not None:
            failures.append(self._entry_failure)
        return closing_diagnostics(
            [(f.name, self._coordinate(f.name), f.reason, f.code) for f in failures],
            self.board.stopped_by_launcher(),
            deadline_first=self.reason is EndReason.DEADLINE and not self.entry_started,
        )

    def _result(self) -> LaunchResult:
        return LaunchResult(
            exit_status=exit_status(
                self.reason,
                signum=self.signum,
                entry_started=self.entry_started,
                entry_code=self.entry_code,
            ),
            reason=self.reason,
            diagnostics=tuple(self._diagnostics()),
            ready=tuple(
                self.board.ready[p.member.name]
                for p in self.plan.peers
                if p.member.name in self.board.ready
            ),
            stopped=dict(self.board.stopped),
            entry_code=self.entry_code,
        )
