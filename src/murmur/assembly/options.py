"""What a ``mur run`` for one capsule starts from: its options, its environment, its task.

:class:`RunOptions` mirrors ``mur run --help``; :func:`session_environ` adds ``./.env``;
:func:`read_task` reads ``--task``. Specification: spec/session.md "mur run".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError, UsageError
from murmur.userfile import UserFileError, read_user_text


@attrs.frozen
class RunOptions:
    """``mur run`` options for a single capsule (see ``mur run --help``)."""

    manifest: str | None = None
    capsule: str | None = None
    capsule_version: str | None = None
    project_dir: str | None = None
    task: str | None = None
    json: bool = False
    workdir: str | None = None
    task_acceptance: str | None = None
    after_task: str | None = None
    deadline: str | None = None
    verbose: bool = False
    no_env_file: bool = False
    containment: str | None = None
    system_prompt: str | None = None
    spawn: str | None = None
    no_spawn: bool = False
    context: str | None = None
    resume: str | None = None
    resume_mode: str = "full"
    forget_session: bool = False
    max_tree_total: int | None = None
    max_same_capsule_chain: int | None = None
    budget_tokens: int | None = None


MAX_TASK_FILE_BYTES = 16 * 1024 * 1024
"""A ``--task`` file larger than this is refused (``E-IO-003``), as the door refuses a larger body."""
MAX_ENV_FILE_BYTES = 1 << 20
"""A larger ``./.env`` is ignored, as an unreadable one is."""


def usage_error(message: str, hint: str | None = None) -> UsageError:
    """``E-CLI-001`` (exit 2): options that do not go together."""
    return UsageError(error("E-CLI-001", message, hint=hint))


def load_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a ``.env`` file (``export`` prefixes, quotes and ``#`` comments
    allowed); an absent or unreadable file gives nothing. Values are never printed."""
    out: dict[str, str] = {}
    try:
        text = read_user_text(path, limit=MAX_ENV_FILE_BYTES)
    except UserFileError:
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum() or key[0].isdigit():
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out

def session_environ(opts: RunOptions, environ: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """The environment the session works with: the process's, plus ``./.env`` entries that
    it does not already set (unless ``--no-env-file``)."""
    env = dict(environ)
    if not opts.no_env_file:
        for k, v in load_env_file(cwd / ".env").items():
            env.setdefault(k, v)
    return env


def read_task(value: str, cwd: Path) -> str:
    """``--task``: an existing file's contents, else the text itself. A value with a ``/`` that
    names something other than a regular file (a device, a FIFO, a directory) is refused, never
    read and never taken as the task's text.

    Raises:
        DiagnosticError: ``E-IO-002``/``E-IO-003`` when the named file cannot be read.
    """
    path = Path(value) if os.path.isabs(value) else cwd / value
    try:
        named = len(value) < 4096 and "\n" not in value and (path.is_file() or ("/" in value and path.exists()))
    except OSError:
        named = False
    if not named:
        return value
    try:
        return read_user_text(path, limit=MAX_TASK_FILE_BYTES)
    except UserFileError as exc:
        code = "E-IO-002" if exc.kind == "denied" else "E-IO-003"
        raise DiagnosticError(error(code, f"cannot read the task file {path}: {exc.reason}", path=str(path),
                                    hint="pass a readable regular file (at most 16 MiB of UTF-8), or the task's text")) from None

