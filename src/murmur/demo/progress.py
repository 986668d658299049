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
    "completion": "a child's completion",
}


def describe_record(label: str, record: Mapping[str, Any]) -> str | None:
    """The progress line for one trace record of ``label``'s session, or None to stay quiet.

    Args:
        label (str): who wrote the trace (``lead``, ``inventory``, ``audit-desk`` …).
        record (Mapping[str, Any]): one ``trace.jsonl`` object (spec/trace.md).
    """
    kind = record.get("event_type")
    if kind == "task_start":
        origin = str(record.get("origin", ""))
        return f"{label}: took {_ORIGINS.get(origin, 'a task')}"
    if kind == "task_end":
        status = record.get("exit_status", "?")
        shells = record.get("shell_calls", 0)
        extra = f", {shells} shell command{'' if shells == 1 else 's'}" if shells else ""
        return f"{label}: task {status} in {_seconds(record.get('duration_ms'))}{extra}"
    if kind == "delegation_start":
        return (f"{label}: delegated to {record.get('capsule')} {record.get('version')} through "
                f"mur-roost; child session {record.get('child_session_id')}")
    if kind == "delegation":
        return f"{label}: delegation to {record.get('capsule')} ended {record.get('outcome')}"
    if kind == "plan_step" and record.get("kind") in ("member", "capsule") and record.get("status") != "ok":
        return f"{label}: step {record.get('step')} {record.get('status')}: {record.get('reason', '')}".rstrip(": ")
    return None


class Say:
    """Progress lines on stderr, behind ``[demo] ``."""

    def __init__(self, err: TextIO) -> None:
        self._err = err

    def __call__(self, text: str) -> None:
        try:
            self._err.write(f"[demo] {text}\n")
            self._err.flush()
        except (OSError, ValueError):
            pass


class TraceFollower:
    """Follows trace files and turns their records into progress lines."""

    def __init__(self, say: Callable[[str], None], on_record: Callable[[str, dict[str, Any]], None]) -> None:
        self._say = say
        self._on_record = on_record
        self._files: dict[Path, tuple[str, int, bytes]] = {}

    def follow(self, path: Path, label: str) -> None:
        """Start following ``path`` (it may not exist yet)."""
        self._files.setdefault(path, (label, 0, b""))

    def poll(self) -> None:
        """Read what each file gained since the last poll."""
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
                    self._on_record(label, record)
                    line = describe_record(label, record)
                    if line:
                        self._say(line)
