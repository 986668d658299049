"""A delegated child's process, owned by the delegating session's launcher.

Specification: ``spec/delegation.md`` "Launching a child". What this module owns, for one
child: the command that starts it (:func:`murmur.starter.mur_command`, :func:`child_argv`), starting it in a
containment unit of its own (:func:`start`), its readiness line (:func:`read_first_line`,
:func:`parse_ready`), its stderr (kept as a tail, relayed by line), and ending it
(:func:`terminate`: SIGTERM, the stop grace, SIGKILL of its unit, reaped — through
:meth:`murmur.procs.OwnedProcess.end`).

The words for ending, used the same way everywhere in :mod:`murmur.delegation`:

* the parent **stops** a delegation (:meth:`Child.stop`): it ends it and it is reported
  ``terminated``, posted to nobody;
* the parent **releases** one (:meth:`Child.release`): it has its answer; the child is
  terminated and reports for itself;
* the launcher **terminates** a child's process (:func:`terminate`);
* the launcher **reports** an ending exactly once (:mod:`murmur.delegation.reporting`).
"""

from __future__ import annotations

import collections
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur import containment, exitstatus, procs
from murmur.delegation.book import Entry
from murmur.delegation.spawner import SPAWNER_LIFELINE_ENV
from murmur.lines import read_lines
from murmur.starter import MUR_BINARY_ENV as MUR_BINARY_ENV  # its one home: murmur.starter
from murmur.starter import mur_command as mur_command

if TYPE_CHECKING:
    from murmur.starter.client import Starter

CHILD_STOP_GRACE = 10.0  # seconds a child gets after SIGTERM before its unit is killed
MAX_READY_LINE = 1 << 20  # as murmur.procs.MAX_READY_LINE
STDERR_TAIL = 20
_MAX_STDERR_LINE = 64 * 1024  # bytes of one unfinished stderr line held before it is relayed as is


def capsule_ref(name: str) -> str:
    """The ``--capsule`` value: ``local/<name>`` for a bare name."""
    return name if "/" in name else f"local/{name}"


def child_argv(mur: Sequence[str], name: str, version: str, child_dir: Path) -> list[str]:
    """``mur run --capsule local/<name> --capsule-version V --json --workdir D --no-env-file``."""
    return [
        *mur,
        "run",
        "--capsule",
        capsule_ref(name),
        "--capsule-version",
        version,
        "--json",
        "--workdir",
        str(child_dir),
        "--no-env-file",
    ]


@attrs.frozen
class Ready:
    """A child that holds its task.

    Attributes:
        session_id (str): its session (from its readiness line).
        url (str): its door.
        records_dir (str | None): where its records are (for the result file).
        task_id (str): the task it took.
    """

    session_id: str
    url: str
    records_dir: str | None
    task_id: str


class LaunchFailed(Exception):
    """The child did not get as far as holding its task (the sentence is the call's output)."""


@attrs.define(eq=False)
class Child:
    """One live delegation: its process and what the launcher knows about it (mutable)."""

    entry: Entry
    dir: Path
    name: str
    version: str
    task: str
    proc: procs.OwnedProcess | None = None
    unit: containment.Unit | None = None
    life_w: int | None = None
    ready: Ready | None = None
    ready_at: float | None = None
    started_wall: float = attrs.field(factory=time.monotonic)
    stderr: collections.deque[str] = attrs.field(factory=lambda: collections.deque(maxlen=STDERR_TAIL))
    exited: trio.Event = attrs.field(factory=trio.Event)
    wake: trio.Event = attrs.field(factory=trio.Event)
    finished: trio.Event = attrs.field(factory=trio.Event)
    stop_reason: str | None = None
    left_to_finish: bool = False  # the answer was read: the child ends and reports for itself
    reported: bool = False  # the launcher is done with this delegation's outcome

    def stop(self, reason: str) -> None:
        """The parent ends this delegation (reported ``terminated``, posted to nobody)."""
        if self.stop_reason is None and not self.left_to_finish:
            self.stop_reason = reason
        self.wake.set()

    def let_finish(self) -> None:
        """The parent has what it needed: let the child end and report for itself."""
        if self.stop_reason is None:
            self.left_to_finish = True
        self.wake.set()

    @property
    def returncode(self) -> int | None:
        """Its exit status once reaped (None before, or when it never started)."""
        return self.proc.returncode if self.proc is not None else None

    def tail(self, head: str) -> str:
        """``head``, then the last few non-blank stderr lines (for a launch failure)."""
        lines = [line for line in self.stderr if line.strip()][-4:]
        return head + (": " + " | ".join(lines) if lines else "")


