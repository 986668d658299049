"""A session's sandbox, compiled once when the capsule starts (spec/containment.md).

:func:`compile` turns a :class:`~murmur.sandbox.policy.Policy` into a :class:`Sandbox`: the
Landlock ruleset fd, the seccomp program bytes, and (scoped, sealed) the session's namespaces
with the egress proxy's listener inside. :meth:`Sandbox.confinement` is what each start
applies; :meth:`Sandbox.serve` runs the proxy and the loopback relays as tasks of the session;
:meth:`Sandbox.close` closes every fd it holds (nothing outlives the session).

Errors::

    SandboxError      E-CAP-003 the host lacks what the class needs; E-SBX-001 compiling failed
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import overload

import attrs
import trio

from murmur.diagnostics import Diagnostic, error
from murmur.errors import MurmurError
from murmur.manifest import Containment
from murmur.sandbox import elf, landlock, seccomp
from murmur.sandbox import ns as namespaces
from murmur.sandbox import policy as pol
from murmur.sandbox.confine import Confined
from murmur.sandbox.host import HostSupport, probe
from murmur.sandbox.limits import PidsGroup
from murmur.sandbox.proxy import serve_proxy, serve_relay

__all__ = ["Sandbox", "SandboxError", "compile", "refusal"]


class SandboxError(MurmurError):
    """The sandbox could not be made; ``diagnostic`` says why and what to change."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        self.diagnostic = diagnostic
        super().__init__(diagnostic.message)


def refusal(klass: Containment, lacks: tuple[str, ...], source: str = "the containment floor",
            why: tuple[str, str] | None = None) -> Diagnostic:
    """The ``E-CAP-003`` refusal: ``klass`` asked for, and what this host lacks for it.

    ``why`` (:func:`murmur.sandbox.classes.class_source`) names what set the class and how to
    lower it; without it the hint names both ways a capsule's class is set.
    """
    said = f" ({why[0]})" if why else ""
    lower = why[1] if why else "lower the floor (`capabilities.containment`, `mur run --containment`)"
    return error(
        "E-CAP-003",
        f"{source} is {klass.value}{said}, but this host cannot back it: it lacks {'; '.join(lacks)}",
        hint=f"run on a host that has these (see `mur doctor`), or {lower}",
    )


