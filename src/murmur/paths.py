"""Where murmur keeps things on disk.

``MURMUR_HOME`` relocates ``~/.murmur`` (tests and operators use it). Layout:
``artifacts/`` global store, ``running/`` running-session records, ``formations/``,
``records/``, ``logs/``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def murmur_home() -> Path:
    """``$MURMUR_HOME`` when set and non-blank, else ``~/.murmur``."""
    env = os.environ.get("MURMUR_HOME", "").strip()
    return Path(env) if env else Path.home() / ".murmur"


def global_store() -> Path:
    """The global artifact store, ``<home>/artifacts``."""
    return murmur_home() / "artifacts"


def project_store(project_dir: Path | None = None) -> Path:
    """The project artifact store, ``<project>/.murmur/artifacts`` (default: the cwd)."""
    return (project_dir or Path.cwd()) / ".murmur" / "artifacts"


def running_dir() -> Path:
    """Where running-session records live, ``<home>/running``."""
    return murmur_home() / "running"


def log_dir() -> Path:
    """Where internal error logs go, ``<home>/logs``."""
    return murmur_home() / "logs"


def oserror_hint(exc: OSError, path: Path) -> str:
    """What to change when ``path`` (or a directory on the way to it) cannot be made or written.

    Pure: decided by ``exc.errno`` and whether ``path`` lies under ``MURMUR_HOME``.

    Args:
        exc (OSError): the failure.
        path (Path): what was being made or written.

    Returns:
        str: a one-line hint for a diagnostic's ``hint:`` line (spec/diagnostics.md).
    """
    home = murmur_home()
    try:
        under_home = path.resolve().is_relative_to(home.resolve())
    except OSError:
        under_home = False
    where = f"MURMUR_HOME ({home})" if under_home else str(path)
    elsewhere = ", or point MURMUR_HOME at a writable directory" if under_home else ""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"the file system holding {where} is full: free some space{elsewhere}"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{where} is read-only or not yours: make it writable{elsewhere}"
    if code == errno.ENOTDIR:
        return f"a file stands where a directory should be on the way to {where}: move it{elsewhere}"
    if code == errno.EEXIST:
        return "give a directory, or a path that does not exist yet (it is made)"
    if code == errno.ENAMETOOLONG:
        return "the path is too long: use a shorter directory"
    return f"check that {where} can be made and written{elsewhere}"
