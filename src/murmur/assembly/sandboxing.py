"""The sandbox side of a session (a contributor of the composition root): compile it at start, serve its proxy, close it at the end.

Specification: spec/containment.md, "When the sandbox is made". :func:`contribute` runs as the
last session contributor (``murmur.assembly.contributors``), when the command environment is
known: it builds the :class:`~murmur.sandbox.policy.Policy`, compiles it, installs it as this
process's sandbox, and returns a :class:`~murmur.session.Contribution` holding a watcher that
serves the egress proxy and loopback relays for the session's life (a refused request is a
``sandbox_refused`` trace record naming the host) and an end hook that closes it. A delegated child is handed ``MURMUR_SANDBOX_FLOOR`` (the
delegation runtime's runtime-owned variables) so it runs at a class no lower than this one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import attrs

from murmur.errors import DiagnosticError
from murmur.manifest import Containment
from murmur.sandbox import compiled
from murmur.sandbox.installed import install, uninstall
from murmur.sandbox.policy import from_manifest
from murmur.session import Contribution, SessionSetup, shell_env

__all__ = ["contribute", "granted_loopback_ports"]

_LOOPBACK_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\]):(\d{1,5})")
_PORT_SOURCES = ("MURMUR_FORMATION_PEERS", "MURMUR_ROOST_URL", "MURMUR_GATEWAY_ENDPOINT")


def granted_loopback_ports(environ: Mapping[str, str]) -> tuple[int, ...]:
    """Host loopback ports this session is granted (pure): its formation peers' doors, mur-roost,
    and the tree's inference gateway (``MURMUR_GATEWAY_ENDPOINT``, spec/gateway.md), so an agent
    CLI in the session's network namespace reaches its model through the gateway."""
    ports: list[int] = []
    for name in _PORT_SOURCES:
        ports += [int(p) for p in _LOOPBACK_PORT.findall(environ.get(name, "")) if 0 < int(p) < 65536]
    return tuple(dict.fromkeys(ports))


def contribute(setup: SessionSetup, environ: Mapping[str, str]) -> Contribution | None:
    """Compile and install the session's sandbox (nothing under advisory).

    Returns:
        Contribution | None: the proxy's watcher and the end hook closing it; None under
        advisory.

    Raises:
        DiagnosticError: ``E-CAP-003`` / ``E-SBX-001`` (:func:`murmur.sandbox.compile`).
    """
    klass = setup.containment
    if klass is Containment.ADVISORY:
        return None
    env = shell_env(setup)
    for key in ("HOME", "TMPDIR"):
        if env.get(key):
            os.makedirs(env[key], exist_ok=True)
    policy = from_manifest(setup.manifest, klass, workdir=setup.workdir, env=env,
                           loopback_ports=granted_loopback_ports(environ),
                           links=setup.links_bin is not None, records=setup.records.root)
    if setup.links_bin is not None:
        # The capsule links are granted programs: one per spawn.allow name, and `mur`
        # (spec/links.md); their directory (and the capability socket in it) is readable.
        names = [n.rsplit("/", 1)[-1] for n in setup.manifest.spawn_allow] + ["mur"]
        policy = attrs.evolve(policy, allow=tuple(dict.fromkeys([*policy.allow, *names])),
                              ro=(*policy.ro, str(setup.links_bin.parent)))
    try:
        box = compiled.compile(policy)
    except compiled.SandboxError as exc:
        raise DiagnosticError(exc.diagnostic) from None
    install(box)

    async def serve(ctl: object) -> None:
        session = getattr(ctl, "session", None)

        def refused(host: str, port: int, scheme: str) -> None:
            # A session record: parented to session_start, so the trace stays one tree.
            trace = getattr(session, "trace", None)
            if trace is None:
                return
            trace.emit("sandbox_refused", parent_id=getattr(session, "session_event_id", None),
                       host=host, port=port, scheme=scheme, reason="not in capabilities.network.allow")

        await box.serve(refused)

    async def close(summary: object) -> None:
        uninstall()

    return Contribution(watchers=(serve,), end_hooks=(close,))
