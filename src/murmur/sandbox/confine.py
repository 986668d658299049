"""What one start gets from a compiled sandbox: a :class:`Confined` (the Confinement interface).

Specification: spec/containment.md, "How a command is confined". Everything expensive was done
by :func:`murmur.sandbox.compile` in the parent; :meth:`Confined.child_setup` returns a function
that runs in the child after ``fork`` (after the containment-unit join, before ``exec``) and
makes a fixed short list of calls:

0. join the session's ``pids`` group, when it has one (:class:`~murmur.sandbox.limits.PidsGroup`),
   and write ``memory.max``/``pids.max`` into the command's own cgroup v2 unit where it has
   those controllers;
1. ``setns`` into the session's user and network namespaces (and, sealed, its mount namespace,
   then ``chdir`` back to the working directory, which is bound at the same path);
2. the command rlimits (:class:`murmur.sandbox.limits.Limits`);
3. drop the capability bounding set; ``PR_SET_NO_NEW_PRIVS``;
4. ``landlock_restrict_self`` with the session's ruleset fd;
5. clear the capability sets; load the seccomp program (last: it refuses ``setns``).

:meth:`Confined.to_wire` is the same thing as JSON for the warm starter, which rebuilds it in
its forked child with :func:`from_wire` (namespaces reopened through ``/proc/<pid>/fd``, the
ruleset rebuilt from its rules).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from murmur.manifest import Containment
from murmur.procs import Confinement
from murmur.sandbox import kernel, landlock, seccomp
from murmur.sandbox.limits import Limits

__all__ = ["WIRE_KIND", "Confined", "Confinement", "Rebuilt", "from_wire"]


@attrs.frozen
class Confined:
    """One session's confinement (shared by all its starts; holds fds the session owns).

    Attributes:
        klass (Containment): scoped or sealed.
        ruleset (int): the Landlock ruleset fd.
        bpf (bytes): the seccomp program.
        userns (int | None), netns (int | None), mntns (int | None): namespace fds.
        env (tuple[tuple[str, str], ...]): variables added (the proxy).
        limits (Limits): per-command ceilings.
        rules (tuple[landlock.Rule, ...]), abi (int): what the ruleset holds (for the wire).
        pids (str | None): the session's ``pids`` group ``cgroup.procs`` each command joins.
    """

    klass: Containment
    ruleset: int
    bpf: bytes
    userns: int | None
    netns: int | None
    mntns: int | None
    env: tuple[tuple[str, str], ...] = ()
    limits: Limits = attrs.field(factory=Limits)
    rules: tuple[landlock.Rule, ...] = ()
    abi: int = 0
    pids: str | None = None

    def argv(self, argv: Sequence[str]) -> list[str]:
        """Unchanged: the sandbox is applied in the child, not by a wrapper."""
        return list(argv)

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with the proxy variables (``HTTP_PROXY``, ``HTTPS_PROXY``, lower-case too)."""
        out = dict(env)
        out.update(self.env)
        return out

    def pass_fds(self) -> tuple[int, ...]:
        """None: the child uses the fds before ``exec``, and none of them survive it."""
        return ()

    def child_setup(self) -> Callable[[], None]:
        """The function the child runs before ``exec`` (see the module docstring)."""
        return _setup(self.ruleset, self.bpf, self.userns, self.netns, self.mntns, self.limits, self.pids)

    def to_wire(self) -> dict[str, Any]:
        """JSON for the warm starter (fds named by this process's ``/proc/<pid>/fd``)."""
        pid = os.getpid()

        def fd_path(fd: int | None) -> str | None:
            return None if fd is None else f"/proc/{pid}/fd/{fd}"

        return {
            "kind": WIRE_KIND,
            "module": __name__,
            "class": self.klass.value,
            "abi": self.abi,
            "rules": [[r.path, r.rights] for r in self.rules],
            "bpf": base64.b64encode(self.bpf).decode(),
            "userns": fd_path(self.userns),
            "netns": fd_path(self.netns),
            "mntns": fd_path(self.mntns),
            "env": [list(kv) for kv in self.env],
            "limits": self.limits.to_wire(),
            "pids": self.pids,
        }


def _setup(ruleset: int, bpf: bytes, userns: int | None, netns: int | None, mntns: int | None,
           limits: Limits, pids: str | None = None) -> Callable[[], None]:
    def child_setup() -> None:
        if pids is not None:
            with open(pids, "w") as f:
                f.write(str(os.getpid()))
        limits.write_own_unit()
        if userns is not None:
            cwd = os.getcwd() if mntns is not None else None
            kernel.setns(userns, kernel.CLONE_NEWUSER)
            if netns is not None:
                kernel.setns(netns, kernel.CLONE_NEWNET)
            if mntns is not None:
                kernel.setns(mntns, kernel.CLONE_NEWNS)
                os.chdir(cwd or "/")
        limits.apply()
        kernel.drop_bounding_set()
        kernel.no_new_privs()
        landlock.restrict(ruleset)
        kernel.capset_zero()
        seccomp.install(bpf)

    return child_setup


WIRE_KIND = "murmur.sandbox"
"""The ``kind`` of this confinement's wire object (:func:`murmur.procs.from_wire`)."""


@attrs.frozen
class Rebuilt:
    """A confinement rebuilt from its wire object, in the warm starter (see :func:`from_wire`)."""

    setup: Callable[[], None]
    env: tuple[tuple[str, str], ...] = ()

    def argv(self, argv: Sequence[str]) -> list[str]:
        """Unchanged."""
        return list(argv)

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with the proxy variables."""
        return {**env, **dict(self.env)}

    def pass_fds(self) -> tuple[int, ...]:
        """None."""
        return ()

    def child_setup(self) -> Callable[[], None]:
        """The rebuilt pre-exec function."""
        return self.setup

    def to_wire(self) -> dict[str, Any]:
        """A rebuilt confinement is not sent on (the starter is its last hop)."""
        raise ValueError("a rebuilt confinement has no wire form")


def from_wire(data: Mapping[str, Any]) -> Rebuilt:
    """Rebuild a :class:`Confined` from :meth:`Confined.to_wire` (in a starter's child).

    Namespaces are reopened through ``/proc/<pid>/fd`` of the session that sent it (same
    user), and the Landlock ruleset is rebuilt from its rules.

    Raises:
        OSError: a namespace fd could not be reopened or the ruleset rebuilt.
    """

    def reopen(path: str | None) -> int | None:
        return None if path is None else os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    rules = [landlock.Rule(str(p), int(r)) for p, r in data["rules"]]
    ruleset = landlock.build(rules, int(data["abi"]))
    setup = _setup(ruleset, base64.b64decode(data["bpf"]), reopen(data.get("userns")),
                   reopen(data.get("netns")), reopen(data.get("mntns")),
                   Limits.from_wire(dict(data.get("limits") or {})), data.get("pids"))
    return Rebuilt(setup, tuple((str(k), str(v)) for k, v in data.get("env") or ()))


def _register() -> None:
    from murmur import procs

    procs.register_loader(WIRE_KIND, from_wire)


_register()
