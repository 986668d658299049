"""Starting a member as a real process: pipes, process group, relays.

Specification: ``spec/formation.md`` "What each member is started with" and "How a formation
ends". A peer leads its own process group and every member is reaped; the launcher closes its
copies of the member's pipe ends right after the spawn, or the lifeline's EOF never arrives.

Each member gets two inherited pipes, numbered in its environment:

* ``MURMUR_FORMATION_CHANNEL`` — the read end of its formation channel. The launcher writes
  the first line (its credentials) before the process starts; for the entry member also its
  callees' addresses and its role. Later lines (peers' addresses) go through
  :meth:`ProcessHandle.send_line`.
* ``MURMUR_FORMATION_LIFELINE`` — the read end of its lifeline. The launcher holds the only
  write end and never writes to it; closing it (or dying) is the one signal a member reads.

Both ends the launcher keeps are close-on-exec, so no other member inherits them. A peer
runs in its own process group (``start_new_session``) with stdout piped (its readiness
line) and stderr piped and relayed to the launcher's stderr behind ``[name] ``; the entry
member stays in the launcher's group and shares its stdout and stderr.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import trio

from murmur import procs
from murmur.formation.launch.readiness import MAX_READINESS_LINE
from murmur.formation.launch.supervise import MemberSpec
from murmur.lines import read_lines
from murmur.starter import MUR_BINARY_ENV as MUR_BINARY_ENV  # its one home: murmur.starter
from murmur.starter import mur_command as mur_command

if TYPE_CHECKING:
    from murmur.starter.client import Starter

CHANNEL_ENV = "MURMUR_FORMATION_CHANNEL"
LIFELINE_ENV = "MURMUR_FORMATION_LIFELINE"

LAST_STDERR_LINES = 5
"""How many of a peer's last stderr lines an E-RUN-045 report quotes."""

_MAX_RELAY_LINE = 64 * 1024


def warm_starter(environ: Mapping[str, str]) -> Starter | None:
    """The launch's warm starter, in a unit of the formation's: the one started at the
    launcher's start (:func:`murmur.starter.early.prestart`), else one started now; None when
    the exec path is to be used (``MURMUR_STARTER=off``, ``MURMUR_MUR_BINARY`` set, or it
    could not be started or placed)."""
    from murmur import starter
    from murmur.starter import client, early

    spawned = early.take()
    if spawned is not None or starter.wanted(environ):
        client.adopt_members()  # a member outliving its starter is ours to reap (its status)
    if spawned is not None:
        try:
            return client.Starter.adopt(spawned, procs.new_unit("starter"))
        except OSError:
            return None
    if not starter.wanted(environ):
        return None
    return client.Starter.launch(environ)


