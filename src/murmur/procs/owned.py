"""The one primitive that starts a process the runtime owns, on either start path.

Specification: ``spec/architecture.md`` "Where a process starts" and ``spec/session.md``
"Containment". :func:`open_process` (the exec path) and :func:`fork_process` (the warm path:
the warm starter forks it) both:

1. make its **placement**: a containment unit (:func:`murmur.procs.placement.new_unit`),
   joined before the command runs (exec path: the unit's ``/bin/sh`` trampoline; warm path:
   the forked child writes ``cgroup.procs`` first), then the **confinement**
   (:mod:`murmur.procs.confinement`; None = advisory): its argv, environment and descriptors
   here, its ``child_setup`` in the child after the join;
2. make its **pipes** (stdin, stdout, stderr: ``PIPE``, ``DEVNULL``, ``None`` = inherit, or a
   descriptor), the parent's copies of the child's ends closed at once;
3. register it with the unit (and so with the janitor) and return an :class:`OwnedProcess`:
   ``pid``, ``returncode``, the three streams, ``wait()`` — and its **end**: :meth:`~OwnedProcess.end`
   (ask, the grace, SIGKILL of the unit, reaped) or :meth:`~OwnedProcess.kill_and_reap`
   (SIGKILL of the unit, reaped, pipes closed, unit released; shielded).

Given the session's warm starter (``starter=``, :class:`CommandStarter`), :func:`open_process`
hands a command on the cgroup class to it instead: the starter clones it straight into its
unit (``clone3(CLONE_INTO_CGROUP)``, :mod:`murmur.procs.cloned`) and execs it, so no
trampoline runs and no ``cgroup.procs`` write waits for an RCU grace period; whenever the
starter cannot, the same call takes the exec path below.

The exec path calls ``subprocess.Popen`` on the Trio thread (it uses ``vfork``: about 0.15 ms
for a runtime's 50 MB, measured in ``benchmarks/shell_breakdown.py``) instead of
``trio.lowlevel.open_process``'s worker thread, whose hand-off cost about 1 ms per command
on a loaded 2-core host; the exit is awaited on a ``pidfd``. A confinement with a
``child_setup`` makes it ``fork`` instead (``preexec_fn``).

Errors: ``OSError`` — it could not be started (the unit is released first); the warm path's
``forker`` raises what it raises (``Unavailable``, a refusal), the unit released first.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

from murmur import containment
from murmur.procs import childside, grace, placement
from murmur.procs.confinement import Confinement

__all__ = ["DEVNULL", "PIPE", "CommandStarter", "OwnedProcess", "Running", "fork_process", "open_process"]

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
Stdio = int | None
"""``PIPE``, ``DEVNULL``, ``None`` (inherit this process's) or a descriptor to hand over."""


class Running(Protocol):
    """What an owned process runs as: a started ``Popen`` (:class:`_Exec`) or a warm starter's
    fork (:class:`murmur.starter.client.WarmProcess`)."""

    pid: int

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...


class CommandStarter(Protocol):
    """What clones a command straight into its unit (:class:`murmur.starter.client.Commands`)."""

    async def exec_into(self, argv: list[str], executable: str, env: dict[str, str], cwd: str,
                        fds: list[tuple[int, int]], *, session: bool, cgroup: str,
                        confinement: dict[str, Any] | None) -> Running | None:
        """The started process, or None (start it another way).

        ``fds`` are ``(descriptor here, number in the child)``; the caller keeps its own.

        Raises:
            OSError: the command could not start (as ``subprocess.Popen`` raises it).
        """


class _Exec:
    """A ``subprocess.Popen`` awaited on its ``pidfd`` (several tasks may wait at once)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        try:
            self._pidfd: int | None = os.pidfd_open(popen.pid)
        except OSError:
            self._pidfd = None
        self._lock = trio.Lock()

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def send_signal(self, sig: int) -> None:
        """Signal it; nothing once it has been reaped."""
        if self._popen.returncode is None:
            self._popen.send_signal(sig)

    async def wait(self) -> int:
        async with self._lock:
            while self._popen.poll() is None:
                if self._pidfd is not None:
                    await trio.lowlevel.wait_readable(self._pidfd)
                else:  # no pidfd (an old kernel): poll
                    await trio.sleep(0.01)
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        code = self._popen.returncode
        assert code is not None
        return code


class OwnedProcess:
    """A started process, its unit and its pipes (made by :func:`open_process` or :func:`fork_process`).

    Attributes:
        pid (int): its pid (its process group id too when it leads one).
        unit (containment.Unit | None): its containment unit (None only for an uncontained
            start, ``contained=False``: the demo's own processes).
        stdin (trio.abc.SendStream | None), stdout, stderr (trio.abc.ReceiveStream | None):
            this side's ends of its piped streams.
    """

    def __init__(self, running: Running, unit: containment.Unit | None, *, stdin: Any = None,
                 stdout: Any = None, stderr: Any = None) -> None:
        self.running = running
        self.pid = running.pid
        self.unit = unit
        self.stdin: trio.abc.SendStream | None = stdin
        self.stdout: trio.abc.ReceiveStream | None = stdout
        self.stderr: trio.abc.ReceiveStream | None = stderr

    @property
    def returncode(self) -> int | None:
        """Its exit status once reaped (``-N`` when signal ``N`` ended it)."""
        return self.running.returncode

    async def wait(self) -> int:
        """Wait until it has exited and is reaped; its exit status."""
        return await self.running.wait()

    def send_signal(self, sig: int) -> None:
        """Signal the process itself (nothing once reaped).

        Raises:
            ProcessLookupError: it has already exited.
        """
        self.running.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL everything its unit holds (uncontained: its process group, or the process
        itself when it leads none; synchronous, never raises)."""
        if self.unit is not None:
            self.unit.kill()
            return
        if self.returncode is None:
            try:
                if os.getpgid(self.pid) == self.pid:
                    os.killpg(self.pid, signal.SIGKILL)
                else:
                    os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    async def end(self, grace_s: float, ask: Callable[[], None]) -> bool:
        """Ask it to end (``ask``), give it ``grace_s`` seconds, SIGKILL its unit; always reaped.
        True when it had to be killed (:func:`murmur.procs.grace.end_within`; run it shielded
        when it must finish under cancellation)."""
        return await grace.end_within(grace_s, ask=ask, alive=lambda: self.returncode is None,
                                      wait=self.wait, kill=self.kill)

    async def kill_and_reap(self) -> None:
        """SIGKILL its unit, reap it and close its pipes (shielded), release the unit (whose
        release sweeps adopted escapees once, groups class)."""
        if self.unit is not None:
            self.unit.kill(sweep=False)
        else:
            self.kill()
        with trio.CancelScope(shield=True):
            await self.wait()
            for stream in (self.stdin, self.stdout, self.stderr):
                if stream is not None:
                    await stream.aclose()
            await self.release()

    async def release(self) -> None:
        """Kill what is left in its unit and remove the unit (idempotent; shielded, see
        :meth:`murmur.containment.Unit.release`)."""
        if self.unit is not None:
            await self.unit.release()


def _pipe(kind: Stdio, *, read: bool, close: list[int]) -> tuple[Stdio, int | None]:
    """(what the child gets, this side's end) for one stream."""
    if kind != PIPE:
        return kind, None
    r, w = os.pipe()
    child, ours = (w, r) if read else (r, w)
    close.append(child)
    return child, ours


def _placed(argv: Sequence[str], env: Mapping[str, str], unit: containment.Unit | None, *, runtime: bool,
            confinement: Confinement | None) -> tuple[list[str], dict[str, str], tuple[int, ...]]:
    env = dict(env)
    if runtime and unit is not None:
        env.update(unit.env())
    argv = list(argv)
    fds: tuple[int, ...] = ()
    if confinement is not None:
        argv = confinement.argv(argv)
        env = confinement.environ(env)
        fds = confinement.pass_fds()
    return argv, env, fds


async def open_process(
    argv: Sequence[str],
    *,
    label: str,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    stdin: Stdio = DEVNULL,
    stdout: Stdio = PIPE,
    stderr: Stdio = PIPE,
    pass_fds: Sequence[int] = (),
    session: bool = True,
    winds_down: bool = False,
    runtime: bool = False,
    executable: str | None = None,
    confinement: Confinement | None = None,
    contained: bool = True,
    starter: CommandStarter | None = None,
) -> OwnedProcess:
    """Start ``argv`` by exec, in a fresh unit, and own it.

    With a ``starter`` (the session's warm starter, :class:`murmur.starter.client.Commands`),
    a start on the cgroup class in a session of its own with a resolved ``executable`` is
    cloned by the starter straight into its unit (``clone3(CLONE_INTO_CGROUP)``) and exec'd
    there: no trampoline, no write to ``cgroup.procs``. Whenever the starter cannot (it is
    gone, not ready, or the kernel refuses the clone) it starts as without one.

    Args:
        argv: the command (``argv[0]`` looked up on ``env``'s ``PATH`` unless ``executable``).
        label (str): names its unit (``cmd``, a member's name, a delegation id).
        env: its whole environment.
        cwd: its working directory (None: this process's).
        stdin, stdout, stderr: ``PIPE``, ``DEVNULL``, ``None`` (inherit) or a descriptor.
        pass_fds: descriptors it inherits (the caller closes its copies afterwards).
        session (bool): a session and process group of its own (else this process's group).
        winds_down (bool): a runtime that winds down by itself when its owner dies (a member,
            a child): the janitor gives it the bound. Otherwise (a command) it is killed at once.
        runtime (bool): it is a ``mur run`` (its environment names its unit, ``MURMUR_CONTAINMENT_UNIT``).
        executable (str | None): the resolved program (a shell step resolves it first).
        confinement (Confinement | None): the sandbox's contribution (None: advisory).
        contained (bool): False starts it in no unit (only the demo does: its processes are
            whole ``mur`` programs, and its own watchdog ends them if the demo dies).
        starter (CommandStarter | None): the session's warm starter (see above); None: exec.

    Raises:
        OSError: it could not be started (``filename`` is ``cwd`` when that is what failed);
            the unit is released first. Through the starter, the subclass, ``errno`` and
            ``filename`` ``subprocess.Popen`` gives for the same failure.
    """
    unit = placement.new_unit(label) if contained else None
    path = unit.path if unit is not None else None
    close: list[int] = []
    ours: list[int | None] = []
    asked = False
    try:
        argv, penv, extra = _placed(argv, env, unit, runtime=runtime, confinement=confinement)
        c_in, p_in = _pipe(stdin, read=False, close=close)
        c_out, p_out = _pipe(stdout, read=True, close=close)
        c_err, p_err = _pipe(stderr, read=True, close=close)
        ours = [p_in, p_out, p_err]
        running: Running | None = None
        if starter is not None and path is not None and session and executable is not None:
            asked = True
            running = await _by_starter(starter, argv, executable, penv, cwd, (c_in, c_out, c_err),
                                        (*pass_fds, *extra), str(path), confinement)
        if running is None:
            running = _popen(argv, penv, unit, path, cwd=cwd, stdio=(c_in, c_out, c_err), executable=executable,
                             pass_fds=(*pass_fds, *extra), session=session, confinement=confinement)
    except BaseException:
        for fd in ours:
            if fd is not None:
                os.close(fd)
        if unit is not None:
            if asked:  # the starter may have cloned it before the failure: kill what the unit holds
                with trio.CancelScope(shield=True):
                    await unit.release()
            else:
                unit.release_blocking()  # the start failed: nothing runs in it
        raise
    finally:
        for fd in close:
            os.close(fd)
    if unit is not None:
        unit.started(running.pid, own_group=session, winds_down=winds_down, child=isinstance(running, _Exec))
    return OwnedProcess(
        running, unit,
        stdin=trio.lowlevel.FdStream(p_in) if p_in is not None else None,
        stdout=trio.lowlevel.FdStream(p_out) if p_out is not None else None,
        stderr=trio.lowlevel.FdStream(p_err) if p_err is not None else None,
    )


def _popen(argv: list[str], penv: dict[str, str], unit: containment.Unit | None, path: Path | None, *,
           cwd: str | os.PathLike[str] | None, stdio: tuple[Stdio, Stdio, Stdio], executable: str | None,
           pass_fds: tuple[int, ...], session: bool, confinement: Confinement | None) -> _Exec:
    """The exec path: ``subprocess.Popen`` (the unit's trampoline joins it, or ``preexec_fn``)."""
    setup = confinement.child_setup() if confinement is not None else None
    if setup is not None:  # the join and the setup in the child, in that order
        command, preexec = argv, childside.preexec(str(path) if path is not None else None, setup)
    elif unit is not None and path is not None:  # the unit's trampoline joins it (vfork kept)
        command = unit.command(argv, penv) if executable is None else [*unit.prefix(penv), executable, *argv[1:]]
        preexec = None
    else:
        command, preexec = list(argv), None
    exe = executable if (path is None or setup is not None) else None
    c_in, c_out, c_err = stdio
    # On this thread, not a worker's: vfork takes ~0.15 ms, the thread hand-off ~1 ms.
    return _Exec(subprocess.Popen(  # called on the Trio thread: see the module text (measured)
        command, executable=exe, stdin=c_in, stdout=c_out, stderr=c_err,
        cwd=os.fspath(cwd) if cwd is not None else None, env=penv,
        pass_fds=pass_fds, start_new_session=session, close_fds=True, preexec_fn=preexec,
    ))


async def _by_starter(starter: CommandStarter, argv: list[str], executable: str, penv: dict[str, str],
                      cwd: str | os.PathLike[str] | None, stdio: tuple[Stdio, Stdio, Stdio],
                      extra: tuple[int, ...], cgroup: str, confinement: Confinement | None) -> Running | None:
    """The session's starter clones it into ``cgroup`` and execs it; None: start it by exec.

    ``stdio`` is what the child gets for 0, 1, 2 (a descriptor, ``DEVNULL``, or None: this
    process's own); ``extra`` descriptors keep their numbers.
    """
    opened: list[int] = []
    fds: list[tuple[int, int]] = []
    for target, kind in enumerate(stdio):
        if kind == DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            opened.append(fd)
        else:
            fd = target if kind is None else int(kind)
        fds.append((fd, target))
    fds.extend((fd, fd) for fd in extra)
    try:
        try:
            wire = confinement.to_wire() if confinement is not None else None
        except ValueError:  # it cannot cross to the starter: it is applied here instead
            return None
        return await starter.exec_into(list(argv), executable, penv, os.fspath(cwd) if cwd is not None else os.getcwd(),
                                       fds, session=True, cgroup=cgroup, confinement=wire)
    finally:
        for fd in opened:
            os.close(fd)


Forker = Callable[[list[str], dict[str, str], "str | None", "dict[str, Any] | None", tuple[int, ...]],
                 Awaitable[Running]]
"""The warm starter's side of a warm start: ``(argv, env, cgroup, confinement wire, extra fds)
-> the forked process``. It sends the request with the caller's descriptors plus the extra
ones (the confinement's ``pass_fds``, each under its own number) and waits for the pid."""


async def fork_process(
    argv: Sequence[str],
    *,
    label: str,
    env: Mapping[str, str],
    forker: Forker,
    session: bool = True,
    winds_down: bool = True,
    runtime: bool = True,
    confinement: Confinement | None = None,
) -> OwnedProcess:
    """Have the warm starter fork ``argv`` in a fresh unit, and own it.

    The forked child joins the unit first, then applies the confinement (rebuilt in the
    starter from :meth:`Confinement.to_wire`), before ``mur``'s ``main`` runs
    (:mod:`murmur.starter.child`).

    Args:
        argv: the ``mur`` command line.
        label, env, session, winds_down, runtime, confinement: as :func:`open_process`.
        forker: sends the start to the starter (see :data:`Forker`); the process it returns
            carries this side's ``stdin``/``stdout``/``stderr`` streams (or None).

    Raises:
        whatever ``forker`` raises; the unit is released first.
    """
    unit = placement.new_unit(label)
    try:
        argv, penv, extra = _placed(argv, env, unit, runtime=runtime, confinement=confinement)
        wire = confinement.to_wire() if confinement is not None else None
        running = await forker(argv, penv, str(unit.path) if unit.path is not None else None, wire, extra)
    except BaseException:
        with trio.CancelScope(shield=True):
            await unit.release()  # a child the starter forked before it went away goes with it
        raise
    unit.started(running.pid, own_group=session, winds_down=winds_down, child=False)
    return OwnedProcess(running, unit, stdin=getattr(running, "stdin", None),
                        stdout=getattr(running, "stdout", None), stderr=getattr(running, "stderr", None))
