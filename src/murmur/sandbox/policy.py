"""The sandbox policy of one session: a value derived from its grants (spec/containment.md).

:class:`Policy` is what :func:`murmur.sandbox.compile` turns into kernel objects. It is built
from a manifest by :func:`from_manifest` (or directly, by the escape harness and tests) and
:func:`rules` derives the Landlock grants from it (pure apart from resolving binaries and
reading their ELF headers).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from murmur.manifest import Containment, Manifest
from murmur.sandbox import elf
from murmur.sandbox import landlock as ll
from murmur.sandbox.limits import Limits

__all__ = ["DEVICES", "ETC_GRANT", "RUNTIME_TREES", "Policy", "extension_libraries", "interpreter_trees", "rules",
           "venv_of"]

DEVICES = (("/dev/null", ll.READ_FILE | ll.WRITE_FILE | ll.TRUNCATE), ("/dev/zero", ll.READ_FILE),
           ("/dev/urandom", ll.READ_FILE))
"""The fixed device set of scoped (sealed builds a private /dev with these plus full, tty, random)."""

SEALED_DEVICES = ("null", "zero", "full", "tty", "random", "urandom")

RUNTIME_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Bound read-only into a sealed root."""

_BIN_DIRS = frozenset({"bin", "sbin", "local", "games"})

ETC_GRANT = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl",
    "/etc/pki", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/resolv.conf",
    "/etc/hosts", "/etc/nsswitch.conf", "/etc/localtime", "/etc/timezone", "/etc/terminfo",
    "/etc/passwd", "/etc/group",
)
"""The fixed sealed /etc grant (passwd and group are synthetic)."""


@attrs.frozen
class Policy:
    """What one session's commands may touch.

    Attributes:
        klass (Containment): the class to enforce (advisory compiles to no confinement).
        workdir (str): the session workdir, narrowed by ``filesystem.scope`` (absolute).
        rw (tuple[str, ...]): further writable roots (the command ``HOME`` and ``TMPDIR``).
        ro (tuple[str, ...]): further read-only roots (an interpreter's library tree).
        read_only (tuple[str, ...]): paths under ``workdir`` made read-only.
        allow (tuple[str, ...]): ``capabilities.shell.allow`` (bare names).
        search_path (str): the ``PATH`` the names resolve on.
        workdir_exec (bool): ``filesystem.workdir_exec``: the workdir keeps Execute.
        network_allow (tuple[str, ...]): ``network.allow`` entries (the egress proxy's rules).
        loopback_ports (tuple[int, ...]): host loopback ports relayed into the namespace.
        unix_sockets (bool): ``socket(AF_UNIX)`` is allowed (``network.unix_sockets`` or links).
        limits (Limits): per-command ceilings.
        binds (tuple[str, ...]): sealed: further host paths bound read-only into the root, with
            no Landlock grant of their own (an agent CLI's install tree and interpreter, which
            its own ruleset grants: :meth:`murmur.sandbox.Sandbox.harness_confinement`).
        binds_rw (tuple[str, ...]): sealed: further host directories bound writable (an agent
            CLI's ``HOME`` directories), likewise.
        etc_dir (str | None): sealed: where the synthetic ``/etc/passwd`` and ``/etc/group``
            are written on the host (``<records>/sandbox``), so that they are readable inside;
            None: they are unreadable there.
    """

    klass: Containment
    workdir: str
    allow: tuple[str, ...] = ()
    search_path: str = "/usr/local/bin:/usr/bin:/bin"
    rw: tuple[str, ...] = ()
    ro: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    workdir_exec: bool = False
    network_allow: tuple[str, ...] = ()
    loopback_ports: tuple[int, ...] = ()
    unix_sockets: bool = False
    limits: Limits = attrs.field(factory=Limits)
    binds: tuple[str, ...] = ()
    binds_rw: tuple[str, ...] = ()
    etc_dir: str | None = None

    @property
    def sealed(self) -> bool:
        """Whether the class is sealed."""
        return self.klass is Containment.SEALED

    def binaries(self) -> dict[str, str]:
        """Each allowed name that resolves on :attr:`search_path` -> its path (unresolved names left out)."""
        out: dict[str, str] = {}
        for name in self.allow:
            found = shutil.which(name, path=self.search_path)
            if found:
                out[name] = os.path.abspath(found)
        return out


