"""The launcher's side of the warm starter: start it, ask it to fork, learn exit statuses.

Specification: ``spec/formation.md`` "The warm start path". :meth:`Starter.launch` starts the
starter process (synchronously, from the launcher's main thread, so its
``PR_SET_PDEATHSIG`` follows the launcher's life and not a worker thread's) in a containment
unit of its own (``starter-<n>``; the janitor kills it as soon as the launcher is gone);
:meth:`Starter.run` is its owning task (reads every answer; on the way out closes the socket,
so the starter exits, then reaps it and releases its unit). :meth:`Starter.start` forks one
member and returns a :class:`WarmProcess`, which stands where the exec path's
``trio.Process`` stands: ``pid``, ``returncode``, ``stdout``/``stderr`` streams and
``wait()``. Killing a member stays its owner's business (its containment unit); the starter
only reaps and reports.

Errors: :class:`Unavailable` — the starter is gone or never became ready (the caller starts
that member by exec instead); ``OSError`` — the starter refused this one start (as
``open_process`` would raise it: the working directory is missing, fork failed).
"""

from __future__ import annotations

import array
import errno
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

import trio

from murmur import containment, procs
from murmur.starter import early, protocol

READY_BOUND = 30.0
"""Seconds a start waits for the starter's imports before that member is started by exec."""

_CLOSE_BOUND = 2.0  # seconds the owner waits for the starter to exit after closing its socket
UNKNOWN_STATUS = -signal.SIGKILL
"""The exit status of a member whose starter died before it could report one."""


def reap_adopted(pidfd: int) -> int:
    """Reap an ended process this one adopted (its starter died first); its exit status.

    Args:
        pidfd (int): the process's pidfd (readable: it has ended).

    Returns:
        int: its exit code, ``-N`` when signal ``N`` ended it, or :data:`UNKNOWN_STATUS`
        when it is not this process's child (it went to init or another subreaper).
    """
    try:
        got = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
    except (ChildProcessError, OSError):
        return UNKNOWN_STATUS
    if got is None:
        return UNKNOWN_STATUS
    if got.si_code == os.CLD_EXITED:
        return int(got.si_status)
    return -int(got.si_status)


def adopt_members() -> bool:
    """Mark this process a child subreaper, so a process the starter forked is re-parented
    here (and its status read by :func:`reap_adopted`) if the starter dies first; False when
    the host refuses it."""
    return containment.become_subreaper()


class Unavailable(Exception):
    """The starter cannot start this member (start it by exec)."""


class WarmProcess:
    """A member or child forked by the starter (what :class:`murmur.formation.launch.process.ProcessHandle`
    and :class:`murmur.delegation.child_process.Child` hold in place of a ``trio.Process``).

    Attributes:
        pid (int): its pid (its process group id too, for a peer or a child).
        stdin (trio.lowlevel.FdStream | None): the write end of its stdin pipe, when it has one.
        stdout, stderr (trio.lowlevel.FdStream | None): the owner's read ends of its pipes.
    """

    def __init__(self, starter: Starter, pid: int, stdout: int | None, stderr: int | None,
                 stdin: int | None = None) -> None:
        self._starter = starter
        self.pid = pid
        self.stdin = trio.lowlevel.FdStream(stdin) if stdin is not None else None
        self.stdout = trio.lowlevel.FdStream(stdout) if stdout is not None else None
        self.stderr = trio.lowlevel.FdStream(stderr) if stderr is not None else None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            self._pidfd = None
        self._pidfd_waiter = trio.Lock()  # one task at a time may wait on the pidfd

    def send_signal(self, sig: int) -> None:
        """Signal it through its pidfd (never a reused pid); nothing once it has been reaped.

        Raises:
            ProcessLookupError: it has already exited.
        """
        if self._pidfd is None or self.returncode is not None:
            return
        signal.pidfd_send_signal(self._pidfd, sig)

    @property
    def returncode(self) -> int | None:
        """Its exit status once the starter reported it (``-N`` for signal ``N``)."""
        return self._starter.exits.get(self.pid)

    async def wait(self) -> int:
        """Wait until the starter has reaped it; its exit status.

        If the starter dies first, waits for the process itself to end (its ``pidfd``) and
        reads its real status when this process adopted it (a child subreaper:
        :func:`reap_adopted`), else gives :data:`UNKNOWN_STATUS`. Several tasks may wait at once (the owner's reaper and a
        stop, say): they take turns on the pidfd, and the first to see the end records it.
        """
        try:
            code = await self._starter.wait_exit(self.pid)
            if code is None:  # the starter is gone: the member was re-parented
                async with self._pidfd_waiter:
                    if self._pidfd is not None and self.returncode is None:
                        await trio.lowlevel.wait_readable(self._pidfd)
                        self._starter.exits.setdefault(self.pid, reap_adopted(self._pidfd))
                    self._starter.exits.setdefault(self.pid, UNKNOWN_STATUS)
                code = self._starter.exits[self.pid]
            return code
        finally:
            if self.returncode is not None and self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None