async def start(
    child: Child,
    argv: list[str],
    env: dict[str, str],
    *,
    lifeline_r: int,
    io: trio.Nursery,
    relay: Callable[[str], None] | None,
    starter: Starter | None = None,
    confinement: procs.Confinement | None = None,
) -> procs.OwnedProcess:
    """Start ``child`` in a fresh containment unit (its own session and process group).

    Forked by ``starter`` when one is given, alive, and ``argv`` runs the default ``mur``
    (spec/delegation.md "The warm start path"); else (or when the starter cannot take it)
    exec'd. Its exit is watched and its stderr relayed in ``io``. ``lifeline_r`` is passed to
    it (as descriptor 3 when forked, ``MURMUR_SPAWNER_LIFELINE`` set to match) and closed here;
    the caller keeps the write end (``child.life_w``). ``confinement`` is the sandbox's
    contribution (None: advisory), applied by :mod:`murmur.procs` on either path.

    Raises:
        LaunchFailed: it could not be started.
    """
    proc: procs.OwnedProcess | None = None
    try:
        if starter is not None and starter.alive and argv[: len(MUR_PREFIX)] == MUR_PREFIX:
            from murmur.starter.client import Unavailable

            try:
                proc = await _fork(child, starter, argv, env, lifeline_r, confinement)
            except Unavailable:
                proc = None
        if proc is None:
            proc = await _exec(child, argv, env, lifeline_r, confinement)
    finally:
        close_fd(lifeline_r)
    child.proc = proc
    child.unit = proc.unit
    io.start_soon(_wait_exit, child)
    assert proc.stderr is not None
    io.start_soon(_drain_stderr, child, proc.stderr, relay)
    return proc


MUR_PREFIX = mur_command({})
"""The command a child is forked for (the default ``mur``; anything else is exec'd)."""


async def _exec(child: Child, argv: list[str], env: dict[str, str], lifeline_r: int,
                confinement: procs.Confinement | None) -> procs.OwnedProcess:
    try:
        return await procs.open_process(
            argv, label=child.entry.delegation_id, env=env, cwd=child.dir, stdin=procs.PIPE,
            pass_fds=(lifeline_r,), winds_down=True, runtime=True, confinement=confinement,
        )
    except OSError as exc:
        raise LaunchFailed(f"the child could not be started: {exc.strerror or exc}") from None


async def _fork(child: Child, starter: Starter, argv: list[str], env: dict[str, str], lifeline_r: int,
                confinement: procs.Confinement | None) -> procs.OwnedProcess:
    """Have ``starter`` fork the child: stdin, stdout and stderr pipes, the lifeline as 3.

    Raises:
        Unavailable: the starter cannot (the caller execs it).
        LaunchFailed: the starter refused it.
    """
    from murmur.starter.client import WarmProcess

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    keep: list[int] = [in_w, out_r, err_r]
    fds = [(in_r, 0), (out_w, 1), (err_w, 2), (lifeline_r, _LIFELINE_FD)]

    async def fork(argv: list[str], env: dict[str, str], cgroup: str | None,
                   wire: dict[str, Any] | None, extra: tuple[int, ...]) -> WarmProcess:
        try:
            pid = await starter.start(argv, env, str(child.dir), [*fds, *((fd, fd) for fd in extra)],
                                      session=True, cgroup=cgroup, confinement=wire)
        except OSError as exc:
            raise LaunchFailed(f"the child could not be started: {exc.strerror or exc}") from None
        return WarmProcess(starter, pid, out_r, err_r, stdin=in_w)

    try:
        proc = await procs.fork_process(
            ["mur", *argv[len(MUR_PREFIX):]], label=child.entry.delegation_id,
            env={**env, SPAWNER_LIFELINE_ENV: str(_LIFELINE_FD)}, forker=fork, confinement=confinement,
        )
        keep.clear()
    finally:
        for fd in (in_r, out_w, err_w, *keep):
            close_fd(fd)
    return proc


