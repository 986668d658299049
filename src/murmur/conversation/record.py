"""The durable conversation record: one append-only JSON Lines file per context.

Layout (spec/conversations.md "The record")::

    $MURMUR_HOME/conversations/<record>/<context-id>/conversation.jsonl

``<record>`` is ``context.record_store`` (default: the capsule's name). The root, record and
context directories are made mode 0700, and only on the first append; the file is 0600.
The first line is a header (``{"type": "murmur.record", "capsule", "created_ms"}``, plus
``truncated`` once retention dropped messages); every other line is one message, a JSON
object with ``id`` (``msg_…``) and ``role`` (``user`` | ``assistant`` | ``tool``). Readers
skip every line without a ``role`` (the header), and a last line cut short by a killed
writer. A line is written with one ``write`` on an ``O_APPEND`` descriptor, so a line is
either whole or the torn tail of the file; the next append first cuts that torn tail (it
holds no whole message) so the file stays one object per line.

Failures never stop a task: :class:`RecordStore` reports the first failure once (through its
``report`` callable: stderr and ``logs/bootstrap.log``) and carries on unrecorded.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from murmur import paths
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.ids import new_id

__all__ = [
    "RECORD_FILE",
    "ROOT_DIR",
    "RecordStore",
    "bad_segment",
    "check_segment",
    "conversations_root",
    "read_messages",
    "record_file",
]

ROOT_DIR = "conversations"
RECORD_FILE = "conversation.jsonl"
HEADER_TYPE = "murmur.record"
MAX_SEGMENT = 255


def conversations_root(home: Path | None = None) -> Path:
    """``<home>/conversations`` (``$MURMUR_HOME`` by default)."""
    return (home or paths.murmur_home()) / ROOT_DIR


def bad_segment(name: str) -> str | None:
    """Why ``name`` cannot be one directory name of the record, or None when it can.

    A segment is non-empty, at most 255 bytes, has no ``/`` or NUL, is not ``.`` or ``..``
    and does not start with a dot (pure).
    """
    if not name:
        return "it is empty"
    if "/" in name or "\0" in name:
        return "it holds a `/`" if "/" in name else "it holds a NUL byte"
    if name in (".", ".."):
        return f"`{name}` names a directory above or at the record"
    if name.startswith("."):
        return "it starts with a dot"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_SEGMENT:
        return f"it is longer than {MAX_SEGMENT} bytes"
    return None


def check_segment(name: str, what: str) -> str:
    """``name`` when it is a valid segment, else ``E-CAP-011``.

    Args:
        name (str): a ``--context`` value or ``context.record_store``.
        what (str): how the user gave it (``--context``, ``context.record_store``).

    Raises:
        DiagnosticError: ``E-CAP-011`` naming the reason.
    """
    why = bad_segment(name)
    if why is None:
        return name
    raise DiagnosticError(
        error(
            "E-CAP-011",
            f"{what} `{_cut(name)}` cannot name a conversation record: {why}",
            hint="use one path segment: letters, digits, `-`, `_`, `.` (not first), no `/`",
        )
    )


def record_file(root: Path, record: str, context_id: str) -> Path:
    """``<root>/<record>/<context_id>/conversation.jsonl`` (no check, no I/O)."""
    return root / record / context_id / RECORD_FILE


def read_messages(path: Path) -> list[dict[str, Any]]:
    """The message lines of a record file, oldest first.

    Lines without a ``role`` (the header) are skipped, and so is an unparsable **last** line
    (a writer killed mid-line).

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` when it does not exist).
        ValueError: a line other than the last is not a JSON object.
    """
    out: list[dict[str, Any]] = []
    lines = path.read_bytes().split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            if i == len(lines) - 1:
                break  # the torn tail of a killed writer
            raise ValueError(f"line {i + 1} is not JSON") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {i + 1} is not a JSON object")
        if isinstance(obj.get("role"), str):
            out.append(obj)
    return out


def _header_of(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as f:
            first = f.readline()
        obj = json.loads(first)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and obj.get("type") == HEADER_TYPE else None


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@attrs.define
class RecordStore:
    """One capsule's conversation records (``<root>/<record>/``).

    Attributes:
        root (Path): ``$MURMUR_HOME/conversations``.
        record (str): the record store's name (already checked).
        capsule (str): the capsule's name, for the header.
        report (Callable[[str], None]): where the first failure (and notes) are told.
        now_ms (Callable[[], int]): the wall clock, Unix milliseconds.
    """

    root: Path
    record: str
    capsule: str
    report: Callable[[str], None]
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    _failed: bool = False
    _noted: set[str] = attrs.field(factory=set)

    @property
    def directory(self) -> Path:
        """``<root>/<record>``."""
        return self.root / self.record

    def path_for(self, context_id: str) -> Path | None:
        """The record file of ``context_id``, or None (noted once) when the id is no segment."""
        why = bad_segment(context_id)
        if why is None:
            return record_file(self.root, self.record, context_id)
        if context_id not in self._noted:
            self._noted.add(context_id)
            self.report(
                f"note: context `{_cut(context_id)}` is not recorded: {why} "
                "(a context id must be one path segment)"
            )
        return None

    def exists(self, context_id: str) -> bool:
        """Whether a record file exists for ``context_id``."""
        path = self.path_for(context_id)
        return path is not None and path.is_file()

    def load(self, context_id: str) -> list[dict[str, Any]]:
        """Every message recorded for ``context_id``; empty when none or unreadable (reported)."""
        path = self.path_for(context_id)
        if path is None:
            return []
        try:
            return read_messages(path)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            self._fail(f"the conversation record {path} cannot be read ({_reason(exc)}); "
                       "the task starts without its history")
            return []

    def append(self, context_id: str, message: Mapping[str, Any]) -> None:
        """Append one message line (``id`` added when absent); failures are reported once."""
        path = self.path_for(context_id)
        if path is None:
            return
        line = dict(message)
        line.setdefault("id", new_id("msg"))
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            self._append_bytes(path, data)
        except OSError as exc:
            self._fail(f"the conversation record {path} cannot be written ({_reason(exc)}); "
                       "the conversation goes on unrecorded")

    def _append_bytes(self, path: Path, data: bytes) -> None:
        try:  # the common case: the record exists, no directory to make
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            for d in (self.directory, path.parent):
                d.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                header = {"type": HEADER_TYPE, "capsule": self.capsule, "created_ms": self.now_ms()}
                data = (json.dumps(header, separators=(",", ":")) + "\n").encode() + data
            elif os.pread(fd, 1, size - 1) != b"\n":
                _cut_torn_tail(fd, size)
            os.write(fd, data)
        finally:
            os.close(fd)

    def _fail(self, message: str) -> None:
        if not self._failed:
            self._failed = True
            self.report(f"warning: {message}")

    # -- retention (at launch) -------------------------------------------------------------

    def keep_newest(self, context_id: str, max_messages: int) -> int:
        """Cut ``context_id``'s record to its newest ``max_messages`` messages.

        The header records the drop (``truncated {dropped, oldest_surviving_id,
        last_dropped_id, at_ms}``); the file is replaced atomically. Returns how many
        messages were dropped (0 when none, or on a failure, which is reported).
        """
        path = self.path_for(context_id)
        if path is None or not path.is_file():
            return 0
        try:
            messages = read_messages(path)
            if len(messages) <= max_messages:
                return 0
            dropped, kept = messages[:-max_messages], messages[-max_messages:]
            header = _header_of(path) or {"type": HEADER_TYPE, "capsule": self.capsule,
                                          "created_ms": self.now_ms()}
            before = header.get("truncated") or {}
            header["truncated"] = {
                "dropped": int(before.get("dropped", 0)) + len(dropped),
                "oldest_surviving_id": kept[0].get("id"),
                "last_dropped_id": dropped[-1].get("id"),
                "at_ms": self.now_ms(),
            }
            tmp = path.with_name(f".{RECORD_FILE}.tmp")
            body = "".join(json.dumps(m, ensure_ascii=False, separators=(",", ":")) + "\n"
                           for m in (header, *kept))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, body.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            return len(dropped)
        except (OSError, ValueError) as exc:
            self._fail(f"the conversation record {path} could not be cut ({_reason(exc)})")
            return 0

    def expire(self, max_age_s: int, *, keep: str | None = None) -> list[str]:
        """Remove this store's records last written more than ``max_age_s`` seconds ago.

        ``keep`` (a context id) is never removed. Returns the removed context ids.
        """
        removed: list[str] = []
        cutoff = self.now_ms() / 1000 - max_age_s
        for ctx_dir in self._contexts():
            if ctx_dir.name == keep:
                continue
            try:
                if (ctx_dir / RECORD_FILE).stat().st_mtime < cutoff:
                    shutil.rmtree(ctx_dir)
                    removed.append(ctx_dir.name)
            except OSError:
                continue
        return removed

    def _contexts(self) -> Iterator[Path]:
        try:
            entries = sorted(self.directory.iterdir())
        except OSError:
            return iter(())
        return iter([e for e in entries if e.is_dir() and not e.is_symlink() and bad_segment(e.name) is None])


def _cut_torn_tail(fd: int, size: int) -> None:
    """Truncate a last line that has no newline (a writer killed mid-line) off the file."""
    start = max(0, size - 65536)
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    if cut < 0 and start > 0:
        os.write(fd, b"\n")  # a torn line longer than 64 KiB: end it (readers then report it)
        return
    os.ftruncate(fd, start + cut + 1)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)