def _prefill(fd: int, data: bytes) -> bytes:
    """Write as much of ``data`` as the pipe takes without blocking; the rest is returned."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            break
        view = view[written:]
    return bytes(view)


def _close_quietly(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


class _Relay:
    """Writes a member's lines to the launcher's stderr behind ``[name] ``."""

    def __init__(self, name: str, err: BinaryIO) -> None:
        self._prefix = f"[{name}] ".encode()
        self._err = err
        self.last: collections.deque[str] = collections.deque(maxlen=LAST_STDERR_LINES)

    def line(self, raw: bytes) -> None:
        self.last.append(raw.decode("utf-8", "replace").rstrip("\r"))
        try:
            self._err.write(self._prefix + raw + b"\n")
            self._err.flush()
        except (OSError, ValueError):
            pass


class ProcessHandle:
    """A started member process (implements ``supervise.MemberHandle``).

    Created by :class:`ProcessSpawner`; not constructed directly.
    """

    def __init__(
        self,
        name: str,
        proc: procs.OwnedProcess,
        channel_fd: int,
        lifeline_fd: int,
        *,
        peer: bool,
        err: BinaryIO,
    ) -> None:
        self.name = name
        self._proc = proc
        self.unit = proc.unit
        self._peer = peer
        self._lifeline: int | None = lifeline_fd
        self._channel: trio.lowlevel.FdStream | None = trio.lowlevel.FdStream(channel_fd)
        self._channel_lock = trio.Lock()
        self._relay = _Relay(name, err)
        self._first: bytes | None = None
        self._first_seen = trio.Event()

    @property
    def pid(self) -> int:
        """The member's pid (its process group id too, for a peer)."""
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status once reaped (``-sig`` when a signal ended it)."""
        return self._proc.returncode

    async def first_line(self) -> bytes | None:
        """Its first stdout line without the newline; None when stdout ended before one."""
        await self._first_seen.wait()
        return self._first

    async def send_line(self, line: bytes) -> None:
        """Write ``line`` on its channel; a member that is gone is silently skipped."""
        async with self._channel_lock:
            if self._channel is None:
                return
            try:
                await self._channel.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass

    def close_lifeline(self) -> None:
        """Close the launcher's write end of its lifeline (once)."""
        fd, self._lifeline = self._lifeline, None
        _close_quietly(fd)

    def kill(self) -> None:
        """SIGKILL the member's unit: the member and everything it started (escapees too in
        the cgroup class; a peer's process group, or the entry member's process, otherwise)."""
        self._proc.kill()

    async def wait(self) -> int:
        """Wait for exit and reap; the exit status."""
        return await self._proc.wait()

    def last_stderr(self) -> Sequence[str]:
        """Its last stderr lines (at most five)."""
        return list(self._relay.last)

    async def aclose(self) -> None:
        """Close the channel and lifeline; sweep a reaped peer's process group."""
        self.close_lifeline()
        async with self._channel_lock:
            chan, self._channel = self._channel, None
            if chan is not None:
                await chan.aclose()
        if self._proc.returncode is not None:
            # whatever the member left running goes with it (its unit: commands, children)
            await self._proc.release()

    # -- relays (run in the launcher's relay nursery) ----------------------------------

    def _deliver_first(self, line: bytes | None) -> None:
        if not self._first_seen.is_set():
            self._first = line
            self._first_seen.set()

    async def read_stdout(self) -> None:
        """Take its first stdout line; relay any later ones to stderr."""
        stream = self._proc.stdout
        assert stream is not None
        try:
            await read_lines(stream, self._take_line, self._stdout_limit)
        finally:
            self._deliver_first(None)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _stdout_limit(self) -> int:
        return MAX_READINESS_LINE if not self._first_seen.is_set() else _MAX_RELAY_LINE

    def _take_line(self, line: bytes) -> None:
        if not self._first_seen.is_set():
            self._deliver_first(line)
        else:
            self._relay.line(line)

    async def relay_stderr(self) -> None:
        """Copy its stderr to the launcher's, one ``[name] `` line at a time."""
        stream = self._proc.stderr
        assert stream is not None
        try:
            await read_lines(stream, self._relay.line, lambda: _MAX_RELAY_LINE)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()


