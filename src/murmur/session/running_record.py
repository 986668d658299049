"""Running-session records: ``$MURMUR_HOME/running/<ses_id>.json`` (spec/session.md "Running records").

Written (directory 0700, file 0600, atomically) once the door serves, removed when the session
ends. A record names the process by pid *and* start time (``/proc/<pid>/stat`` field 22, in
clock ticks since boot: :mod:`murmur.procstat`), so a reader never trusts a record whose pid was reused: only a failed
pid/start-time check deletes a record. Authenticated doors also keep their tokens here (the
only file that holds them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from murmur import paths, procstat
from murmur.diagnostics import Diagnostic, error
from murmur.session.records import write_private
from murmur.userfile import UserFileError, read_user_text

MAX_RECORD_BYTES = 64 * 1024
"""A larger running record is malformed (real ones are well under 4 KiB)."""
UNREADABLE_DIR = "unreadable"
"""``running/unreadable/``: where ``mur ps`` sets aside a malformed record, so it reports it once."""


@attrs.frozen
class RunningRecord:
    """One running session as ``mur ps`` and launchers see it.

    Attributes:
        session_id (str): ``ses_…``.
        url (str): the door, ``http://127.0.0.1:<port>``.
        pid (int): the session's process.
        start_time (int): the process start time (``/proc`` field 22).
        name (str), version (str): the capsule.
        workdir (str): the work folder (absolute).
        records_dir (str): the records directory (absolute).
        started_at (str): RFC 3339 UTC time the door started serving.
        outlives_launcher (bool): always false for now (no detached sessions).
        formation_id (str | None): ``frm_…`` for a formation member.
        door_token (str | None): the operator token (authenticated doors only).
        credentials (dict[str, str] | None): declared credential name -> token.
        member (str | None): the formation member's name.
        callees (list[str] | None): the members it may call (roster order).
        manifest_path (str | None): the ``murmur.yaml`` the session loaded.
        manifest_sha256 (str | None): sha256 of those bytes at start.
        artifact (str | None): the installed ``.mur.zip`` it runs.
        artifact_sha256 (str | None): that archive's sha256 as recorded at install.
        source_manifest (str | None): the source ``murmur.yaml`` behind it, when known.
            The last five are what ``mur agent who`` compares (``murmur.routing.profile``).
        lineage (dict | None): the session's lineage (spec/tree.md).
        delegations (dict[str, int] | None): ``started`` / ``refused`` delegation counts.
        waiting (list[dict[str, str]] | None): tasks in ``input-required``: ``task_id`` and
            ``prompt`` cut to one line (spec/conversations.md); None when none waits.
    """

    session_id: str
    url: str
    pid: int
    start_time: int
    name: str
    version: str
    workdir: str
    records_dir: str
    started_at: str
    outlives_launcher: bool = False
    formation_id: str | None = None
    door_token: str | None = None
    credentials: dict[str, str] | None = None
    member: str | None = None
    callees: list[str] | None = None
    manifest_path: str | None = None
    manifest_sha256: str | None = None
    artifact: str | None = None
    artifact_sha256: str | None = None
    source_manifest: str | None = None
    lineage: dict[str, Any] | None = None
    delegations: dict[str, int] | None = None
    waiting: list[dict[str, str]] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as written (keys with a ``None`` value left out)."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


def record_path(session_id: str) -> Path:
    """``$MURMUR_HOME/running/<session_id>.json``."""
    return paths.running_dir() / f"{session_id}.json"


def write_running(record: RunningRecord) -> Path:
    """Write (or replace) a running record; returns its path.

    Raises:
        OSError: the directory or file cannot be written.
    """
    d = paths.running_dir()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    p = record_path(record.session_id)
    write_private(p, json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    return p


def remove_running(session_id: str) -> Diagnostic | None:
    """Delete a running record if it exists; never raises.

    Returns:
        Diagnostic | None: ``E-IO-002`` (permission denied) or ``E-IO-003`` (any other
        ``OSError``) naming the record left behind; None when it is gone. A record left
        behind is harmless: its pid check fails once the session exits, and ``mur ps``
        prunes it.
    """
    path = record_path(session_id)
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        code = "E-IO-002" if isinstance(exc, PermissionError) else "E-IO-003"
        return error(code, f"the running record could not be removed: {exc.strerror or type(exc).__name__}",
                     path=str(path), hint="`mur ps` removes it once this session has exited")
    return None


def read_running(path: Path) -> RunningRecord:
    """Parse one record file.

    Raises:
        FileNotFoundError: the record is gone.
        OSError: unreadable (permission denied, I/O error).
        ValueError: not a running record (not a regular file, larger than
            :data:`MAX_RECORD_BYTES`, not UTF-8 (bad JSON, missing or mistyped fields); the message
            reads ``it is malformed (…)`` and names what is wrong, never Python internals.
    """
    try:
        text = read_user_text(path, limit=MAX_RECORD_BYTES)
    except UserFileError as exc:
        if exc.kind == "missing":
            raise FileNotFoundError(exc.path) from None
        if exc.kind in ("not_regular", "directory", "too_large", "not_utf8"):
            raise ValueError(f"it is malformed ({exc.reason})") from None
        raise OSError(exc.reason) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is malformed (not valid JSON: {exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError("it is malformed (not a JSON object)")
    fields = attrs.fields(RunningRecord)
    missing = [f.name for f in fields if f.default is attrs.NOTHING and f.name not in data]
    if missing:
        raise ValueError(f"it is malformed (missing {', '.join(missing)})")
    known = {f.name for f in fields}
    rec = RunningRecord(**{k: v for k, v in data.items() if k in known})
    if not isinstance(rec.pid, int) or not isinstance(rec.start_time, int):
        raise ValueError("it is malformed (pid and start_time must be integers)")
    return rec


def check_alive(record: RunningRecord) -> str | None:
    """Why ``record`` no longer names a live session, or None when pid and start time match."""
    start = procstat.start_time(record.pid)
    if start is None:
        return f"process {record.pid} is gone"
    if start != record.start_time:
        return f"process {record.pid} is another program (pid reused)"
    return None


@attrs.frozen
class Census:
    """What :func:`list_running` found.

    Attributes:
        live (tuple[RunningRecord, ...]): records whose process is still the session.
        pruned (tuple[tuple[str, str], ...]): (session id, reason) of stale records.
        unreadable (tuple[tuple[Path, str], ...]): (file, reason) of records skipped; a
            malformed one set aside is named where it now is.
        directory_error (str | None): why ``running/`` itself could not be listed (then
            nothing else is known).
    """

    live: tuple[RunningRecord, ...]
    pruned: tuple[tuple[str, str], ...]  # (session id, reason)
    unreadable: tuple[tuple[Path, str], ...]  # (file, reason)
    directory_error: str | None = None


def _record_files(d: Path) -> list[Path]:
    """The ``ses_*.json`` files of ``d``, sorted; empty when ``d`` does not exist.

    Raises:
        OSError: ``d`` exists but cannot be listed.
    """
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    return sorted(d / n for n in names if n.startswith("ses_") and n.endswith(".json"))


def _set_aside(f: Path) -> Path | None:
    """Move a malformed record into ``running/unreadable/``; where it went, or None."""
    target_dir = f.parent / UNREADABLE_DIR
    try:
        target_dir.mkdir(mode=0o700, exist_ok=True)
        target = target_dir / f.name
        os.replace(f, target)
    except OSError:
        return None
    return target


def list_running(*, prune: bool = True) -> Census:
    """Every running record whose process is still the session, oldest first.

    Args:
        prune (bool): delete records whose pid/start-time check failed, and set malformed
            ones aside in ``running/unreadable/`` (so they are reported once).
    """
    d = paths.running_dir()
    live: list[RunningRecord] = []
    pruned: list[tuple[str, str]] = []
    bad: list[tuple[Path, str]] = []
    try:
        files = _record_files(d)
    except OSError as exc:
        return Census((), (), (), exc.strerror or type(exc).__name__)
    for f in files:
        try:
            rec = read_running(f)
        except FileNotFoundError:
            continue  # ended while we looked
        except ValueError as exc:
            moved = _set_aside(f) if prune else None
            bad.append((moved or f, f"{exc}; set aside as {moved}" if moved else str(exc)))
            continue
        except OSError as exc:
            bad.append((f, str(exc)))
            continue
        why = check_alive(rec)
        if why is None:
            live.append(rec)
            continue
        pruned.append((rec.session_id, why))
        if prune:
            try:
                f.unlink()
            except OSError:
                pass
    return Census(tuple(live), tuple(pruned), tuple(bad))