class Sandbox:
    """The compiled sandbox of one session (advisory: nothing to apply)."""

    def __init__(self, policy: pol.Policy, confined: Confined | None,
                 nss: namespaces.Namespaces | None, pids: PidsGroup | None = None) -> None:
        self.policy = policy
        self._confined = confined
        self._ns = nss
        self.pids = pids
        self.closed = False
        self._harness: dict[tuple[str, str, tuple[str, ...], tuple[str, ...], bool], Confined] = {}
        self._extra_allow: list[str] = []

    @property
    def klass(self) -> Containment:
        """The class this sandbox enforces."""
        return self.policy.klass

    def confinement(self) -> Confined | None:
        """What each start applies (None under advisory)."""
        return self._confined

    @property
    def proxy_url(self) -> str | None:
        """``http://127.0.0.1:<port>`` inside the namespace, or None."""
        return None if self._ns is None else f"http://127.0.0.1:{self._ns.proxy_port}"

    async def serve(self, on_refused: Callable[[str, int, str], None] | None = None) -> None:
        """Run the egress proxy and loopback relays until cancelled (returns at once under advisory)."""
        if self._ns is None:
            return
        allow = _LiveAllow(self.policy, self._extra_allow)
        refused = on_refused or (lambda host, port, scheme: None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_proxy, self._ns.proxy, allow, refused)
            for port, listener in self._ns.relays.items():
                nursery.start_soon(serve_relay, listener, port)

    def harness_confinement(self, executable: str, home: str, helpers: Sequence[str] = (),
                            ro: Sequence[str] = (), unix_sockets: bool = False) -> Confined | None:
        """The confinement of an agent CLI (Claude Code, Codex) this session runs: the session's
        grants plus what the CLI needs. Compiled once per CLI and kept; None under advisory.

        Added to the session's rules: the CLI's own start closure and install tree
        (read-only), its ``HOME`` (writable), ``/proc`` (read-only: a runtime reads its own
        ``/proc/self/maps`` to find its stack — Claude Code aborts without it — and Landlock
        cannot name ``/proc/self`` alone; another process's memory-backed entries stay
        refused by Landlock's ptrace scoping), and ``helpers``: programs the CLI itself runs
        (the shell its Bash tool and key helper use, the interpreter of murmur's PreToolUse
        hook), executable with their start closures, and ``ro`` read-only. A shell granted
        here runs only what the session's rules let it ``exec``. ``unix_sockets`` keeps
        ``socket(AF_UNIX)`` (the hook's deny socket).

        The CLI reaches its provider through the session's egress proxy: the provider host is
        added to the proxy's rules by :meth:`allow_provider`.
        """
        base = self._confined
        if base is None:
            return None
        key = (executable, home, tuple(helpers), tuple(ro), unix_sockets)
        if key not in self._harness:
            real = os.path.realpath(executable)
            tree, platform = _install_tree(real)
            extra = pol.Policy(
                klass=self.policy.klass, workdir=self.policy.workdir, allow=tuple(helpers),
                search_path=self.policy.search_path, rw=(home,), ro=(tree, *ro),
            )
            rules = [*base.rules, *pol.rules(extra)]
            closure = elf.start_closure(executable, self.policy.search_path)
            rules += [landlock.Rule(p, landlock.EXECUTE | landlock.READ_FILE) for p in closure.executables]
            rules += [landlock.Rule(p, landlock.READ_FILE) for p in closure.libraries]
            rules += [landlock.Rule(p, landlock.READ | landlock.EXECUTE) for p in platform]
            rules.append(landlock.Rule("/proc", landlock.READ))
            fd = landlock.build(rules, base.abi)
            bpf = seccomp.program(unix_sockets=True) if unix_sockets else base.bpf
            self._harness[key] = attrs.evolve(base, ruleset=fd, rules=tuple(rules), bpf=bpf)
        return self._harness[key]

    def allow_provider(self, endpoint: str | None) -> None:
        """Let the egress proxy reach an agent CLI's provider (``https://host[:port]``)."""
        from urllib.parse import urlsplit

        if not endpoint or self._ns is None:
            return
        parts = urlsplit(endpoint)
        entry = f"{parts.scheme}://{parts.netloc}"
        if parts.scheme in ("http", "https") and parts.netloc and entry not in self._extra_allow:
            self._extra_allow.append(entry)

    def close(self) -> None:
        """Close every fd this sandbox holds (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for conf in (self._confined, *self._harness.values()):
            if conf is None:
                continue
            try:
                os.close(conf.ruleset)
            except OSError:
                pass
        if self._ns is not None:
            self._ns.close()
        if self.pids is not None:
            self.pids.remove()


def _install_tree(real: str) -> tuple[str, tuple[str, ...]]:
    """An agent CLI's install tree (read-only) and the platform packages it runs binaries from
    (read and execute): for an npm package, the directory holding its ``package.json`` and
    the ``optionalDependencies`` installed beside it (Codex's ``codex.js`` starts the native
    ``@openai/codex-linux-x64/vendor/…/bin/codex``); else the executable's directory."""
    import json

    here = os.path.dirname(real)
    while (here not in ("/", "") and not os.path.isfile(os.path.join(here, "package.json"))
           and os.path.basename(os.path.dirname(here)) != "node_modules"):
        here = os.path.dirname(here)
    manifest = os.path.join(here, "package.json")
    if not os.path.isfile(manifest):
        return os.path.dirname(real), ()
    try:
        with open(manifest, encoding="utf-8") as f:
            optional = json.load(f).get("optionalDependencies") or {}
    except (OSError, ValueError, AttributeError):
        optional = {}
    modules = here
    while modules not in ("/", "") and os.path.basename(modules) != "node_modules":
        modules = os.path.dirname(modules)
    found = tuple(os.path.join(modules, name) for name in optional
                  if isinstance(name, str) and os.path.isdir(os.path.join(modules, name)))
    return here, found


