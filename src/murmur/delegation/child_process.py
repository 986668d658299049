"""A delegated child's process, owned by the delegating session's launcher.

Specification: ``spec/delegation.md`` "Launching a child". What this module owns, for one
child: the command that starts it (:func:`murmur.starter.mur_command`, :func:`child_argv`), starting it in a
containment unit of its own (:func:`start`), its readiness line (:func:`read_first_line`,
:func:`parse_ready`), its stderr (kept as a tail, relayed by line), and ending it
(:func:`terminate`: SIGTERM, the stop grace, SIGKILL of its unit, reaped — through
:func:`murmur.containment.end_within`).

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
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur import containment
from murmur.delegation.book import Entry
from murmur.delegation.spawner import SPAWNER_LIFELINE_ENV
from murmur.delegation.watch_policy import describe_exit
from murmur.lines import read_lines
from murmur.starter import MUR_BINARY_ENV as MUR_BINARY_ENV  # its one home: murmur.starter
from murmur.starter import mur_command as mur_command

if TYPE_CHECKING:
    from murmur.starter.client import Starter, WarmProcess

CHILD_STOP_GRACE = 10.0  # seconds a child gets after SIGTERM before its unit is killed
MAX_READY_LINE = 1 << 20
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
    proc: trio.Process | WarmProcess | None = None
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
) -> trio.Process | WarmProcess:
    """Start ``child`` in a fresh containment unit (its own session and process group).

    Forked by ``starter`` when one is given, alive, and ``argv`` runs the default ``mur``
    (spec/delegation.md "The warm start path"); else (or when the starter cannot take it)
    exec'd. Its exit is watched and its stderr relayed in ``io``. ``lifeline_r`` is passed to
    it (as descriptor 3 when forked, ``MURMUR_SPAWNER_LIFELINE`` set to match) and closed here;
    the caller keeps the write end (``child.life_w``).

    Raises:
        LaunchFailed: it could not be started.
    """
    proc: trio.Process | WarmProcess | None = None
    try:
        if starter is not None and starter.alive and argv[: len(MUR_PREFIX)] == MUR_PREFIX:
            from murmur.starter.client import Unavailable

            try:
                proc = await _fork(child, starter, argv, env, lifeline_r)
            except Unavailable:
                proc = None
        if proc is None:
            proc = await _exec(child, argv, env, lifeline_r)
    finally:
        close_fd(lifeline_r)
    child.proc = proc
    assert child.unit is not None
    child.unit.started(proc.pid, winds_down=True)
    io.start_soon(_wait_exit, child)
    assert proc.stderr is not None
    io.start_soon(_drain_stderr, child, proc.stderr, relay)
    return proc


MUR_PREFIX = mur_command({})
"""The command a child is forked for (the default ``mur``; anything else is exec'd)."""


async def _exec(child: Child, argv: list[str], env: dict[str, str], lifeline_r: int) -> trio.Process:
    child.unit = unit = containment.here().new_unit(child.entry.delegation_id)
    env = {**env, **unit.env()}
    try:
        return await trio.lowlevel.open_process(
            unit.command(argv, env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(child.dir),
            pass_fds=(lifeline_r,),
            start_new_session=True,
        )
    except OSError as exc:
        unit.release()
        raise LaunchFailed(f"the child could not be started: {exc.strerror or exc}") from None


async def _fork(child: Child, starter: Starter, argv: list[str], env: dict[str, str], lifeline_r: int) -> WarmProcess:
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
    unit = containment.here().new_unit(child.entry.delegation_id)
    try:
        forked_env = {**env, SPAWNER_LIFELINE_ENV: str(_LIFELINE_FD), **unit.env()}
        fds = [(in_r, 0), (out_w, 1), (err_w, 2), (lifeline_r, _LIFELINE_FD)]
        try:
            pid = await starter.start(
                ["mur", *argv[len(MUR_PREFIX):]], forked_env, str(child.dir), fds,
                session=True, cgroup=str(unit.path) if unit.path is not None else None,
            )
        except OSError as exc:
            raise LaunchFailed(f"the child could not be started: {exc.strerror or exc}") from None
        proc = WarmProcess(starter, pid, out_r, err_r, stdin=in_w)
        keep.clear()
    except BaseException:
        unit.release()  # a child the starter forked before it went away goes with it
        raise
    finally:
        for fd in (in_r, out_w, err_w, *keep):
            close_fd(fd)
    child.unit = unit
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
    """The child's first stdout line, within ``bound`` seconds.

    Raises:
        LaunchFailed: too long, too late, or stdout closed first (naming how it exited).
    """
    buf = bytearray()
    with trio.move_on_after(bound) as scope:
        while b"\n" not in buf:
            chunk = await stdout.receive_some(65536)
            if not chunk:
                break
            buf += chunk
            if len(buf) > MAX_READY_LINE:
                raise LaunchFailed("the child's first line is not a readiness line (it is too long)")
    if scope.cancelled_caught:
        raise LaunchFailed(f"the child did not report ready within {bound:g} s")
    if b"\n" not in buf:
        with trio.move_on_after(5.0):
            await child.exited.wait()
        if child.returncode is None:
            raise LaunchFailed(child.tail("the child closed its output before reporting ready"))
        raise LaunchFailed(child.tail(f"the child exited with {describe_exit(child.returncode)} before reporting ready"))
    return bytes(buf.split(b"\n", 1)[0])


def parse_ready(line: bytes) -> dict[str, Any]:
    """The readiness line as a JSON object with a door ``url`` and a ``session_id``.

    Raises:
        LaunchFailed: it is not one.
    """
    try:
        obj = json.loads(line)
    except ValueError:
        raise LaunchFailed("the child's first line is not a readiness line") from None
    if not isinstance(obj, dict):
        raise LaunchFailed("the child's first line is not a readiness line")
    url = obj.get("url")
    if not isinstance(url, str) or not url.startswith("http://"):
        raise LaunchFailed("the child reported no door")
    sid = obj.get("session_id")
    if not isinstance(sid, str) or not sid.startswith("ses_"):
        raise LaunchFailed("the child's readiness line names no session")
    return obj


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
    proc = child.proc
    await containment.end_within(grace, ask=lambda: _sigterm(child), alive=lambda: proc.returncode is None,
                                 wait=proc.wait, kill=lambda: _kill_unit(child))
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