class ProcessSpawner:
    """Starts members as real processes (implements ``supervise.Spawner``).

    Args:
        err (BinaryIO | None): where peers' stderr is relayed (default: this process's).
        starter (Starter | None): a warm starter (``spec/formation.md`` "The warm start
            path"): while :meth:`owning` runs, members whose command is the default ``mur``
            are forked by it; any other member, and every member once it is unavailable, is
            started by exec.
    """

    def __init__(self, err: BinaryIO | None = None, *, starter: Starter | None = None) -> None:
        self._err = err if err is not None else sys.stderr.buffer
        self._starter = starter
        self._owned = False
        self._mur = mur_command()

    @contextlib.asynccontextmanager
    async def owning(self) -> AsyncIterator[ProcessSpawner]:
        """Hold the warm starter's owning task for the launch's life (a no-op without one);
        on the way out the starter is closed, reaped and its unit released."""
        if self._starter is None:
            yield self
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(self._starter.run)
            self._owned = True
            try:
                yield self
            finally:
                self._owned = False
                nursery.cancel_scope.cancel()

    async def spawn(self, spec: MemberSpec, relays: trio.Nursery) -> ProcessHandle:
        """Start ``spec``: pipes made, channel pre-filled, child ends closed here.

        Raises:
            OSError: the process could not be started (every pipe is closed again).
        """
        starter = self._starter
        prefix = self._mur
        if starter is not None and self._owned and starter.alive and list(spec.argv[: len(prefix)]) == prefix:
            from murmur.starter.client import Unavailable

            try:
                return await self._spawn_warm(starter, spec, relays)
            except Unavailable:
                pass  # the plain path below starts it
        return await self._spawn_exec(spec, relays)

    async def _spawn_exec(self, spec: MemberSpec, relays: trio.Nursery) -> ProcessHandle:
        chan_r, chan_w = os.pipe()
        life_r, life_w = os.pipe()
        keep: list[int] = [chan_w, life_w]
        try:
            rest = _prefill(chan_w, spec.channel)
            env = dict(spec.env)
            env[CHANNEL_ENV] = str(chan_r)
            env[LIFELINE_ENV] = str(life_r)
            pipe = procs.PIPE if spec.peer else None
            proc = await procs.open_process(
                spec.argv, label=spec.name, env=env, cwd=spec.cwd,
                stdin=procs.DEVNULL, stdout=pipe, stderr=pipe, pass_fds=(chan_r, life_r),
                session=spec.peer, winds_down=True, runtime=True, confinement=spec.confinement,
            )
            keep.clear()
        finally:
            # the child holds its own copies now: REQUIRED, or the lifeline's EOF never arrives
            _close_quietly(chan_r)
            _close_quietly(life_r)
            for fd in keep:
                _close_quietly(fd)
        return self._started(spec, proc, chan_w, life_w, rest, relays)

    async def _spawn_warm(self, starter: Starter, spec: MemberSpec, relays: trio.Nursery) -> ProcessHandle:
        """Have the starter fork ``spec``: the same pipes, numbers 3 (channel) and 4
        (lifeline) in the child, stdout/stderr piped for a peer (the launcher's for the entry).

        Raises:
            Unavailable: the starter cannot (the caller starts it by exec).
            OSError: the starter refused it.
        """
        from murmur.starter.client import WarmProcess

        chan_r, chan_w = os.pipe()
        life_r, life_w = os.pipe()
        out_r, out_w = os.pipe() if spec.peer else (None, None)
        err_r, err_w = os.pipe() if spec.peer else (None, None)
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        keep: list[int | None] = [chan_w, life_w, out_r, err_r]
        try:
            rest = _prefill(chan_w, spec.channel)
            env = dict(spec.env)
            env[CHANNEL_ENV] = "3"
            env[LIFELINE_ENV] = "4"
            fds = [(devnull, 0), (out_w if out_w is not None else 1, 1),
                   (err_w if err_w is not None else 2, 2), (chan_r, 3), (life_r, 4)]
            argv = [self._mur[0] if len(self._mur) == 1 else "mur", *spec.argv[len(self._mur):]]

            async def fork(argv: list[str], env: dict[str, str], cgroup: str | None,
                           wire: dict[str, Any] | None, extra: tuple[int, ...]) -> WarmProcess:
                pid = await starter.start(argv, env, spec.cwd, [*fds, *((fd, fd) for fd in extra)],
                                          session=spec.peer, cgroup=cgroup, confinement=wire)
                return WarmProcess(starter, pid, out_r, err_r)

            proc = await procs.fork_process(
                argv, label=spec.name, env=env, forker=fork, session=spec.peer,
                confinement=spec.confinement,
            )
            keep.clear()
        finally:
            for fd in (chan_r, life_r, out_w, err_w, devnull, *keep):
                _close_quietly(fd)
        return self._started(spec, proc, chan_w, life_w, rest, relays)

    def _started(
        self,
        spec: MemberSpec,
        proc: procs.OwnedProcess,
        chan_w: int,
        life_w: int,
        rest: bytes,
        relays: trio.Nursery,
    ) -> ProcessHandle:
        handle = ProcessHandle(spec.name, proc, chan_w, life_w, peer=spec.peer, err=self._err)
        if rest:
            relays.start_soon(handle.send_line, rest)
        if spec.peer:
            relays.start_soon(handle.read_stdout)
            relays.start_soon(handle.relay_stderr)
        else:
            handle._deliver_first(None)
        return handle
