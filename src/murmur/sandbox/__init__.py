"""The kernel sandbox around every command a capsule runs (spec/containment.md).

Thin public face over private modules (imported on first use, so a plain advisory session
loads none of them):

* :class:`Policy` (:mod:`~murmur.sandbox.policy`) — what a session's commands may touch;
* :func:`compile` (:mod:`~murmur.sandbox.compiled`) — made once when a session starts: the
  Landlock ruleset, the seccomp program, the namespaces and the egress proxy's listener;
* :class:`Confinement` (:mod:`~murmur.sandbox.confine`) — what one start applies;
* :func:`probe` (:mod:`~murmur.sandbox.host`) — what this host can back;
* :func:`resolve_class` (:mod:`~murmur.sandbox.classes`) — the class a session runs at;
* :func:`install` / :func:`current` (:mod:`~murmur.sandbox.installed`) — this session's sandbox.
"""

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.sandbox.classes import denied_exec, explain, resolve_class, shim
    from murmur.sandbox.compiled import Sandbox, SandboxError, compile, refusal
    from murmur.sandbox.confine import Confined, Confinement, from_wire
    from murmur.sandbox.host import HOST_ENV, HostSupport, probe
    from murmur.sandbox.installed import current, install, uninstall
    from murmur.sandbox.limits import Limits, stopped_by
    from murmur.sandbox.policy import Policy, from_manifest

__all__ = [
    "HOST_ENV",
    "Confined",
    "Confinement",
    "HostSupport",
    "Limits",
    "Policy",
    "Sandbox",
    "SandboxError",
    "compile",
    "current",
    "denied_exec",
    "explain",
    "from_manifest",
    "from_wire",
    "install",
    "probe",
    "refusal",
    "resolve_class",
    "shim",
    "stopped_by",
    "uninstall",
]

__getattr__ = lazy.face(__name__, {
    "classes": ["denied_exec", "explain", "resolve_class", "shim"],
    "compiled": ["Sandbox", "SandboxError", "compile", "refusal"],
    "confine": ["Confined", "Confinement", "from_wire"],
    "installed": ["current", "install", "uninstall"],
    "host": ["HOST_ENV", "HostSupport", "probe"],
    "limits": ["Limits", "stopped_by"],
    "policy": ["Policy", "from_manifest"],
})
