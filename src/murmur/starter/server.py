"""The warm starter process: imports done, no Trio loop, no thread; forks on request.

Specification: ``spec/formation.md`` "The warm start path". Run by a launcher as::

    python -m murmur.cli.warm_starter --socket-fd N --parent PID --title-room BLANKS

(the command line's module hands :func:`main` ``mur``'s own ``main`` as what every fork runs,
and the list of modules to import). It imports them, warms what a child would build itself, then answers
``{"ready": pid}`` on its socket and serves requests (:mod:`murmur.starter.protocol`): each
``start`` forks one child (:func:`murmur.starter.child.run`), each ``exec`` clones a command
straight into its unit and execs it (:mod:`murmur.procs.cloned`); it answers the pid, and closes the
starter's copies of the child's descriptors at once (so EOF on a member's pipes means what it
means on the exec path). The starter is every child's parent: it reaps each one (a ``pidfd``
per child, polled beside the socket) and reports ``{"exited": pid, "status": s}``.

It dies with its owner: ``PR_SET_PDEATHSIG`` (SIGKILL) when the launcher dies, and it exits
when its socket reaches EOF (the launcher closed it, or died). It ignores SIGINT, SIGTERM and
SIGHUP (a terminal's Ctrl-C must not take the exit statuses of running members with it); its
children get the ordinary dispositions back. It never forks while another thread runs (it
answers ``errno`` EAGAIN instead, and the launcher execs that member).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import gc
import importlib
import os
import select
import signal
import socket
import threading
from collections.abc import Callable, Sequence

from murmur.procs import fork_child
from murmur.procs.cloned import ExecFailed, clone_exec
from murmur.starter import child, procarea, protocol
from murmur.starter.child import Entry

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies; exit now if it already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def preload(names: Sequence[str]) -> None:
    """Import each of ``names``; a name that is missing is skipped."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def title(parent: int) -> None:
    """Name this process ``mur starter (launcher <pid>)`` (one argument, so ``/proc/<pid>/cmdline``
    starts with those bytes), its environment area left as it is.

    Where the kernel does not let it point its argument area elsewhere
    (:func:`murmur.starter.procarea.point_areas`), ``setproctitle`` sets the title, and is set
    up here while the environment is still in place so a forked child can set its own.
    ``SPT_NOENV``: titles then use only the argument area (the launcher passes
    ``--title-room``, blank, to make it large enough), so ``/proc/<pid>/environ`` keeps the
    environment the starter started with instead of being overwritten by the title.
    """
    text = f"mur starter (launcher {parent})"
    if procarea.point_areas([text], None):
        return
    os.environ["SPT_NOENV"] = "1"
    try:
        import setproctitle

        setproctitle.setproctitle(text)
    except ImportError:
        pass


class Server:
    """The request loop (one per starter process)."""

    def __init__(self, sock: socket.socket, entry: Entry, later: Sequence[str] = ()) -> None:
        self.sock = sock
        self.entry = entry
        self.later = list(later)
        self.poll = select.poll()
        self.poll.register(sock.fileno(), select.POLLIN)
        self.children: dict[int, int] = {}  # pidfd -> pid

    def send(self, msg: dict[str, object]) -> None:
        try:
            self.sock.send(protocol.encode(msg))
        except OSError:
            pass

    def serve(self) -> None:
        """Serve until the socket reaches EOF."""
        while True:
            try:
                events = self.poll.poll(0 if self.later else None)
            except InterruptedError:
                continue
            if not events and self.later:  # idle: one more module every later child shares
                preload([self.later.pop(0)])
                gc.freeze()
                continue
            for fd, _ev in events:
                if fd == self.sock.fileno():
                    if not self.request():
                        return
                else:
                    self.reap(fd)

    def request(self) -> bool:
        try:
            raw, fds, _flags, _addr = socket.recv_fds(self.sock, protocol.MAX_MESSAGE, protocol.MAX_FDS)
        except InterruptedError:
            return True
        except OSError:
            return False
        if not raw:
            for fd in fds:
                os.close(fd)
            return False
        try:
            req = protocol.decode_request(raw)
        except ValueError:
            for fd in fds:
                os.close(fd)
            return True
        if isinstance(req, protocol.ExecRequest):
            self.exec(req, fds)
            return True
        try:
            pid = self.fork(req, fds)
        except OSError as exc:
            self.send({"started": req.id, "errno": exc.errno or errno.EIO, "error": exc.strerror or str(exc)})
        else:
            self.send({"started": req.id, "pid": pid})
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def exec(self, req: protocol.ExecRequest, fds: list[int]) -> None:
        """Clone ``req``'s command into its unit and exec it (:mod:`murmur.procs.cloned`);
        answer its pid, or the refusal with its ``stage``; close the descriptors either way."""
        try:
            if threading.active_count() != 1:
                raise ExecFailed(errno.EAGAIN, "clone")
            pid, pidfd = clone_exec(req, fds)
        except ExecFailed as exc:
            self.send({"started": req.id, "errno": exc.errno, "error": exc.strerror or "", "stage": exc.stage,
                       "filename": exc.filename})
        else:
            self.children[pidfd] = pid
            self.poll.register(pidfd, select.POLLIN)
            self.send({"started": req.id, "pid": pid})
        finally:
            for fd in fds:
                os.close(fd)

    def fork(self, req: protocol.StartRequest, fds: list[int]) -> int:
        if len(fds) != len(req.fds):
            raise OSError(errno.EINVAL, "descriptor count does not match the request")
        if threading.active_count() != 1:
            raise OSError(errno.EAGAIN, "the starter runs a thread: it does not fork")
        if not os.path.isdir(req.cwd):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), req.cwd)
        pid = fork_child(lambda: child.run(req, fds, self.entry))
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = -1
        if pidfd >= 0:
            self.children[pidfd] = pid
            self.poll.register(pidfd, select.POLLIN)
        return pid

    def reap(self, pidfd: int) -> None:
        pid = self.children.pop(pidfd, None)
        self.poll.unregister(pidfd)
        os.close(pidfd)
        if pid is None:
            return
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return
        self.send({"exited": pid, "status": os.waitstatus_to_exitcode(status)})


def main(argv: list[str] | None, *, entry: Entry, imports: Sequence[str] = (),
         later: Sequence[str] = (), warm: Callable[[], object] | None = None) -> int:
    """The starter process's whole life (its command line: ``--socket-fd N --parent PID
    [--title-room BLANKS]``); 0 once its socket reached EOF.

    Args:
        argv: its arguments (default ``sys.argv[1:]``).
        entry: what every forked child runs (``mur``'s ``main``: arguments → exit status).
        imports: modules imported before ``ready`` (what a child imports before it is ready).
        later: modules imported after ``ready``, one at a time while no request waits (what a
            child imports only once it works).
        warm: called once after ``imports``, before ``ready`` (fills caches every child would
            fill itself); an exception in it is ignored.
    """
    ap = argparse.ArgumentParser(prog="murmur.starter")
    ap.add_argument("--socket-fd", type=int, required=True)
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--title-room", default="", help="blank room for the members' titles")
    a = ap.parse_args(argv)
    title(a.parent)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    die_with_parent(a.parent)
    sock = socket.socket(fileno=a.socket_fd)
    sock.set_inheritable(False)
    gc.disable()  # imports allocate much and free almost nothing (as mur run's own start-up)
    preload(imports)
    if warm is not None:
        try:
            warm()
        except Exception:
            pass
    gc.freeze()  # what is imported now is never scanned again: children share those pages untouched
    gc.enable()
    server = Server(sock, entry, later)
    server.send({"ready": os.getpid()})
    server.serve()
    return 0