class _LiveAllow(Sequence[str]):
    """The proxy's rules: ``network.allow``, the granted loopback ports, and providers added later."""

    def __init__(self, policy: pol.Policy, extra: list[str]) -> None:
        self._fixed = (*policy.network_allow, *(f"127.0.0.1:{p}" for p in policy.loopback_ports),
                       *(f"localhost:{p}" for p in policy.loopback_ports))
        self._extra = extra

    def _all(self) -> tuple[str, ...]:
        return (*self._fixed, *self._extra)

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self._all()[i]


def _outside_trees(paths: list[str]) -> tuple[str, ...]:
    trees = tuple(os.path.realpath(t) + os.sep for t in pol.RUNTIME_TREES)
    return tuple(p for p in dict.fromkeys(paths) if not p.startswith(trees))


def compile(policy: pol.Policy, host: HostSupport | None = None) -> Sandbox:
    """Compile ``policy`` (see the module docstring).

    Raises:
        SandboxError: ``E-CAP-003`` when this host lacks what ``policy.klass`` needs;
            ``E-SBX-001`` when the kernel refused the ruleset, filter or namespaces.
    """
    if policy.klass is Containment.ADVISORY:
        return Sandbox(policy, None, None)
    support = host or probe()
    lacks = support.lacks(policy.klass)
    if lacks:
        raise SandboxError(refusal(policy.klass, lacks))
    nss = None
    try:
        home = policy.rw[0] if policy.rw else policy.workdir
        if policy.sealed and policy.etc_dir:  # before the rules: a rule needs the file to exist
            os.makedirs(policy.etc_dir, mode=0o700, exist_ok=True)
            for name, text in namespaces.accounts(os.getuid(), home).items():
                with open(os.path.join(policy.etc_dir, name), "w", encoding="utf-8") as f:
                    f.write(text)
        rules = pol.rules(policy)
        ruleset = landlock.build(rules, support.landlock_abi)
        bpf = seccomp.program(unix_sockets=policy.unix_sockets)
        plan = None
        if policy.sealed:
            files: list[str] = []
            links: list[tuple[str, str]] = []
            trees: list[str] = []
            for path in policy.binaries().values():
                c = elf.start_closure(path, policy.search_path)
                files += [*c.executables, *c.libraries]
                trees += [t for t in pol.interpreter_trees(c.executables) if _outside_trees([t + "/"])]
                for tree in trees:
                    files += pol.extension_libraries(tree)
                venv = pol.venv_of(path)
                if venv is not None:  # its pyvenv.cfg and site-packages, at their own paths
                    files.append(venv[0])
                    trees += list(venv[1])
                hop = path
                while os.path.islink(hop) and len(links) < 64:
                    links.append((hop, os.readlink(hop)))
                    hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
            plan = namespaces.RootPlan(
                rw=(policy.workdir, *policy.rw, *policy.binds_rw), files=_outside_trees(files),
                ro_dirs=tuple(dict.fromkeys([*policy.ro, *trees,
                                             *(b for b in policy.binds if _outside_trees([b + "/"]))])),
                links=tuple(lk for lk in links if _outside_trees([lk[0]])),
                workdir_exec=policy.workdir_exec, uid=os.getuid(), home=home, etc_dir=policy.etc_dir)
        nss = namespaces.build(policy.loopback_ports, plan)
    except OSError as exc:
        if nss is not None:
            nss.close()
        raise SandboxError(error(
            "E-SBX-001", f"the {policy.klass.value} sandbox could not be made: {exc.strerror or exc}",
            hint="run `mur doctor` to see what this host backs; lower the class to advisory to run anyway")) from exc
    figure = policy.limits.cgroup_pids_max or policy.limits.max_processes
    pids = PidsGroup.make(figure) if figure is not None and os.geteuid() == 0 else None
    proxy = f"http://127.0.0.1:{nss.proxy_port}"
    env = tuple((k, proxy) for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"))
    confined = Confined(policy.klass, ruleset, bpf, nss.user, nss.net, nss.mnt, env, policy.limits,
                        tuple(rules), support.landlock_abi, pids.procs if pids is not None else None)
    return Sandbox(policy, confined, nss, pids)