_LIFELINE_FD = 3


async def _wait_exit(child: Child) -> None:
    assert child.proc is not None
    await child.proc.wait()
    child.exited.set()
    child.wake.set()


async def _drain_stderr(child: Child, stream: trio.abc.ReceiveStream, relay: Callable[[str], None] | None) -> None:
    prefix = f"[delegation {child.name}] "

    def line(raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        child.stderr.append(text)
        if relay is not None:
            relay(prefix + text)

    await read_lines(stream, line, lambda: _MAX_STDERR_LINE)


async def read_first_line(child: Child, stdout: trio.abc.ReceiveStream, bound: float) -> bytes:
    """The child's first stdout line, within ``bound`` seconds (:func:`murmur.procs.read_first_line`).

    Raises:
        LaunchFailed: too long, too late, or stdout closed first (naming how it exited).
    """
    got = await procs.read_first_line(stdout, bound, limit=MAX_READY_LINE)
    if got.why == "too-long":
        raise LaunchFailed("the child's first line is not a readiness line (it is too long)")
    if got.why == "timeout":
        raise LaunchFailed(f"the child did not report ready within {bound:g} s")
    if got.line is None:
        with trio.move_on_after(5.0):
            await child.exited.wait()
        if child.returncode is None:
            raise LaunchFailed(child.tail("the child closed its output before reporting ready"))
        raise LaunchFailed(child.tail(f"the child exited with {exitstatus.describe(child.returncode)} before reporting ready"))
    return got.line


_REFUSALS = {
    procs.NOT_A_READY_LINE: "the child's first line is not a readiness line",
    procs.NO_SESSION: "the child's readiness line names no session",
    procs.NO_DOOR: "the child reported no door",
}


def parse_ready(line: bytes) -> procs.ReadyLine:
    """The readiness line (:func:`murmur.procs.parse_ready_line`, the one parser).

    Raises:
        LaunchFailed: it is not one (the reason worded for a delegation).
    """
    if len(line) > MAX_READY_LINE:
        raise LaunchFailed("the child's first line is not a readiness line (it is too long)")
    got = procs.parse_ready_line(line)
    if isinstance(got, str):
        raise LaunchFailed(_REFUSALS[got])
    return got


def _sigterm(child: Child) -> None:
    if child.proc is not None and child.proc.returncode is None:
        try:
            child.proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass


def _kill_unit(child: Child) -> None:
    if child.unit is not None:
        child.unit.kill()


async def terminate(child: Child, grace: float) -> None:
    """SIGTERM, ``grace`` seconds, SIGKILL of its unit; always reaped; its unit swept after.

    Used for every end the launcher brings about (a child left to finish, a stopped or expired one,
    a failed launch). Run it shielded when it must finish under cancellation. A child never
    started is left.
    """
    if child.proc is None:
        return
    await child.proc.end(grace, lambda: _sigterm(child))
    _kill_unit(child)  # sweep anything the child left in its unit
    child.exited.set()


def close_fd(fd: int) -> None:
    """Close ``fd``, ignoring errors."""
    try:
        os.close(fd)
    except OSError:
        pass


async def drain(stream: trio.abc.ReceiveStream) -> None:
    """Read ``stream`` to its end, discarding (the child's stdout after its readiness line)."""
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