def from_manifest(manifest: Manifest, klass: Containment, *, workdir: Path, env: Mapping[str, str],
                  loopback_ports: Sequence[int] = (), links: bool = False,
                  records: Path | None = None) -> Policy:
    """A session's policy from its manifest, class and command environment.

    Args:
        manifest (murmur.manifest.Manifest): the running capsule's manifest.
        klass (Containment): the class this session enforces.
        workdir (Path): the session workdir.
        env (Mapping[str, str]): the command environment (``PATH``, ``HOME``, ``TMPDIR``).
        loopback_ports (Sequence[int]): host loopback ports the capsule is granted.
        links (bool): the session serves a capability socket (``AF_UNIX`` stays allowed).
        records (Path | None): the records directory; with an agent CLI (``transport:
            process``) under sealed, its ``harness`` directory (the CLIs' ``HOME``s) is bound
            writable and the CLI's install tree and murmur's interpreter read-only
            (:func:`cli_binds`).
    """
    from murmur.sandbox.limits import from_manifest as limits_of

    caps = manifest.capabilities
    fs = caps.filesystem
    scope = fs.scope if fs is not None else "."
    base = (workdir / scope).resolve() if scope not in ("", ".") else workdir.resolve()
    read_only = tuple(str((base / p).resolve()) for p in getattr(fs, "read_only", ()) or ())
    rw = tuple(env[k] for k in ("HOME", "TMPDIR") if env.get(k))
    net = caps.network
    return Policy(
        klass=klass,
        workdir=str(base),
        allow=tuple(manifest.shell_allow),
        search_path=env.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        rw=rw,
        read_only=read_only,
        workdir_exec=bool(fs.workdir_exec) if fs is not None else False,
        network_allow=tuple(net.allow) if net is not None else (),
        loopback_ports=tuple(loopback_ports),
        unix_sockets=bool(net is not None and net.unix_sockets) or links,
        limits=limits_of(manifest),
        **(cli_binds(manifest, env, records) if klass is Containment.SEALED else {}),
        etc_dir=str(records / "sandbox") if records is not None and klass is Containment.SEALED else None,
    )


def cli_binds(manifest: Manifest, env: Mapping[str, str], records: Path | None) -> dict[str, tuple[str, ...]]:
    """Sealed: what an agent CLI (``transport: process``) needs present in the composed root
    (``{"binds": …, "binds_rw": …}``; empty for any other workload). Bound generously — the
    CLI's ``node_modules`` (or directory), murmur's interpreter prefixes and ``sys.path``
    directory — since presence is not access: the CLI's own ruleset still decides what it may
    read, write and execute."""
    import sys

    inference = manifest.inference
    if inference is None or getattr(inference.transport, "value", inference.transport) != "process":
        return {}
    command = (inference.command or "").split()[:1]
    found = shutil.which(command[0], path=env.get("PATH", "")) if command else None
    if not found:
        return {}
    real = os.path.realpath(found)
    top = real
    while top not in ("/", "") and os.path.basename(top) != "node_modules":
        top = os.path.dirname(top)
    binds = [top if top not in ("/", "") else os.path.dirname(real), os.path.dirname(os.path.abspath(found))]
    import murmur

    binds += [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.abspath(murmur.__file__)))]
    rw = [str(records / "harness")] if records is not None else []
    for d in rw:
        os.makedirs(d, mode=0o700, exist_ok=True)
    return {"binds": tuple(dict.fromkeys(binds)), "binds_rw": tuple(rw)}


def _rw_rights(exec_ok: bool) -> int:
    return ll.RW | (ll.EXECUTE if exec_ok else 0)


def _workdir_rules(policy: Policy) -> list[ll.Rule]:
    """The workdir grant, with :attr:`Policy.read_only` carved out by granting around it."""
    rights = _rw_rights(policy.workdir_exec)
    if not policy.read_only:
        return [ll.Rule(policy.workdir, rights)]
    out: list[ll.Rule] = []
    protected = [os.path.normpath(p) for p in policy.read_only]

    def walk(directory: str) -> None:
        out.append(ll.Rule(directory, ll.READ))
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            path = os.path.join(directory, name)
            if any(path == p for p in protected):
                out.append(ll.Rule(path, ll.READ | (ll.EXECUTE if policy.workdir_exec else 0)))
            elif any(p.startswith(path + os.sep) for p in protected) and os.path.isdir(path):
                walk(path)
            else:
                out.append(ll.Rule(path, rights))

    walk(policy.workdir)
    return out


