"""Refusals a ``mur run`` makes before anything starts (spec/session.md "mur run").

Each function either returns quietly or raises the coded diagnostic the user sees; ``mur
doctor`` runs the same checks.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping
from pathlib import Path

from murmur import __version__
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError, UsageError
from murmur.manifest import Containment, Manifest


def refuse_unknown_containment(environ: Mapping[str, str]) -> None:
    """Refuse a ``MURMUR_CONTAINMENT`` that names no class (spec/session.md "Containment").

    Raises:
        UsageError: ``E-RUN-011`` (exit 2), before anything starts.
    """
    from murmur.containment import force_problem

    problem = force_problem(environ)
    if problem is not None:
        raise UsageError(error("E-RUN-011", problem,
                               hint="unset it to let the host decide, or set MURMUR_CONTAINMENT=groups"))


def mur_version_warning(manifest: Manifest, running: str = __version__) -> Diagnostic | None:
    """``W-MAN-001`` when ``mur_version`` names another murmur version (the run continues)."""
    wanted = manifest.mur_version
    if wanted is None or wanted.strip().removeprefix("v") == running:
        return None
    return error("W-MAN-001", f"the capsule asks for mur {wanted}, but this is mur {running}; running it anyway",
                 hint="set `mur_version` to the version you run, or remove it")


def check_internal_port(manifest: Manifest, host: str = "127.0.0.1") -> str:
    """The door's bind address: ``network.internal_port`` on loopback, else an OS-chosen port.

    The port is tried once here so a busy one refuses the launch before anything starts.

    Raises:
        DiagnosticError: ``E-RUN-010`` when the port is already in use (or cannot be bound).
    """
    port = manifest.internal_port
    if port is None:
        return f"{host}:0"
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((host, port))
    except OSError as exc:
        reason = "it is already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise DiagnosticError(error(
            "E-RUN-010", f"network.internal_port {port} cannot be bound on {host}: {reason}",
            hint="stop whatever holds the port, choose another `internal_port`, or remove the key")) from None
    finally:
        probe.close()
    return f"{host}:{port}"


def check_workdir_parent(workdir: Path) -> None:
    """Refuse a ``--workdir`` whose parent directory does not exist (nothing is created).

    Raises:
        DiagnosticError: ``E-IO-001``.
    """
    if not workdir.exists() and not workdir.parent.is_dir():
        raise DiagnosticError(error(
            "E-IO-001", f"the workdir's parent directory {workdir.parent} does not exist",
            hint="create it first, or give a --workdir inside an existing directory"))


def check_containment(manifest: Manifest, flag: str | None = None,
                      environ: Mapping[str, str] | None = None) -> Containment:
    """The class this session runs at, or a refusal when this host cannot back it (spec/containment.md).

    The class is the strongest of the manifest's floor, ``--containment``, the parent
    session's class and ``MURMUR_SANDBOX_CLASS`` (:func:`murmur.sandbox.classes.resolve_class`).

    Raises:
        DiagnosticError: ``E-CAP-003`` naming what this host lacks (``mur doctor`` says more).
    """
    from murmur.sandbox.classes import class_source, resolve_class

    floor = manifest.capabilities.containment
    klass = resolve_class(floor, flag, environ)
    if klass is Containment.ADVISORY:
        return klass
    from murmur.sandbox.compiled import refusal
    from murmur.sandbox.host import probe

    lacks = probe(environ).lacks(klass)
    if lacks:
        raise DiagnosticError(refusal(klass, lacks, "the containment class",
                                      class_source(floor, flag, environ)))
    return klass
