"""Supervising one member: start it, judge its readiness, and stop it cancel-correctly.

A formation is a nursery of supervisor tasks, one per member. Specification:
``spec/formation.md`` "The launch, step by step", "Readiness", "How a formation ends" and
"Bounds".

A supervisor owns exactly one member process, through the :class:`MemberHandle` protocol
(the real one is :class:`murmur.formation.launch.process.ProcessHandle`; tests pass fakes). Whatever
ends the supervisor — the member exiting, a readiness refusal, or cancellation of the
formation's scope — its ``finally`` runs :func:`stop_member` shielded:

1. close the member's lifeline (the member winds down: ``formation_ended``, then as a first
   SIGTERM, and exits 143 twenty seconds later wherever its teardown is);
2. wait up to ``kill_after`` (25 s) for it to exit;
3. still running: SIGKILL its process group (a peer) or its process (the entry member, which
   shares the launcher's group), then reap it.

Every timer is a parameter (:class:`Timers`), so the decision logic runs under
``trio.testing.MockClock`` with fake handles.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import attrs
import trio

from murmur import exitstatus, procs, timing
from murmur.formation.launch import readiness


@attrs.frozen
class Timers:
    """The bounds a launch uses (seconds). Production values are the documents'.

    Attributes:
        readiness (float): each peer's readiness bound from its own start (180 s).
        probe_interval (float): between door probes (0.1 s).
        kill_after (float): lifeline close to SIGKILL of a member still running (25 s).
        relay_drain (float): after every member stopped, how long stderr relays may still
            drain before they are cut (0.5 s).
    """

    readiness: float = timing.READINESS
    probe_interval: float = timing.READINESS_PROBE_INTERVAL
    kill_after: float = timing.LAUNCHER_KILL
    relay_drain: float = 0.5


@attrs.frozen
class MemberSpec:
    """How to start one member process.

    Attributes:
        name (str): the member's roster name.
        argv (tuple[str, ...]): the full command line (``mur run --capsule … --json …``).
        env (Mapping[str, str]): its environment, without the channel and lifeline fd
            variables (the spawner adds those, naming the descriptors it made).
        cwd (str): its current directory (the launcher's).
        channel (bytes): what its formation channel holds before it starts (the first line;
            for the entry member also its callees' addresses and its role).
        peer (bool): a peer gets its own process group, a piped stdout (readiness line) and
            a piped stderr relayed behind ``[name] ``; the entry member shares the launcher's
            group and stdio.
        confinement (procs.Confinement | None): the sandbox's contribution to its start
            (None: advisory), applied by :mod:`murmur.procs` on either start path.
    """

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = attrs.field(repr=False)
    cwd: str
    channel: bytes = attrs.field(repr=False)
    peer: bool
    confinement: procs.Confinement | None = attrs.field(default=None, repr=False)


class MemberHandle(Protocol):
    """One started member process, as a supervisor drives it."""

    @property
    def pid(self) -> int:
        """Its process id (and, for a peer, its process group id)."""
        ...

    @property
    def returncode(self) -> int | None:
        """Its exit status once reaped: ``n`` for ``exit(n)``, ``-sig`` when killed."""
        ...

    async def first_line(self) -> bytes | None:
        """Its first stdout line (peers only); None when stdout ended before one."""
        ...

    async def send_line(self, line: bytes) -> None:
        """Write one line (with its newline) on its formation channel."""
        ...

    def close_lifeline(self) -> None:
        """Close the launcher's end of its lifeline (idempotent)."""
        ...

    def kill(self) -> None:
        """SIGKILL it: a peer's whole process group, the entry member's process (sync)."""
        ...

    async def wait(self) -> int:
        """Wait for it to exit and reap it; its :attr:`returncode`."""
        ...

    def last_stderr(self) -> Sequence[str]:
        """Its last few stderr lines (peers), for the E-RUN-045 report."""
        ...

    async def aclose(self) -> None:
        """Release the launcher's descriptors for it (channel, lifeline). Idempotent."""
        ...


class Spawner(Protocol):
    """Starts member processes."""

    async def spawn(self, spec: MemberSpec, relays: trio.Nursery) -> MemberHandle:
        """Start ``spec``; relay tasks (stderr, stdout) run in ``relays``.

        Raises:
            OSError: the process could not be started.
        """
        ...


Probe = Callable[[readiness.Report], Awaitable[str | None]]
"""One door probe: the session id the reported door's card names, or None."""

Verify = Callable[[], Awaitable[str | None]]
"""Re-hash a member's installed artifact just before it starts: None, or why it changed."""


@attrs.frozen
class Stopped:
    """How a member's supervision ended.

    Attributes:
        returncode (int): its exit status (``-sig`` when a signal ended it).
        by_launcher (bool): it was still running when the launcher closed its lifeline.
        killed (bool): the launcher had to SIGKILL it ``kill_after`` seconds later.
    """

    returncode: int
    by_launcher: bool
    killed: bool


async def stop_member(handle: MemberHandle, kill_after: float) -> Stopped:
    """Close ``handle``'s lifeline, wait ``kill_after`` s, then SIGKILL and reap.

    Call it shielded: it must finish even when the formation's scope is cancelled. Always
    returns with the member reaped.

    Args:
        handle (MemberHandle): the member.
        kill_after (float): seconds from lifeline close to SIGKILL (25 s in production).

    Returns:
        Stopped: its exit status and whether the launcher had to act.
    """
    running = handle.returncode is None
    killed = await procs.end_within(
        kill_after,
        ask=handle.close_lifeline,
        alive=lambda: handle.returncode is None,
        wait=handle.wait,
        kill=handle.kill,
    )
    return Stopped(await handle.wait(), running, killed)


@attrs.frozen
class ReadyPeer:
    """A peer whose door answered as its session.

    Attributes:
        name (str): its roster name.
        pid (int): its process id.
        session_id (str): the session its readiness line reported.
        url (str): its door, ``http://host:port``.
        workdir (str): its work folder.
    """

    name: str
    pid: int
    session_id: str
    url: str
    workdir: str


@attrs.frozen
class Failure:
    """Why a member refused the launch.

    Attributes:
        name (str): the member.
        reason (str): worded for ``'<name>' (<capsule>@<version>): <reason>``.
        code (str): ``E-RUN-045`` (did not come up) or ``E-RUN-047`` (artifact changed).
    """

    name: str
    reason: str
    code: str = "E-RUN-045"


class PeerBoard:
    """Where peer supervisors report, and the launcher waits for all ready or one refusal.

    Args:
        names (Sequence[str]): every peer, in roster order.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self._order = {n: i for i, n in enumerate(names)}
        self._pending = set(names)
        self.ready: dict[str, ReadyPeer] = {}
        self.failures: list[Failure] = []
        self.started: dict[str, int] = {}
        self.handles: dict[str, MemberHandle] = {}
        self.stopped: dict[str, Stopped] = {}
        self.settled = trio.Event()
        if not self._pending:
            self.settled.set()

    def mark_started(self, name: str, handle: MemberHandle) -> None:
        """The member's process exists (it will need stopping)."""
        self.started[name] = handle.pid
        self.handles[name] = handle

    def mark_ready(self, peer: ReadyPeer) -> None:
        """The peer is ready; settles the board when it was the last."""
        self.ready[peer.name] = peer
        self._pending.discard(peer.name)
        if not self._pending:
            self.settled.set()

    def mark_failed(self, failure: Failure) -> None:
        """The peer refused the launch; settles the board at once."""
        self.failures.append(failure)
        self._pending.discard(failure.name)
        self.settled.set()

    def mark_stopped(self, name: str, stopped: Stopped) -> None:
        """The member's process is gone and reaped."""
        self.stopped[name] = stopped

    def failures_in_order(self) -> list[Failure]:
        """The refusals in roster order."""
        return sorted(self.failures, key=lambda f: self._order.get(f.name, len(self._order)))

    def stopped_by_launcher(self) -> list[tuple[str, int]]:
        """``(name, pid)`` of every member the launcher had to stop, in roster order."""
        out = [
            (name, self.started[name])
            for name, st in self.stopped.items()
            if st.by_launcher and name in self.started
        ]
        return sorted(out, key=lambda item: self._order.get(item[0], len(self._order)))


def exited_before_reporting(code: int, last_lines: Sequence[str]) -> str:
    """The E-RUN-045 reason for a peer that exited before its readiness line."""
    reason = f"exited with {exitstatus.describe(code)} before reporting"
    lines = [ln for ln in last_lines if ln.strip()]
    if lines:
        reason += "; its last stderr lines:" + "".join(f"\n    | {ln}" for ln in lines)
    return reason


async def _door_or_exit(
    handle: MemberHandle,
    report: readiness.Report,
    probe: Probe | None,
    interval: float,
) -> readiness.Report | str:
    """Probe the door until it answers as the session, unless the process exits first."""
    outcome: list[readiness.Report | str] = []
    async with trio.open_nursery() as race:

        async def door() -> None:
            if probe is not None:
                await readiness.wait_for_door(report, probe, interval=interval)
            outcome.append(report)
            race.cancel_scope.cancel()

        async def exit_() -> None:
            await handle.wait()
            outcome.append("exited after reporting, before its door answered")
            race.cancel_scope.cancel()

        race.start_soon(door)
        race.start_soon(exit_)
    return outcome[0]


async def await_readiness(
    handle: MemberHandle,
    *,
    formation_id: str,
    probe: Probe | None,
    timers: Timers,
) -> readiness.Report | str:
    """Judge one peer's readiness (``spec/formation.md`` "Readiness"), bounded by ``timers.readiness``.

    Args:
        handle (MemberHandle): the peer, just started.
        formation_id (str): the formation it was launched in.
        probe: one door probe (:class:`murmur.formation.launch.readiness.HttpProbe`); None skips
            probing (the readiness line alone counts).
        timers (Timers): the readiness bound and probe interval.

    Returns:
        readiness.Report | str: the report once its door answered as its session, or the
        E-RUN-045 reason.
    """
    bound = f"{timers.readiness:g}s"
    stage = "report"
    with trio.move_on_after(timers.readiness):
        line = await handle.first_line()
        if line is None:
            code = await handle.wait()
            return exited_before_reporting(code, handle.last_stderr())
        report = readiness.parse_readiness_line(line, formation_id)
        if isinstance(report, str):
            return report
        stage = "door"
        return await _door_or_exit(handle, report, probe, timers.probe_interval)
    if stage == "report":
        return f"did not report within {bound}"
    return f"its door did not answer as its session within {bound}"


class LiveMembers:
    """Every member process this launcher started and has not reaped yet.

    :meth:`kill_all` is synchronous, for the paths that leave at once (a second signal):
    it SIGKILLs every live member's group (or the entry member's process) before
    ``os._exit`` so no member that ignores its lifeline outlives the launcher.
    """

    def __init__(self) -> None:
        self._handles: dict[str, MemberHandle] = {}

    def add(self, name: str, handle: MemberHandle) -> None:
        """Track a started member."""
        self._handles[name] = handle

    def discard(self, name: str) -> None:
        """Forget a reaped member."""
        self._handles.pop(name, None)

    def names(self) -> list[str]:
        """The members still tracked."""
        return list(self._handles)

    def kill_all(self) -> None:
        """SIGKILL every tracked member now (synchronous; never raises)."""
        for handle in list(self._handles.values()):
            try:
                handle.kill()
            except OSError:
                pass


@attrs.frozen
class PeerContext:
    """What every peer supervisor of one launch shares.

    Attributes:
        formation_id (str): the launch's ``frm_`` id.
        spawner (Spawner): starts processes.
        relays (trio.Nursery): where stdout/stderr relays run (outlives the members' scope).
        board (PeerBoard): where readiness is reported.
        live (LiveMembers): for the synchronous last-resort kill.
        probe (Probe | None): one door probe.
        timers (Timers): the bounds.
    """

    formation_id: str
    spawner: Spawner
    relays: trio.Nursery
    board: PeerBoard
    live: LiveMembers
    probe: Probe | None
    timers: Timers


async def supervise_peer(
    ctx: PeerContext,
    spec: MemberSpec,
    workdir: str,
    *,
    verify: Verify | None = None,
    on_exit: Callable[[str, int], None] | None = None,
) -> None:
    """Start one peer, report its readiness, then hold it until it exits or is cancelled.

    Whatever ends this task, the peer is stopped (:func:`stop_member`, shielded) and reaped
    before it returns. A readiness refusal is reported on the board (the launcher then ends
    the formation); cancellation is how the launcher ends it.

    Args:
        ctx (PeerContext): the launch's shared pieces.
        spec (MemberSpec): how to start it.
        workdir (str): its work folder (named in the formation line).
        verify (Verify | None): re-hash its artifact first (``E-RUN-047`` when it changed).
        on_exit (Callable[[str, int], None] | None): told ``(name, returncode)`` when the peer
            exits on its own after it was ready.
    """
    if verify is not None:
        changed = await verify()
        if changed is not None:
            ctx.board.mark_failed(Failure(spec.name, changed, "E-RUN-047"))
            return
    try:
        handle = await ctx.spawner.spawn(spec, ctx.relays)
    except OSError as exc:
        reason = f"could not be started ({exc.strerror or exc})"
        ctx.board.mark_failed(Failure(spec.name, reason))
        return
    ctx.live.add(spec.name, handle)
    ctx.board.mark_started(spec.name, handle)
    try:
        outcome = await await_readiness(
            handle, formation_id=ctx.formation_id, probe=ctx.probe, timers=ctx.timers
        )
        if isinstance(outcome, str):
            ctx.board.mark_failed(Failure(spec.name, outcome))
            return
        ctx.board.mark_ready(
            ReadyPeer(spec.name, handle.pid, outcome.session_id, outcome.url, workdir)
        )
        code = await handle.wait()
        if on_exit is not None:
            on_exit(spec.name, code)
    finally:
        with trio.CancelScope(shield=True):
            stopped = await stop_member(handle, ctx.timers.kill_after)
            await handle.aclose()
        ctx.live.discard(spec.name)
        ctx.board.mark_stopped(spec.name, stopped)


async def supervise_entry(
    ctx: PeerContext,
    spec: MemberSpec,
    *,
    on_started: Callable[[int], None],
    on_failed: Callable[[str], None],
    on_exit: Callable[[int], None],
    on_stopped: Callable[[Stopped], None],
) -> None:
    """Start the entry member and hold it until it exits (which ends the formation).

    Args:
        ctx (PeerContext): the launch's shared pieces.
        spec (MemberSpec): how to start it (``peer`` is False).
        on_started (Callable[[int], None]): told its pid once it runs.
        on_failed (Callable[[str], None]): told why it could not be started.
        on_exit (Callable[[int], None]): told its returncode when it exits on its own.
        on_stopped (Callable[[Stopped], None]): told how it ended, once reaped (always, also
            when the launcher stopped it).
    """
    try:
        handle = await ctx.spawner.spawn(spec, ctx.relays)
    except OSError as exc:
        on_failed(f"could not be started ({exc.strerror or exc})")
        return
    ctx.live.add(spec.name, handle)
    on_started(handle.pid)
    try:
        code = await handle.wait()
        on_exit(code)
    finally:
        with trio.CancelScope(shield=True):
            stopped = await stop_member(handle, ctx.timers.kill_after)
            await handle.aclose()
        ctx.live.discard(spec.name)
        on_stopped(stopped)
