"""W3C trace context: one trace id per tree, a span per trace record (spec/trace.md "Trace ids").

A :class:`SpanContext` is a ``trace_id`` (32 lowercase hex) and a ``span_id`` (16 lowercase
hex). It travels as a W3C ``traceparent`` value, ``00-<trace_id>-<span_id>-01``:

* on every HTTP hop the runtime makes, as the ``traceparent`` header (door calls, member
  calls, delegation's ``POST /spawn`` and its first task, links, model calls);
* into every command and child process, as the ``TRACEPARENT`` environment variable (the
  OpenTelemetry environment carrier). A session started with one joins that trace; one
  started without starts a new trace.

:data:`CURRENT` holds the span of the work running in this Trio task (a task's
``task_start`` record, else the session's ``session_start``); Trio copies it into the tasks
a task starts, so every hop made on a task's behalf names that task as its parent.

A record's ``span_id`` is the last 16 hex digits of its ``evt_`` id (:func:`span_of`), so a
reader rebuilds every parent link from the file alone. Pure: no I/O.
"""

from __future__ import annotations

import contextvars
import re
import secrets
from collections.abc import Mapping

import attrs

ENV = "TRACEPARENT"
"""The environment carrier's name (OpenTelemetry's ``TRACEPARENT``)."""

HEADER = "traceparent"
"""The HTTP header (W3C Trace Context)."""

_TRACEPARENT_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


@attrs.frozen
class SpanContext:
    """One span's identity.

    Attributes:
        trace_id (str): 32 lowercase hex digits, not all zero.
        span_id (str): 16 lowercase hex digits, not all zero.
    """

    trace_id: str
    span_id: str

    @property
    def traceparent(self) -> str:
        """``00-<trace_id>-<span_id>-01`` (version 00, sampled)."""
        return f"00-{self.trace_id}-{self.span_id}-01"


CURRENT: contextvars.ContextVar[SpanContext | None] = contextvars.ContextVar("murmur_span", default=None)


def new_trace_id() -> str:
    """A fresh random trace id (32 lowercase hex)."""
    return secrets.token_hex(16)


def new_span_id() -> str:
    """A fresh random span id (16 lowercase hex)."""
    return secrets.token_hex(8)


def span_of(event_id: str) -> str:
    """The span id of the trace record ``event_id`` (``evt_`` + 32 hex): its last 16 digits."""
    return event_id[-16:]


def parse(value: str | None) -> SpanContext | None:
    """The span a ``traceparent`` value names, or None when it is absent or not version 00.

    Upper-case hex, all-zero ids, surrounding blanks other than spaces and tabs, and any
    other version are refused (None): a malformed carrier starts a new trace, it never
    fails the request or the session.
    """
    if not value:
        return None
    m = _TRACEPARENT_RE.match(value.strip(" \t"))
    if m is None or m.group(1) == _ZERO_TRACE or m.group(2) == _ZERO_SPAN:
        return None
    return SpanContext(m.group(1), m.group(2))


def from_env(env: Mapping[str, str]) -> SpanContext | None:
    """The span ``TRACEPARENT`` in ``env`` names (None when unset or malformed)."""
    return parse(env.get(ENV))


def current_traceparent() -> str | None:
    """The ``traceparent`` of :data:`CURRENT` (None outside any traced work)."""
    span = CURRENT.get()
    return None if span is None else span.traceparent


def outgoing() -> str:
    """The ``traceparent`` for an outgoing hop: :data:`CURRENT`'s, else a fresh root's."""
    return current_traceparent() or SpanContext(new_trace_id(), new_span_id()).traceparent


def inject(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with ``traceparent`` set from :data:`CURRENT` (unchanged outside traced
    work, and when the caller set one already). Returns the same dict."""
    value = current_traceparent()
    if value is not None and HEADER not in headers:
        headers[HEADER] = value
    return headers


def with_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with ``TRACEPARENT`` set from :data:`CURRENT` (kept as given when
    there is no current span)."""
    out = dict(env)
    value = current_traceparent()
    if value is not None:
        out[ENV] = value
    return out
