"""What a process forked by the warm starter does before it is a ``mur run``.

Specification: ``spec/formation.md`` "The warm start path". Called in the child right after
``fork``; never returns (``os._exit``). In this order:

1. **containment** — on the cgroup class it writes its pid to its unit's ``cgroup.procs``
   before anything else (:func:`murmur.procs.join_cgroup`, as the exec path's ``/bin/sh``
   trampoline does): if that fails it writes ``murmur: could not join containment unit
   <path>`` to its stderr (once its descriptors are in place) and exits 125, having run
   nothing; then, once its descriptors are in place, its **confinement** (the request's wire
   object rebuilt by :func:`murmur.procs.from_wire`; its ``child_setup`` runs here; one that
   cannot be rebuilt is status 127 and a ``murmur:`` line);
2. **process group** — ``setsid`` (a peer: its own session and group) or ``setpgid`` into the
   launcher's group (the entry member);
3. **descriptors** — each passed descriptor is moved to its number (stdin, stdout, stderr, the
   channel, the lifeline); every other descriptor (the starter's socket included) is closed;
4. **signals** — the dispositions a fresh interpreter has (the starter ignores SIGINT,
   SIGTERM and SIGHUP; a member must not);
5. **working directory, environment, ``sys.argv``, what ``/proc`` shows** — its argument and
   environment areas are pointed at its own command line (``mur run --capsule …``) and its
   own environment (:func:`murmur.starter.procarea.point_areas`), so ``/proc/<pid>/cmdline``
   and ``/proc/<pid>/environ`` are exactly what an ``execve`` would show; where the kernel
   refuses, the title is set through ``setproctitle`` and ``environ`` shows the starter's
   scrubbed environment (:func:`murmur.starter.client.starter_env`);
6. ``entry(argv[1:])`` (``mur``'s ``main``, handed down by the command line); the exit status is that of a ``mur`` process: its
   return value, a ``SystemExit`` code, or 1 with a traceback for anything else; the
   interpreter's exit handlers run, stdout and stderr are flushed.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from murmur.procs import JOIN_FAILED, from_wire, join_cgroup
from murmur.starter import procarea
from murmur.starter.protocol import StartRequest

_FD_PARK = 256  # passed descriptors are parked above this before they are moved into place


def _fail(message: str, status: int) -> NoReturn:
    try:
        os.write(2, f"murmur: {message}\n".encode())
    except OSError:
        pass
    os._exit(status)


def place_fds(received: list[int], targets: tuple[int, ...]) -> None:
    """Move ``received[i]`` to number ``targets[i]``; close every other descriptor."""
    parked = [os.dup2(fd, _FD_PARK + i, inheritable=False) for i, fd in enumerate(received)]
    for src, dst in zip(parked, targets, strict=True):
        os.dup2(src, dst, inheritable=True)
    keep = set(targets)
    for fd in _open_fds():
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _open_fds() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def reset_signals() -> None:
    """The dispositions a fresh interpreter starts with."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def set_title(argv: tuple[str, ...], env: dict[str, str], text: str) -> bool:
    """Make ``ps`` and ``/proc/<pid>/cmdline`` show ``argv`` and ``/proc/<pid>/environ`` show
    ``env`` (``comm`` becomes ``mur``); True when ``/proc`` shows both exactly, False when only
    the title ``text`` could be set (``setproctitle``, in the argument area)."""
    exact = procarea.point_areas(argv, env)
    if not exact:
        try:
            import setproctitle

            setproctitle.setproctitle(text)
        except Exception:
            pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, b"mur", 0, 0, 0)  # PR_SET_NAME: what `ps -o comm` and `top` show
    except (OSError, AttributeError):
        pass
    return exact


Entry = Callable[[list[str]], int]
"""What a forked child runs: ``mur``'s ``main`` (its arguments without the program → its exit
status), handed down by the command line that started the starter."""


def run(req: StartRequest, received: list[int], entry: Entry) -> NoReturn:
    """Become ``req``'s ``mur run`` and exit with its status (the forked child only)."""
    try:
        joined = req.cgroup is None or join_cgroup(req.cgroup)
        if req.session:
            os.setsid()
        elif req.pgid is not None:
            os.setpgid(0, req.pgid)
        place_fds(received, req.fds)
        if not joined:  # said on its own stderr, as the trampoline says it
            _fail(f"could not join containment unit {req.cgroup}", JOIN_FAILED)
        _confine(req)
        reset_signals()
        os.chdir(req.cwd)
        os.environ.clear()
        os.environ.update(req.env)
        sys.argv = list(req.argv)
        for stream in (sys.stdout, sys.stderr):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(line_buffering=stream is sys.stderr or os.isatty(stream.fileno()))
        set_title(("mur", *req.argv[1:]), req.env, req.title)
    except OSError as exc:
        _fail(f"could not be started ({exc.strerror or exc})", 127)
    status = _main(entry, list(req.argv[1:]))
    _exit(status)


def _confine(req: StartRequest) -> None:
    """Apply the request's confinement (after the join, before anything of ``mur`` runs)."""
    if req.confinement is None:
        return
    try:
        confinement = from_wire(req.confinement)
    except ValueError as exc:
        _fail(f"could not be confined ({exc})", 127)
    setup = confinement.child_setup() if confinement is not None else None
    if setup is not None:
        setup()


def _main(entry: Entry, argv: list[str]) -> int:
    try:
        return int(entry(argv))
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1


def _exit(status: int) -> NoReturn:
    import atexit

    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)
