"""Starting the warm starter process, before anything else is imported (no Trio here).

Specification: ``spec/formation.md`` "The warm start path". A launcher calls :func:`prestart`
first thing (``mur run --roster`` does it before it imports the formation code), so the
starter's imports (about as long as the launcher's own) run beside the launcher's on a
second core; :func:`take` hands the process to its owner (:class:`murmur.starter.client.Starter`).

A launcher's starter's environment is :func:`starter_env`: only what shapes the interpreter
itself as it starts (``PYTHON*``, the locale), never anything else of the launcher's; a
delegating session gives its starter ``PATH`` alone. A forked process shows its own
environment in ``/proc/<pid>/environ`` (:mod:`murmur.starter.procarea`); where the kernel does
not allow that, it shows its starter's, which every process that starter forks is given too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping

from murmur.procs import spawn_starter
from murmur.starter import wanted

SERVER_MODULE = "murmur.cli.warm_starter"
"""What the starter runs (``python -m``): the starter loop with ``mur``'s own ``main`` as
what every fork runs (the command line hands it down: :mod:`murmur.starter.child` never
imports the CLI)."""

TITLE_ROOM = 4096
"""Bytes of blank argument the starter is given, so a title set with ``setproctitle`` (where
``/proc`` areas cannot be pointed elsewhere) fits; a longer title is cut there."""

_KEPT_NAMES = ("LANG", "LANGUAGE")


def starter_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The starter's whole environment: ``PYTHON*`` (the import path, hash seed, warnings,
    I/O encoding), ``LANG``, ``LANGUAGE`` and ``LC_*`` from ``environ`` — what the
    interpreter reads as it starts, and what every formation member is given anyway (pure)."""
    return {
        k: v
        for k, v in environ.items()
        if k.startswith(("PYTHON", "LC_")) or k in _KEPT_NAMES
    }


class Spawned:
    """A starter process just started, and this side's socket to it (a plain class: this
    module is imported before ``attrs`` is)."""

    __slots__ = ("popen", "sock")

    def __init__(self, popen: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.popen = popen
        self.sock = sock


def spawn(environ: Mapping[str, str], wrap: Callable[[list[str], dict[str, str]], list[str]] | None = None,
          *, env: dict[str, str] | None = None) -> Spawned | None:
    """Start a starter process now (its own process group, cwd ``/``, stdio on
    ``/dev/null``, environment :func:`starter_env`; :func:`murmur.procs.spawn_starter`); None
    when it cannot be started.

    Args:
        environ (Mapping[str, str]): the environment it is drawn from (the launcher's).
        wrap: makes the command start inside a containment unit (``Unit.command``), or None.
        env (dict[str, str] | None): its whole environment instead of ``starter_env(environ)``.
    """
    env = starter_env(environ) if env is None else env
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        argv = [sys.executable, "-m", SERVER_MODULE,
                "--socket-fd", str(theirs.fileno()), "--parent", str(os.getpid()),
                "--title-room", " " * TITLE_ROOM]
        popen = spawn_starter(wrap(argv, env) if wrap is not None else argv, env, theirs.fileno())
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
    return Spawned(popen, ours)


_early: Spawned | None = None


def prestart(environ: Mapping[str, str]) -> None:
    """Start a launcher's starter at once, uncontained (its owner places it once the
    formation's units exist), so its imports overlap the launcher's; nothing when
    ``environ`` asks for the exec path (:func:`murmur.starter.wanted`)."""
    global _early
    if _early is None and wanted(environ):
        _early = spawn(environ)


def take() -> Spawned | None:
    """The starter :func:`prestart` started, handed to its owner (once)."""
    global _early
    got, _early = _early, None
    return got


def discard_unused() -> None:
    """Kill and reap a prestarted starter nobody took (a launch refused before it started)."""
    got = take()
    if got is not None:
        kill(got)


def kill(spawned: Spawned) -> None:
    """SIGKILL the starter's process group, reap it, close the socket (synchronous)."""
    kill_group(spawned.popen)
    spawned.sock.close()


def kill_group(popen: subprocess.Popen[bytes]) -> None:
    """SIGKILL a starter's process group (its pgid is its pid) and reap it (synchronous)."""
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except OSError:
        pass
    popen.wait()
