"""The starts that no Trio task can own: named, documented, and here with the primitive.

Specification: ``spec/architecture.md`` "Where a process starts". Four processes are not a
Trio task's child, each for a reason:

* :func:`start_janitor` — the containment janitor (:mod:`murmur.containment.janitor`) must
  outlive a SIGKILLed owner, so it is started synchronously, in a session of its own, outside
  every unit, and kept as a ``subprocess.Popen`` its :class:`~murmur.containment.Containment`
  talks to;
* :func:`spawn_starter` — the warm starter (:mod:`murmur.starter.server`) is started before
  Trio is imported (``mur run --roster`` starts it first thing, :mod:`murmur.starter.early`);
* :func:`fork_child` — the warm starter's own fork of a member or child: it runs no Trio loop
  and forks a pre-imported interpreter; the child applies its placement itself
  (:mod:`murmur.starter.child`: the unit join, then the confinement);
* :func:`fork_helper` — the sandbox's namespace helper (:mod:`murmur.sandbox.ns`, and the
  host probe): ``unshare(CLONE_NEWUSER)`` needs a single-threaded process, so a session forks
  one that makes the namespaces, hands their descriptors back and exits; it runs no ``exec``,
  lives for milliseconds and is reaped by its caller at once.

Nothing here imports Trio or ``attrs``: :mod:`murmur.starter.early` imports this before
anything else is loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

__all__ = ["fork_child", "fork_helper", "spawn_starter", "start_janitor"]


def start_janitor(script: str) -> subprocess.Popen[bytes] | None:
    """Start the janitor ``python -I -S <script>``: stdin a pipe (its owner's lines), stdout and
    stderr on ``/dev/null``, cwd ``/``, an empty environment (it needs nothing of the runtime's
    and must hold none of it), a session of its own; None when it cannot be started."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return None


def spawn_starter(argv: Sequence[str], env: dict[str, str], pass_fd: int, *,
                  preexec: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
    """Start a warm starter process: stdio on ``/dev/null``, ``pass_fd`` inherited (its socket),
    a process group of its own, cwd ``/``, exactly ``env``.

    Args:
        argv: its command line.
        env: its whole environment.
        pass_fd: its end of the socket pair.
        preexec: what joins its containment unit (:func:`murmur.procs.childside.preexec`), or
            None (a prestarted starter is placed later, by its owner).

    Raises:
        OSError: it could not be started.
    """
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(pass_fd,),
        process_group=0,
        env=env,
        cwd="/",
        preexec_fn=preexec,
    )


def fork_child(run: Callable[[], NoReturn]) -> int:
    """Fork this (single-threaded, Trio-less) warm starter; the child runs ``run`` and never
    returns (``os._exit(127)`` should ``run`` ever return). The parent gets the child's pid.

    Raises:
        OSError: the fork failed.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            run()
        finally:
            os._exit(127)
    return pid


def fork_helper(run: Callable[[], None]) -> int:
    """Fork a single-threaded helper that runs ``run`` and exits (0, or 1 when ``run`` raised);
    no ``exec``. The parent gets its pid and must reap it (``os.waitpid``).

    Raises:
        OSError: the fork failed.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            run()
            code = 0
        finally:
            os._exit(code)
    return pid
