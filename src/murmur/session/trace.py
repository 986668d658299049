"""``trace.jsonl``: one JSON object per line, written and flushed in order (spec/trace.md).

Every line starts with ``event_type``, ``event_id`` (``evt_…``), ``parent_id`` (null only on
``session_start``), ``session_id`` and ``timestamp`` (Unix milliseconds), in that order, then
``trace_id``, ``span_id`` and ``parent_span_id`` (absent on a root span; spec/trace.md "Trace
ids", :mod:`murmur.tracectx`), then the event's own fields. Callers omit optional fields that do not apply rather than passing
``None``. A failed write is fatal to the session (``E-RUN-007``): :class:`TraceWriter` raises
:class:`TraceWriteError` and calls its ``on_failure`` callback once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.ids import new_id
from murmur.tracectx import SpanContext, new_trace_id, span_of

_RESERVED = frozenset(
    {"event_type", "event_id", "parent_id", "session_id", "timestamp", "trace_id", "span_id", "parent_span_id"}
)


def wall_ms() -> int:
    """The wall clock in Unix milliseconds."""
    return int(time.time() * 1000)


class TraceWriteError(DiagnosticError):
    """A trace line could not be written (``E-RUN-007``)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            error("E-RUN-007", f"the trace could not be written ({reason})", path=str(path))
        )


class WorkloadTrace:
    """The trace as a workload sees it: a failed write never raises into the workload.

    The first failure has already been handed to the writer's ``on_failure`` (the session
    winds down and ends ``failed`` with ``E-RUN-007``); a workload that raised it instead --
    from a cancellation handler, inside its own nursery -- would turn that coded end into an
    internal error. After a failure :meth:`emit` writes nothing and returns a fresh ``evt_`` id.

    Args:
        writer (TraceWriter): the session's trace.
    """

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        """:meth:`TraceWriter.emit`, except that a write failure returns an unwritten id."""
        try:
            return self._writer.emit(event_type, parent_id=parent_id, **fields)
        except TraceWriteError:
            return new_id("evt")


class SessionTrace:
    """The session's own records: parented to ``session_start`` unless told otherwise.

    A failed write returns None instead of raising: the writer's ``on_failure`` has already
    begun the wind-down, and the session goes on to end ``failed`` with ``E-RUN-007``.

    Attributes:
        writer (TraceWriter): the session's trace.
        start_id (str | None): the ``evt_`` id of ``session_start`` once written.
    """

    def __init__(self, writer: TraceWriter) -> None:
        self.writer = writer
        self.start_id: str | None = None

    def emit(
        self, event_type: str, /, *, parent: str | None = None, joins: SpanContext | None = None, **fields: object
    ) -> str | None:
        """Write one record (its ``parent_id`` is ``parent``, else ``session_start``'s;
        ``joins`` as :meth:`TraceWriter.emit` takes it).

        Returns:
            str | None: the record's ``evt_`` id; None when the trace could not be written.
        """
        try:
            return self.writer.emit(event_type, parent_id=parent or self.start_id, joins=joins, **fields)
        except TraceWriteError:
            return None


