"""The namespaces a session's commands join: made once, held by the session (spec/containment.md).

:func:`build` forks one single-threaded helper that unshares a user + network namespace (and,
for sealed, a mount namespace onto a composed root), brings ``lo`` up, opens the listening
sockets inside the namespace (the egress proxy's port, and one per granted host loopback port),
sends their fds and its namespace fds back over a unix socket pair (``SCM_RIGHTS``) and exits.

What keeps the namespaces alive is the fds :class:`Namespaces` holds: a namespace lives while
a process is in it or an fd names it. Nothing is left behind when the session process ends,
however it ends: its fds close with it, the namespaces and their listeners are gone.

Each command joins with ``setns`` in its child (:mod:`murmur.sandbox.confine`).
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import socket
import struct
from collections.abc import Sequence

import attrs

from murmur.sandbox import kernel
from murmur.sandbox.policy import ETC_GRANT, RUNTIME_TREES, SEALED_DEVICES

__all__ = ["Namespaces", "RootPlan", "build"]

_SIOCSIFFLAGS = 0x8914
_IFF_UP_RUNNING = 0x1 | 0x40 | 0x8  # IFF_UP | IFF_RUNNING | IFF_LOOPBACK


@attrs.frozen
class RootPlan:
    """The sealed root: what is bound where (host paths; each appears at its own path).

    Attributes:
        rw (tuple[str, ...]): writable directories (workdir, HOME, TMPDIR).
        files (tuple[str, ...]): granted binaries and libraries outside the runtime trees.
        ro_dirs (tuple[str, ...]): further read-only directories.
        links (tuple[tuple[str, str], ...]): symlinks recreated inside (a granted name on
            ``PATH`` that links to its binary), as (path, link text).
        workdir_exec (bool): the workdir may hold executables (else it is mounted ``noexec``).
        uid (int): the uid commands run as (for the synthetic ``/etc/passwd``).
        home (str): the ``HOME`` the synthetic passwd names.
        etc_dir (str | None): a host directory holding the synthetic ``passwd`` and ``group``
            (:func:`accounts`), bound at ``/etc/passwd`` and ``/etc/group`` so that a Landlock
            rule on them holds inside; None: they are written into the root (unreadable there).
    """

    rw: tuple[str, ...]
    files: tuple[str, ...] = ()
    ro_dirs: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    workdir_exec: bool = False
    uid: int = 0
    home: str = "/"
    etc_dir: str | None = None


def accounts(uid: int, home: str) -> dict[str, str]:
    """The synthetic ``passwd`` and ``group`` of a sealed root: ``root``, and ``capsule`` for a
    non-root uid; no host account name appears (pure)."""
    if uid:
        return {"passwd": f"root:x:0:0:root:/root:/bin/sh\ncapsule:x:{uid}:{uid}:capsule:{home}:/bin/sh\n",
                "group": f"root:x:0:\ncapsule:x:{uid}:\n"}
    return {"passwd": f"root:x:0:0:root:{home}:/bin/sh\n", "group": "root:x:0:\n"}


@attrs.define
class Namespaces:
    """The fds one session holds (close with :meth:`close`).

    Attributes:
        user (int): the user namespace.
        net (int): the network namespace.
        mnt (int | None): the sealed mount namespace.
        proxy (socket.socket): the egress proxy's listener inside the namespace.
        proxy_port (int): its port on the namespace's 127.0.0.1.
        relays (dict[int, socket.socket]): granted loopback port -> its listener inside.
    """

    user: int
    net: int
    mnt: int | None
    proxy: socket.socket
    proxy_port: int
    relays: dict[int, socket.socket]

    def fds(self) -> tuple[int, ...]:
        """The namespace fds (for the warm starter's fd passing)."""
        return tuple(fd for fd in (self.user, self.net, self.mnt) if fd is not None)

    def close(self) -> None:
        """Close every fd: the namespaces end once no command is left in them."""
        for fd in self.fds():
            try:
                os.close(fd)
            except OSError:
                pass
        self.proxy.close()
        for s in self.relays.values():
            s.close()


def _lo_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", _IFF_UP_RUNNING))


def _listen(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    return s


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _bind(fd_path: str, target: str, *, ro: bool, noexec: bool = False) -> None:
    kernel.mount(fd_path, target, None, kernel.MS_BIND | kernel.MS_REC)
    st = os.statvfs(target)
    flags = kernel.MS_REMOUNT | kernel.MS_BIND
    flags |= kernel.MS_NOSUID if st.f_flag & os.ST_NOSUID else 0
    flags |= kernel.MS_NODEV if st.f_flag & os.ST_NODEV else 0
    flags |= kernel.MS_NOEXEC if (noexec or st.f_flag & os.ST_NOEXEC) else 0
    flags |= kernel.MS_RDONLY if (ro or st.f_flag & os.ST_RDONLY) else 0
    kernel.mount(None, target, None, flags)


def _placeholder(root: str, path: str, is_dir: bool) -> str:
    target = root + path
    if is_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            open(target, "w").close()
    return target


def _compose(plan: RootPlan) -> None:
    """In the helper (new user + mount namespace): build the root and pivot into it."""
    sources: list[tuple[str, int, bool]] = []  # (path, O_PATH fd, is_dir)
    links: list[tuple[str, str]] = []
    wanted = [*RUNTIME_TREES, *plan.ro_dirs, *plan.rw, *plan.files,
              *[e for e in ETC_GRANT if e not in ("/etc/passwd", "/etc/group")],
              *[f"/dev/{d}" for d in SEALED_DEVICES]]
    etc: list[tuple[str, int]] = []  # (name, O_PATH fd) of the synthetic accounts files
    for name in (("passwd", "group") if plan.etc_dir else ()):
        try:
            etc.append((name, os.open(os.path.join(plan.etc_dir or "", name), os.O_PATH | os.O_CLOEXEC)))
        except OSError:
            pass
    for path in dict.fromkeys(wanted):
        if os.path.islink(path) and path in RUNTIME_TREES:
            links.append((path, os.readlink(path)))
            continue
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        sources.append((path, fd, os.path.isdir(path)))
    kernel.mount(None, "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
    root = "/tmp"
    kernel.mount("tmpfs", root, "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV, "mode=0755,size=4m")
    os.makedirs(root + "/dev", exist_ok=True)
    kernel.mount("tmpfs", root + "/dev", "tmpfs", kernel.MS_NOSUID | kernel.MS_NOEXEC, "mode=0755,size=64k")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    rw = set(plan.rw)
    for path, fd, is_dir in sources:
        target = _placeholder(root, path, is_dir)
        is_workdir = path in rw
        _bind(f"/proc/self/fd/{fd}", target, ro=not is_workdir,
              noexec=is_workdir and not plan.workdir_exec)
        os.close(fd)
    for path, dest in [*links, *plan.links]:
        os.makedirs(os.path.dirname(root + path), exist_ok=True)
        if not os.path.lexists(root + path):
            os.symlink(dest, root + path)
    os.makedirs(root + "/etc", exist_ok=True)
    for name, text in accounts(plan.uid, plan.home).items():
        if not any(n == name for n, _fd in etc):
            _write(f"{root}/etc/{name}", text)
    for name, fd in etc:
        _bind(f"/proc/self/fd/{fd}", _placeholder(root, f"/etc/{name}", False), ro=True)
        os.close(fd)
    os.makedirs(root + "/proc", exist_ok=True)
    kernel.mount("/proc", root + "/proc", None, kernel.MS_BIND | kernel.MS_REC)
    os.makedirs(root + "/tmp", exist_ok=True)
    os.makedirs(root + "/.old", exist_ok=True)
    os.chdir(root)
    kernel.pivot_root(".", ".old")
    os.chdir("/")
    kernel.umount("/.old")
    os.rmdir("/.old")
    kernel.mount(None, "/", None, kernel.MS_REMOUNT | kernel.MS_BIND | kernel.MS_RDONLY | kernel.MS_NOSUID
                 | kernel.MS_NODEV)


def _helper(chan: socket.socket, ports: Sequence[int], plan: RootPlan | None, uid: int, gid: int) -> None:
    flags = kernel.CLONE_NEWUSER | kernel.CLONE_NEWNET | (kernel.CLONE_NEWNS if plan else 0)
    kernel.unshare(flags)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    _lo_up()
    relays = [_listen(p) for p in ports]
    proxy = _listen(0)
    if plan is not None:
        _compose(plan)
    fds = [os.open(f"/proc/self/ns/{n}", os.O_RDONLY | os.O_CLOEXEC)
           for n in ("user", "net", *(("mnt",) if plan else ()))]
    fds += [s.fileno() for s in (proxy, *relays)]
    meta = json.dumps({"proxy_port": proxy.getsockname()[1], "ports": list(ports),
                       "mnt": plan is not None}).encode()
    chan.sendmsg([meta], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def build(ports: Sequence[int] = (), plan: RootPlan | None = None) -> Namespaces:
    """Make the namespaces (see the module docstring).

    Args:
        ports (Sequence[int]): host loopback ports to listen on inside (relayed out by the proxy).
        plan (RootPlan | None): the sealed root; None for scoped (no mount namespace).

    Raises:
        OSError: the helper could not make them (its error text is kept).
    """
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    uid, gid = os.getuid(), os.getgid()

    def helper() -> None:
        parent.close()
        try:
            _helper(child, ports, plan, uid, gid)
        except BaseException as exc:
            try:
                child.sendmsg([json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()])
            except OSError:
                pass
            raise

    from murmur import procs

    try:
        pid = procs.fork_helper(helper)  # single-threaded child: unshare(CLONE_NEWUSER) needs it
    except OSError:
        parent.close()
        child.close()
        raise
    child.close()
    try:
        msg, anc, _flags, _addr = parent.recvmsg(4096, socket.CMSG_SPACE(64 * 4))
    finally:
        parent.close()
        os.waitpid(pid, 0)
    fds: list[int] = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(data[: len(data) - (len(data) % got.itemsize)])
            fds += list(got)
    meta = json.loads(msg.decode() or "{}")
    if "error" in meta or not fds:
        for fd in fds:
            os.close(fd)
        raise OSError(1, meta.get("error", "the namespace helper sent nothing"))
    for fd in fds:
        os.set_inheritable(fd, False)
    n_ns = 3 if meta["mnt"] else 2
    ns, socks = fds[:n_ns], fds[n_ns:]
    proxy = socket.socket(fileno=socks[0])
    relays = {p: socket.socket(fileno=fd) for p, fd in zip(meta["ports"], socks[1:], strict=True)}
    return Namespaces(ns[0], ns[1], ns[2] if meta["mnt"] else None, proxy, int(meta["proxy_port"]), relays)