class Starter:
    """One warm starter process and the launcher's socket to it (make one with :meth:`launch`)."""

    def __init__(self, popen: subprocess.Popen[bytes], sock: socket.socket, unit: containment.Unit | None) -> None:
        self._popen = popen
        self._sock = trio.socket.from_stdlib_socket(sock)
        self._unit = unit
        self._ready = trio.Event()
        self._gone = trio.Event()
        self._lock = trio.Lock()
        self._ids = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._answered: dict[int, trio.Event] = {}
        self.exits: dict[int, int] = {}
        self._exited: dict[int, trio.Event] = {}
        self.alive = True

    @classmethod
    def launch(cls, environ: Mapping[str, str] | None = None, *, contained: bool = True,
               env: dict[str, str] | None = None) -> Starter | None:
        """Start the starter process now (no Trio needed); None when it cannot be started.

        Args:
            environ (Mapping[str, str] | None): the environment its own is drawn from
                (:func:`murmur.starter.early.starter_env`; default ``os.environ``).
            contained (bool): start it in a unit of its own now; otherwise it runs in this
                process's own cgroup (and group of its own) until :meth:`contain` moves it —
                for a launcher that starts it before its formation's units exist. Until then
                it has no child, and ``PR_SET_PDEATHSIG`` ends it with this process.
            env (dict[str, str] | None): its whole environment instead (a delegating session
                gives it none: its children are given no ``PYTHON*`` or locale variable).
        """
        unit = procs.new_unit("starter") if contained else None
        spawned = early.spawn(os.environ if environ is None else environ,
                              unit.command if unit is not None else None, env=env)
        if spawned is None:
            if unit is not None:
                unit.release_blocking()  # nothing ran in it
            return None
        if unit is not None:
            unit.started(spawned.popen.pid, own_group=True, winds_down=False)
        return cls(spawned.popen, spawned.sock, unit)

    @classmethod
    def adopt(cls, spawned: early.Spawned, unit: containment.Unit) -> Starter:
        """Own a starter :func:`murmur.starter.early.prestart` started, moving it into ``unit``.

        Raises:
            OSError: it could not be moved (it is killed and reaped first).
        """
        got = cls(spawned.popen, spawned.sock, None)
        try:
            got.contain(unit)
        except OSError:
            got.discard()
            unit.release_blocking()  # the starter was never moved into it
            raise
        return got

    def contain(self, unit: containment.Unit) -> None:
        """Move the (childless) starter into ``unit`` and register it there.

        Raises:
            OSError: it could not be moved (the caller then discards it).
        """
        if unit.path is not None:
            fd = os.open(unit.path / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, str(self._popen.pid).encode())
            finally:
                os.close(fd)
        unit.started(self._popen.pid, own_group=True, winds_down=False)
        self._unit = unit

    def discard(self) -> None:
        """Kill and reap the starter now (synchronous; it forked nothing that is still ours)."""
        self.alive = False
        early.kill_group(self._popen)
        self._sock.close()
        if self._unit is not None:
            self._unit.release_blocking()  # its one process is reaped: nothing is left to wait for

    @property
    def pid(self) -> int:
        return self._popen.pid

    # -- the owning task ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the starter's answers until it ends; on cancellation close it, reap it and
        release its unit (bounded by ``_CLOSE_BOUND``)."""
        task_status.started()
        try:
            while True:
                try:
                    raw = await self._sock.recv(65536)  # answers are small
                except OSError:
                    raw = b""
                if not raw:
                    return
                try:
                    self._take(protocol.decode(raw))
                except ValueError:
                    continue
        finally:
            self._went_away()
            with trio.CancelScope(shield=True):
                await self._end()

    def _take(self, msg: dict[str, Any]) -> None:
        if "ready" in msg:
            self._ready.set()
        elif isinstance(msg.get("started"), int):
            rid = msg["started"]
            if isinstance(msg.get("pid"), int):  # a status kept for an earlier process of that pid is stale
                self.exits.pop(msg["pid"], None)
            self._answers[rid] = msg
            event = self._answered.pop(rid, None)
            if event is not None:
                event.set()
        elif isinstance(msg.get("exited"), int) and isinstance(msg.get("status"), int):
            pid = msg["exited"]
            self.exits[pid] = msg["status"]
            event = self._exited.pop(pid, None)
            if event is not None:
                event.set()

    def _went_away(self) -> None:
        self.alive = False
        self._gone.set()
        self._ready.set()
        for event in [*self._answered.values(), *self._exited.values()]:
            event.set()
        self._answered.clear()
        self._exited.clear()

    async def _end(self) -> None:
        self._sock.close()  # EOF: the starter exits
        try:
            pidfd: int | None = os.pidfd_open(self._popen.pid)
        except OSError:
            pidfd = None
        if pidfd is not None:
            try:
                with trio.move_on_after(_CLOSE_BOUND):
                    await trio.lowlevel.wait_readable(pidfd)
            finally:
                os.close(pidfd)
        if self._unit is not None:
            await self._unit.release()  # kills it if it is still there
        else:
            containment.killpg(self._popen.pid)
        try:
            self._popen.wait(timeout=_CLOSE_BOUND)
        except subprocess.TimeoutExpired:
            pass

    # -- requests ----------------------------------------------------------------------------

    async def wait_ready(self) -> bool:
        """Wait until the starter has done its imports (or is gone); whether it is ready."""
        await self._ready.wait()
        return self.alive

    async def wait_exit(self, pid: int) -> int | None:
        """The status the starter reported for ``pid``; None when the starter went away first."""
        while pid not in self.exits and self.alive:
            event = self._exited.setdefault(pid, trio.Event())
            await event.wait()
        return self.exits.get(pid)

    async def start(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        fds: list[tuple[int, int]],
        *,
        session: bool,
        cgroup: str | None,
        confinement: dict[str, Any] | None = None,
    ) -> int:
        """Fork one member; its pid.

        Args:
            argv (list[str]): the ``mur`` command line (``argv[0]`` the program).
            env (dict[str, str]): its whole environment.
            cwd (str): its working directory.
            fds (list[tuple[int, int]]): ``(descriptor here, number in the child)`` pairs; the
                caller keeps (and closes) its own descriptors.
            session (bool): a session of its own (a peer); otherwise the launcher's group.
            cgroup (str | None): its unit's directory (cgroup class).
            confinement (dict | None): its confinement's wire object (None: advisory).

        Raises:
            Unavailable: the starter is gone or not ready within :data:`READY_BOUND`.
            OSError: the starter refused this start (``errno`` from the starter).
        """
        if not self.alive:
            raise Unavailable("the starter is gone")
        with trio.move_on_after(READY_BOUND):
            await self._ready.wait()
        if not self.alive or not self._ready.is_set():
            raise Unavailable("the starter is not ready")
        answer = await self._ask(lambda rid: protocol.StartRequest(
            id=rid,
            argv=tuple(argv),
            env=env,
            cwd=cwd,
            fds=tuple(target for _, target in fds),
            session=session,
            pgid=None if session else os.getpgrp(),
            cgroup=cgroup,
            title=protocol.title(argv),
            confinement=confinement,
        ), fds)
        if isinstance(answer.get("pid"), int):
            return int(answer["pid"])
        code = answer.get("errno")
        raise OSError(code if isinstance(code, int) else 0, str(answer.get("error") or "the starter refused"))

    async def _ask(
        self, make: Callable[[int], protocol.StartRequest | protocol.ExecRequest], fds: list[tuple[int, int]]
    ) -> dict[str, Any]:
        """Send the request ``make`` builds for the next id, with ``fds`` passed beside it
        (SCM_RIGHTS), and return the starter's answer to it.

        Raises:
            Unavailable: it could not be sent, or the starter went away before answering.
        """
        async with self._lock:
            self._ids += 1
            rid = self._ids
            req = make(rid)
            event = self._answered[rid] = trio.Event()
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd for fd, _ in fds]))]
            try:
                await self._sock.sendmsg([req.encode()], ancillary)
            except OSError as exc:
                self._answered.pop(rid, None)
                raise Unavailable(f"the starter cannot be asked ({exc})") from None
        await event.wait()
        answer = self._answers.pop(rid, None)
        if answer is None:
            raise Unavailable("the starter went away")
        return answer

    async def exec(
        self,
        argv: list[str],
        executable: str,
        env: dict[str, str],
        cwd: str,
        fds: list[tuple[int, int]],
        *,
        session: bool,
        cgroup: str,
        confinement: dict[str, Any] | None = None,
    ) -> int:
        """Have the starter clone a command straight into unit ``cgroup`` and exec it; its pid
        once it has exec'd (:mod:`murmur.procs.cloned`). Its exit status comes as a
        member's does (:meth:`wait_exit`, :class:`WarmProcess`).

        Args:
            argv (list[str]): the command's arguments; ``executable`` (str): the absolute path run.
            env, cwd, fds, session, confinement: as :meth:`start`.
            cgroup (str): its unit's directory.

        Raises:
            Unavailable: the starter is gone, not ready, or the kernel refused the clone
                (``clone3`` ``ENOSYS``/``EPERM``/``EINVAL``…): start the command another way.
            OSError: the command could not start (its ``chdir``, its confinement's setup or its
                ``execve`` failed): the subclass and ``filename`` ``subprocess.Popen`` gives.
        """
        if not self.alive or not self._ready.is_set():  # never wait for a cold starter: exec it now
            raise Unavailable("the starter is not ready")
        answer = await self._ask(lambda rid: protocol.ExecRequest(
            id=rid, argv=tuple(argv), executable=executable, env=env, cwd=cwd,
            fds=tuple(target for _, target in fds), session=session,
            pgid=None if session else os.getpgrp(), cgroup=cgroup, confinement=confinement,
        ), fds)
        if isinstance(answer.get("pid"), int):
            return int(answer["pid"])
        code = answer.get("errno")
        code = code if isinstance(code, int) and code > 0 else errno.EIO
        if answer.get("stage") not in ("chdir", "setup", "exec"):
            raise Unavailable(f"the starter could not clone it ({os.strerror(code)})")
        filename = answer.get("filename")
        raise OSError(code, os.strerror(code), filename if isinstance(filename, str) else None)


class Commands:
    """A session's commands started by its warm starter (what :func:`murmur.procs.open_process`
    takes as ``starter``): the starter is looked up at each start, so one that has gone, or is
    not there yet, makes that start fall back to the exec path.

    Args:
        current: the session's starter now (None: none).
    """

    def __init__(self, current: Callable[[], Starter | None]) -> None:
        self._current = current

    async def exec_into(self, argv: list[str], executable: str, env: dict[str, str], cwd: str,
                        fds: list[tuple[int, int]], *, session: bool, cgroup: str,
                        confinement: dict[str, Any] | None) -> procs.Running | None:
        """The started command, or None when it must be started another way (see :meth:`Starter.exec`).

        Raises:
            OSError: the command could not start (as ``subprocess.Popen`` raises it).
        """
        got = self._current()
        if got is None:
            return None
        try:
            pid = await got.exec(argv, executable, env, cwd, fds, session=session, cgroup=cgroup,
                                 confinement=confinement)
        except Unavailable:
            return None
        return WarmProcess(got, pid, None, None)