class TraceWriter:
    """Appends records to one session's ``trace.jsonl`` (implements ``workload.TraceSink``).

    Args:
        path (Path): the trace file (created if absent, mode 0600).
        session_id (str): ``ses_…`` stamped on every line.
        now_ms (Callable[[], int]): clock in Unix milliseconds (injectable for tests).
        on_failure (Callable[[TraceWriteError], None] | None): called once, on the first
            failed write, before the error is raised.
        joins (SpanContext | None): the span this session was started under (its
            ``TRACEPARENT``): the session joins that trace and ``session_start`` names that
            span as its parent. None: a new trace, ``session_start`` a root span.

    Attributes:
        trace_id (str): the session's trace (32 hex); a task a caller's ``traceparent``
            joined to another trace writes that trace's id on its own records.
    """

    def __init__(
        self,
        path: Path,
        session_id: str,
        *,
        now_ms: Callable[[], int] = wall_ms,
        on_failure: Callable[[TraceWriteError], None] | None = None,
        joins: SpanContext | None = None,
    ) -> None:
        self.path = path
        self.trace_id = joins.trace_id if joins is not None else new_trace_id()
        self._root_parent = joins.span_id if joins is not None else None
        self._other_trace: dict[str, str] = {}  # evt_ id -> trace id, where not self.trace_id
        self.session_id = session_id
        self._now_ms = now_ms
        self._on_failure = on_failure
        self._failed: TraceWriteError | None = None
        self.session_event_id: str | None = None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._file: IO[str] | None = os.fdopen(fd, "a", encoding="utf-8")

    @property
    def failed(self) -> TraceWriteError | None:
        """The first write failure, if any."""
        return self._failed

    def span(self, event_id: str) -> SpanContext:
        """The span of the record ``event_id`` (written by this writer)."""
        return SpanContext(self._other_trace.get(event_id, self.trace_id), span_of(event_id))

    def emit(self, event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
        """Append one record and flush it (the one way records are written, so a wrapper of it
        sees every record).

        Every record is a span: ``span_id`` from its ``event_id``; ``parent_span_id`` the
        span of ``parent_id`` (or of ``joins``; absent on a root span); ``trace_id`` that of
        its parent, so a task's records stay in the trace the task joined.

        Args:
            event_type (str): e.g. ``task_start``.
            parent_id (str | None): the parent record's ``evt_`` id (None only for
                ``session_start``).
            **fields: the event's payload, in the order given (JSON-serialisable values).
                ``joins`` (a :class:`~murmur.tracectx.SpanContext`, or None) is not written: it
                names a span in another process this record continues (a caller's
                ``traceparent``), whose trace and parent span it takes instead of
                ``parent_id``'s (``parent_id`` is still written as given).

        Returns:
            str: the new record's ``evt_`` id.

        Raises:
            TraceWriteError: the line could not be written (also after any earlier failure).
            ValueError: a payload field reuses one of the header names.
            TypeError: ``joins`` is not a span.
        """
        joins = fields.pop("joins", None)
        if joins is not None and not isinstance(joins, SpanContext):
            raise TypeError("joins must be a SpanContext")
        if clash := _RESERVED.intersection(fields):
            raise ValueError(f"trace fields reuse header names: {sorted(clash)}")
        if self._failed is not None:
            raise self._failed
        event_id = new_id("evt")
        record: dict[str, object] = {
            "event_type": event_type,
            "event_id": event_id,
            "parent_id": parent_id,
            "session_id": self.session_id,
            "timestamp": self._now_ms(),
        }
        parent_span: str | None
        if joins is not None:
            trace_id, parent_span = joins.trace_id, joins.span_id
        elif parent_id is None:
            trace_id, parent_span = self.trace_id, self._root_parent
        else:
            trace_id, parent_span = self._other_trace.get(parent_id, self.trace_id), span_of(parent_id)
        if trace_id != self.trace_id:
            self._other_trace[event_id] = trace_id
        record["trace_id"] = trace_id
        record["span_id"] = span_of(event_id)
        if parent_span is not None:
            record["parent_span_id"] = parent_span
        record.update(fields)
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        try:
            if self._file is None:
                raise OSError("the trace is closed")
            self._file.write(line)
            self._file.flush()
        except (OSError, ValueError) as exc:
            self._fail(str(exc) or type(exc).__name__)
        if event_type == "session_start":
            self.session_event_id = event_id
        return event_id

    def _fail(self, reason: str) -> None:
        err = TraceWriteError(self.path, reason)
        self._failed = err
        if self._on_failure is not None:
            self._on_failure(err)
        raise err

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file; later :meth:`emit` calls fail."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


def read_trace(path: Path) -> list[dict[str, object]]:
    """Every record of a ``trace.jsonl`` in file order (a helper for tests and tools).

    Raises:
        OSError: the file cannot be read.
        json.JSONDecodeError: a line is not JSON.
    """
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
