"""The escape cases: what each attempts and whether it is a boundary or a ceiling (pure).

Specification: spec/containment.md, "Verification". Each :class:`Case` names a function of
:mod:`murmur.escape.probe`. A *boundary* case that escapes is exit 3; a *ceiling* case
(a resource limit) that escapes is exit 4. ``needs_root`` cases are skipped (reported so) when
the harness cannot prepare them.
"""

from __future__ import annotations

import attrs

__all__ = ["CASES", "Case"]


@attrs.frozen
class Case:
    """One escape attempt.

    Attributes:
        name (str): the probe function (``-`` for ``_``).
        kind (str): ``boundary`` or ``ceiling``.
        what (str): one line: what the attempt tries.
        needs_root (bool): preparing it needs root (a setuid file owned by another user).
    """

    name: str
    kind: str
    what: str
    needs_root: bool = False


CASES: tuple[Case, ...] = (
    Case("read-outside", "boundary", "read a file outside the grant"),
    Case("write-outside", "boundary", "write a file outside the grant"),
    Case("exec-ungranted", "boundary", "exec a binary shell.allow does not name (/bin/true)"),
    Case("exec-workdir", "boundary", "exec a binary the command wrote into the workdir"),
    Case("proc-other", "boundary", "read another process's /proc/<pid>/environ"),
    Case("ptrace", "boundary", "PTRACE_ATTACH to another process"),
    Case("mount", "boundary", "mount a filesystem"),
    Case("userns", "boundary", "make a new user namespace"),
    Case("raw-socket", "boundary", "open a raw IP socket"),
    Case("connect-port", "boundary", "connect to an ungranted host loopback port"),
    Case("connect-name", "boundary", "reach an ungranted host by name (directly and through the proxy)"),
    Case("setuid", "boundary", "gain another uid through a setuid binary", needs_root=True),
    Case("fork-bomb", "ceiling", "fork 200 processes under capabilities.resources.max_processes: 32"),
    Case("memory-balloon", "ceiling", "map 1 GiB under capabilities.resources.memory_bytes: 256 MiB"),
)
