"""Where murmur keeps things on disk.

``MURMUR_HOME`` relocates ``~/.murmur`` (tests and operators use it). Layout:
``artifacts/`` global store, ``running/`` running-session records, ``formations/``,
``records/``, ``logs/``.
"""

from __future__ import annotations

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