def rules(policy: Policy) -> list[ll.Rule]:
    """The Landlock grants of ``policy`` (see spec/containment.md, "What each class grants")."""
    out = _workdir_rules(policy)
    out += [ll.Rule(p, _rw_rights(False)) for p in policy.rw]
    out += [ll.Rule(p, ll.READ) for p in policy.ro]
    for root in policy.ro:
        out += [ll.Rule(p, ll.READ_FILE) for p in extension_libraries(root)]
    for path in policy.binaries().values():
        closure = elf.start_closure(path, policy.search_path)
        out += [ll.Rule(p, ll.EXECUTE | ll.READ_FILE) for p in closure.executables]
        out += [ll.Rule(p, ll.READ_FILE) for p in closure.libraries]
        for tree in interpreter_trees(closure.executables):
            out.append(ll.Rule(tree, ll.READ))
            out += [ll.Rule(p, ll.READ_FILE) for p in extension_libraries(tree)]
        venv = venv_of(path)
        if venv is not None:
            cfg, libs = venv
            out.append(ll.Rule(cfg, ll.READ_FILE))
            out += [ll.Rule(d, ll.READ) for d in libs]
    out.append(ll.Rule("/etc/ld.so.cache", ll.READ_FILE))
    if policy.sealed:
        out += [ll.Rule(f"/dev/{d}", ll.READ_FILE | (0 if d in ("random", "urandom") else
                                                   ll.WRITE_FILE | ll.TRUNCATE))
                for d in SEALED_DEVICES]
        out += [ll.Rule(p, ll.READ) for p in runtime_read_dirs()]
        out += [ll.Rule(p, ll.READ if os.path.isdir(p) else ll.READ_FILE) for p in ETC_GRANT if p != "/etc/passwd"
                and p != "/etc/group"]
        if policy.etc_dir:  # the synthetic accounts files, written by compile, bound at /etc
            out += [ll.Rule(os.path.join(policy.etc_dir, n), ll.READ_FILE) for n in ("passwd", "group")]
    else:
        out += [ll.Rule(p, r) for p, r in DEVICES]
    return out


def runtime_read_dirs() -> list[str]:
    """Sealed: the runtime trees' library directories, read-only (their ``bin`` dirs are not
    readable, so a loader cannot map a binary ``shell.allow`` does not name)."""
    out: list[str] = []
    for top in RUNTIME_TREES:
        real = os.path.realpath(top)
        if not os.path.isdir(real):
            continue
        if os.path.basename(real) in _BIN_DIRS:
            continue
        if real == "/usr":
            try:
                names = os.listdir(real)
            except OSError:
                continue
            out += [os.path.join(real, n) for n in sorted(names) if n not in _BIN_DIRS]
            local = os.path.join(real, "local")
            out += [os.path.join(local, n) for n in ("lib", "share") if os.path.isdir(os.path.join(local, n))]
        else:
            out.append(real)
    return list(dict.fromkeys(out))


def extension_libraries(root: str) -> list[str]:
    """Libraries the extension modules of an interpreter tree need (``lib-dynload/*.so``'s
    closures): a granted read-only interpreter tree can then import them (``ctypes`` needs
    ``libffi``)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath.count(os.sep) - root.count(os.sep) >= 2:
            dirnames[:] = []
        if os.path.basename(dirpath) != "lib-dynload":
            continue
        for name in filenames:
            if name.endswith(".so"):
                out += elf.start_closure(os.path.join(dirpath, name)).libraries
    return list(dict.fromkeys(out))


def venv_of(binary: str) -> tuple[str, tuple[str, ...]] | None:
    """A granted binary that is a virtual environment's interpreter: ``(its pyvenv.cfg, its
    library directories)``, or None (pure apart from looking at the files).

    ``binary`` is the path as found on ``PATH``, before symlinks are resolved: a venv's
    ``bin/python3`` is a symlink into a base interpreter elsewhere (whose tree
    :func:`interpreter_trees` grants), and CPython finds the venv by reading ``pyvenv.cfg``
    beside or above the path it was started as. The library directories (``lib``, ``lib64``
    where it is a directory of its own) hold the venv's ``site-packages``; both are read-only.
    """
    if not os.path.basename(binary).startswith("python"):
        return None
    here = os.path.dirname(os.path.abspath(binary))
    for root in (here, os.path.dirname(here)):
        cfg = os.path.join(root, "pyvenv.cfg")
        if os.path.isfile(cfg):
            libs = [os.path.join(root, n) for n in ("lib", "lib64")]
            return cfg, tuple(d for d in libs if os.path.isdir(d) and not os.path.islink(d))
    return None


def interpreter_trees(executables: Sequence[str]) -> list[str]:
    """The library tree a granted interpreter cannot start without: a CPython's standard
    library (``<prefix>/lib/pythonX.Y``), read-only. Other binaries need none."""
    out: list[str] = []
    for exe in executables:
        name = os.path.basename(exe)
        if not name.startswith("python3."):
            continue
        version = name[len("python"):]
        if not version.replace(".", "").isdigit():
            continue
        tree = os.path.join(os.path.dirname(os.path.dirname(exe)), "lib", f"python{version}")
        if os.path.isdir(tree):
            out.append(tree)
    return out
