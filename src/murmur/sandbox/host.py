"""What this host can back: a live probe, never a version string (spec/containment.md).

:func:`probe` really creates a Landlock ruleset, checks the seccomp table for this
architecture, and in a forked single-threaded child really unshares a user + network + mount
namespace and mounts a tmpfs inside it. :class:`HostSupport` is the answer; :meth:`~HostSupport.best`
is the highest class it backs and :meth:`~HostSupport.lacks` what a class would need.

``MURMUR_SANDBOX_HOST`` (tests) takes away what the host has: a comma list of ``no-landlock``,
``no-seccomp``, ``no-userns``, ``no-mountns`` — so the "host lacks it" paths run on any host.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping

import attrs

from murmur.manifest import Containment
from murmur.sandbox import kernel, landlock, seccomp

__all__ = ["HOST_ENV", "HostSupport", "probe", "reset_for_tests"]

HOST_ENV = "MURMUR_SANDBOX_HOST"

_cached: dict[str, HostSupport] = {}


@attrs.frozen
class HostSupport:
    """The kernel mechanisms this host gives this user.

    Attributes:
        landlock_abi (int): 0 when Landlock is absent.
        seccomp (bool): seccomp filters load and this architecture has a syscall table.
        userns (bool): an unprivileged user + network namespace can be made.
        mountns (bool): a mount namespace can be made and mounted in (inside the user namespace).
        notes (tuple[str, ...]): one sentence per missing mechanism, saying why.
    """

    landlock_abi: int
    seccomp: bool
    userns: bool
    mountns: bool
    notes: tuple[str, ...] = ()

    def lacks(self, klass: Containment) -> tuple[str, ...]:
        """What this host is missing for ``klass`` (empty: it backs it)."""
        out: list[str] = []
        if klass.rank >= 1:
            if self.landlock_abi < 1:
                out.append("Landlock (kernel 5.13+ with landlock in the LSM list)")
            if not self.seccomp:
                out.append(f"seccomp filters for {kernel.ARCH}")
            if not self.userns:
                out.append("unprivileged user and network namespaces")
        if klass.rank >= 2 and not self.mountns:
            out.append("a mount namespace it can mount inside")
        return tuple(out)

    def best(self) -> Containment:
        """The highest class this host backs."""
        for klass in (Containment.SEALED, Containment.SCOPED):
            if not self.lacks(klass):
                return klass
        return Containment.ADVISORY

    def doctor_lines(self) -> list[str]:
        """What ``mur doctor`` prints: the class, then each mechanism found or missing."""
        best = self.best()
        parts = [
            f"landlock ABI {self.landlock_abi}" if self.landlock_abi else "no landlock",
            "seccomp" if self.seccomp else "no seccomp",
            "user+network namespaces" if self.userns else "no user namespaces",
            "mount namespaces" if self.mountns else "no mount namespaces",
        ]
        lines = [f"sandbox: {best.value} is the highest class this host backs ({', '.join(parts)})"]
        lines += [f"  missing: {n}" for n in self.notes]
        return lines


def _child_probe(sealed: bool) -> str:
    """Run in a forked child: unshare and (for sealed) mount a tmpfs. Returns '' or the error."""
    try:
        flags = kernel.CLONE_NEWUSER | kernel.CLONE_NEWNET | (kernel.CLONE_NEWNS if sealed else 0)
        kernel.unshare(flags)
        if sealed:
            kernel.mount(None, "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
            kernel.mount("tmpfs", "/tmp", "tmpfs", 0, "size=64k")
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _fork_probe(sealed: bool) -> str:
    from murmur import procs

    r, w = os.pipe()

    def child() -> None:
        os.close(r)
        os.write(w, _child_probe(sealed).encode()[:200] or b"ok")

    try:
        pid = procs.fork_helper(child)  # a single-threaded child may unshare a user namespace
    except OSError as exc:
        os.close(r)
        os.close(w)
        return f"fork failed: {exc.strerror}"
    os.close(w)
    try:
        answer = os.read(r, 256).decode(errors="replace")
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return "" if answer == "ok" else (answer or "the probe child died")


def _seccomp_ok() -> tuple[bool, str]:
    if kernel.ARCH not in seccomp.TABLES:
        return False, f"no seccomp syscall table for {kernel.ARCH}"
    if int(kernel.libc.prctl(21, 0, 0, 0, 0)) < 0:  # PR_GET_SECCOMP
        return False, f"prctl(PR_GET_SECCOMP) failed: {os.strerror(ctypes.get_errno())}"
    return True, ""


def probe(environ: Mapping[str, str] | None = None, *, fresh: bool = False) -> HostSupport:
    """Probe this host once per process (``fresh`` probes again); see the module docstring."""
    env = os.environ if environ is None else environ
    removed = {w.strip() for w in env.get(HOST_ENV, "").split(",") if w.strip()}
    key = ",".join(sorted(removed))
    if not fresh and key in _cached:
        return _cached[key]
    notes: list[str] = []
    abi = landlock.abi()
    if "no-landlock" in removed:
        abi, why = 0, f"{HOST_ENV} takes it away"
    else:
        why = "landlock_create_ruleset is not available (kernel older than 5.13, or landlock not enabled)"
    if abi == 0:
        notes.append(f"landlock: {why}")
    sc, sc_why = _seccomp_ok()
    if "no-seccomp" in removed:
        sc, sc_why = False, f"{HOST_ENV} takes it away"
    if not sc:
        notes.append(f"seccomp: {sc_why}")
    userns_err = f"{HOST_ENV} takes it away" if "no-userns" in removed else _fork_probe(False)
    if userns_err:
        notes.append(f"user namespaces: unshare(CLONE_NEWUSER|CLONE_NEWNET) failed: {userns_err}")
    mount_err = "needs user namespaces" if userns_err else ""
    if not mount_err:
        mount_err = f"{HOST_ENV} takes it away" if "no-mountns" in removed else _fork_probe(True)
    if mount_err and not userns_err:
        notes.append(f"mount namespaces: {mount_err}")
    found = HostSupport(abi, sc, not userns_err, not mount_err, tuple(notes))
    _cached[key] = found
    return found


def reset_for_tests() -> None:
    """Forget probed answers."""
    _cached.clear()
