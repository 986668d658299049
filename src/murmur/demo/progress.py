"""Progress lines: trace records of the demo's sessions turned into one line each.

:func:`describe_record` is pure; :class:`TraceFollower` reads what each followed
``trace.jsonl`` gained since the last poll.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from murmur.stderr import say


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; ``signal N`` for a number with no name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _seconds(ms: object) -> str:
    return f"{int(ms) / 1000:.1f}s" if isinstance(ms, int) else "?"


_ORIGINS = {
    "user": "its launch task",
    "peer": "a task from a member",
    "event": "a task over its door",
}

_CALL_WORDS = frozenset({"refused", "failed", "completed", "timed_out"})
"""A ``delegation`` record's ``outcome`` when it closes the *call* (spec/delegation.md); any
other word is the child's own outcome, written when the delegation closes."""


def describe_record(label: str, record: Mapping[str, Any], origin: str | None = None) -> str | None:
    """The progress line for one trace record of ``label``'s session, or None to stay quiet.

    Each thing is said once. A delegation has two ``delegation`` records (spec/delegation.md):
    the call's end (``completed``: the answer was read; or why it ended short) and the child's
    outcome when the delegation closes; they read differently. A task whose origin is
    ``completion`` (a child's outcome delivered to its parent) is one line, at its end, called
    the completion task.

    Args:
        label (str): who wrote the trace (``lead``, ``inventory``, ``audit-desk`` …).
        record (Mapping[str, Any]): one ``trace.jsonl`` object (spec/trace.md).
        origin (str | None): for a ``task_end``, the ``origin`` of its ``task_start``.
    """
    kind = record.get("event_type")
    if kind == "task_start":
        origin = str(record.get("origin", ""))
        if origin == "completion":
            return None
        return f"{label}: took {_ORIGINS.get(origin, 'a task')}"
    if kind == "task_end":
        status = record.get("exit_status", "?")
        shells = record.get("shell_calls", 0)
        extra = f", {shells} shell command{'' if shells == 1 else 's'}" if shells else ""
        what = "completion task (a child's outcome)" if origin == "completion" else "task"
        return f"{label}: {what} {status} in {_seconds(record.get('duration_ms'))}{extra}"
    if kind == "delegation_start":
        return (f"{label}: delegated to {record.get('capsule')} {record.get('version')} through "
                f"mur-roost; child session {record.get('child_session_id')}")
    if kind == "delegation":
        capsule, outcome, reason = record.get("capsule"), record.get("outcome"), record.get("reason")
        if outcome == "completed":
            return f"{label}: {capsule} answered (the call completed)"
        if outcome in _CALL_WORDS:
            return f"{label}: the call to {capsule} {outcome}" + (f": {reason}" if reason else "")
        return f"{label}: {capsule} reported its outcome: {outcome}" + (f" ({reason})" if reason else "")
    if kind == "plan_step" and record.get("kind") in ("member", "capsule") and record.get("status") != "ok":
        return f"{label}: step {record.get('step')} {record.get('status')}: {record.get('reason', '')}".rstrip(": ")
    return None


class Say:
    """Progress lines on stderr, behind ``[demo] ``."""

    def __init__(self, err: TextIO) -> None:
        self._err = err

    def __call__(self, text: str) -> None:
        say(f"[demo] {text}", self._err)


class TraceFollower:
    """Follows trace files and turns their records into progress lines.

    Each poll reads what every file gained and says the new records in time order (their
    ``timestamp``), across files, so one session's line never follows a later one of another
    session merely because its file was read second.
    """

    def __init__(self, say: Callable[[str], None], on_record: Callable[[str, dict[str, Any]], None]) -> None:
        self._say = say
        self._on_record = on_record
        self._files: dict[Path, tuple[str, int, bytes]] = {}
        self._origins: dict[str, str] = {}

    def follow(self, path: Path, label: str) -> None:
        """Start following ``path`` (it may not exist yet)."""
        self._files.setdefault(path, (label, 0, b""))

    def poll(self) -> None:
        """Read what each file gained since the last poll; say it in time order."""
        batch: list[tuple[int, int, str, dict[str, Any]]] = []
        for path, (label, offset, pending) in list(self._files.items()):
            try:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                continue
            *lines, rest = (pending + data).split(b"\n")
            self._files[path] = (label, offset + len(data), rest)
            for raw in lines:
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    stamp = record.get("timestamp")
                    batch.append((stamp if isinstance(stamp, int) else 0, len(batch), label, record))
        batch.sort(key=lambda item: (item[0], item[1]))
        for _, _, label, record in batch:
            self._on_record(label, record)
            task_id = str(record.get("task_id"))
            if record.get("event_type") == "task_start":
                self._origins[task_id] = str(record.get("origin", ""))
            line = describe_record(label, record, self._origins.get(task_id))
            if line:
                self._say(line)
