"""OpenTelemetry export over OTLP/HTTP (spec/trace.md "OpenTelemetry export").

Configured by ``observability.otel_endpoint`` (upstream's key: the collector's base URL, spans
go to ``<url>/v1/traces``), else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as given), else
``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL). When a session has ended, its records become
spans with the very ids its ``trace.jsonl`` holds, so the spans of every session of a tree
rebuild the tree in any backend.

Span names are upstream's (``capsule.session``, ``capsule.inference``, ``capsule.tool_call``,
``capsule.shell``, ``capsule.compaction``); where upstream has none, the GenAI semantic
conventions' (``invoke_agent <capsule>`` for a task, a member call or a delegation), with the
GenAI attributes (``gen_ai.operation.name`` ``chat`` / ``execute_tool`` / ``invoke_agent``,
``gen_ai.usage.*``) beside upstream's own.

:func:`spans_of` is pure. :func:`export` encodes and posts them with the OpenTelemetry SDK's
OTLP/HTTP exporter, imported only here (``pip install 'murmur[otel]'``). An export that fails
(no SDK, no collector, a bad answer) is one line in ``<records>/logs/otel.log``; it never fails
the session or a task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from murmur.observe.records import Record, load

EXPORT_TIMEOUT = 5.0
"""Seconds one export may take (the exporter's own bound, retries included)."""


@attrs.frozen
class SpanSpec:
    """One span to export (ids as lowercase hex, times in Unix ns)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    kind: str  # internal | server | client
    attributes: Mapping[str, str | int | float | bool]
    error: bool = False


def endpoint(manifest_endpoint: str | None, environ: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL, or None when export is not configured."""
    if manifest_endpoint:
        return manifest_endpoint.rstrip("/") + "/v1/traces"
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return environ["OTEL_EXPORTER_OTLP_ENDPOINT"].strip().rstrip("/") + "/v1/traces"
    return None


def timeout(environ: Mapping[str, str]) -> float:
    """``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` / ``OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds), else
    :data:`EXPORT_TIMEOUT`; kept between 0.1 and 30 s."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        try:
            return min(30.0, max(0.1, float(environ[name])))
        except (KeyError, ValueError):
            continue
    return EXPORT_TIMEOUT


def _ns(ms: int) -> int:
    return ms * 1_000_000


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _attrs(r: Mapping[str, Any], *names: str) -> dict[str, str | int | float | bool]:
    out: dict[str, str | int | float | bool] = {}
    for n in names:
        v = r.get(n)
        if isinstance(v, (str, int, float, bool)):
            out[n] = v
    return out


def spans_of(records: Sequence[Record]) -> list[SpanSpec]:
    """One session's spans, the session's own ``capsule.session`` last (pure)."""
    start: Record | None = None
    end: Record | None = None
    task_starts: dict[str, Record] = {}
    opened: dict[str, Record] = {}
    spans: list[SpanSpec] = []
    model = None
    last_ts = 0
    for r in records:
        kind = r.get("event_type")
        ts = _int(r.get("timestamp")) or 0
        last_ts = max(last_ts, ts)
        tid, sid, parent = r.get("trace_id"), r.get("span_id"), r.get("parent_span_id")
        if not isinstance(tid, str) or not isinstance(sid, str):
            continue
        parent = parent if isinstance(parent, str) else None
        dur = _int(r.get("duration_ms")) or 0
        if kind == "session_start":
            start = r
            model = r.get("model") if isinstance(r.get("model"), str) else None
        elif kind == "session_end":
            end = r
        elif kind == "task_start":
            task_starts[str(r.get("task_id"))] = r
        elif kind == "task_end":
            began = task_starts.pop(str(r.get("task_id")), None)
            if began is None:
                continue
            name = str((start or {}).get("capsule_name") or "agent")
            a = _attrs(r, "exit_status", "turns", "tool_calls", "shell_calls")
            a.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                      "murmur.task_id": str(r.get("task_id")), "murmur.origin": str(began.get("origin") or "")})
            a.update(_tokens(r))
            spans.append(SpanSpec(f"invoke_agent {name}", str(began["trace_id"]), str(began["span_id"]),
                                  began.get("parent_span_id") if isinstance(began.get("parent_span_id"), str) else None,
                                  _ns(_int(began.get("timestamp")) or ts), _ns(ts), "server", a,
                                  r.get("exit_status") not in ("ok",)))
        elif kind == "inference":
            a = _attrs(r, "turn", "input_tokens", "output_tokens", "decision", "tool_name", "origin", "model")
            a["gen_ai.operation.name"] = "chat"
            if model:
                a["gen_ai.request.model"] = model
            a.update(_tokens(r))
            spans.append(SpanSpec("capsule.inference", tid, sid, parent, _ns(ts - dur), _ns(ts), "client", a,
                                  bool(r.get("error_code"))))
        elif kind == "tool_call":
            a = _attrs(r, "tool_name", "input_bytes", "output_bytes", "duration_ms", "status")
            a.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": str(r.get("tool_name") or "")})
            spans.append(SpanSpec("capsule.tool_call", tid, sid, parent, _ns(ts - dur), _ns(ts), "internal", a,
                                  r.get("status") != "ok"))
        elif kind == "shell":
            a = _attrs(r, "exit_code", "duration_ms")
            a["command"] = str(r.get("command") or "")[:200]
            spans.append(SpanSpec("capsule.shell", tid, sid, parent, _ns(ts - dur), _ns(ts), "internal", a))
        elif kind == "compaction":
            spans.append(SpanSpec("capsule.compaction", tid, sid, parent, _ns(ts), _ns(ts), "internal",
                                  _attrs(r, "turn", "tokens_before", "tokens_after")))
        elif kind in ("member_call_start", "delegation_start"):
            opened[str(r.get("call_id") or r.get("delegation_id"))] = r
        elif kind in ("member_call", "delegation"):
            key = str(r.get("call_id") or r.get("delegation_id"))
            began = opened.pop(key, None)
            callee = str(r.get("member") or r.get("capsule") or "agent")
            status = str(r.get("status") or r.get("outcome") or "")
            a = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": callee, "murmur.outcome": status}
            a.update(_attrs(r, "delegation_id", "child_session_id", "call_id", "member_task_id"))
            first = began or r
            t0 = _int(first.get("timestamp")) or ts - dur
            spans.append(SpanSpec(f"invoke_agent {callee}", str(first["trace_id"]), str(first["span_id"]),
                                  first.get("parent_span_id") if isinstance(first.get("parent_span_id"), str) else None,
                                  _ns(t0), _ns(ts), "client", a, status not in ("completed", "ok")))
    if start is not None:
        a = {"murmur.session_id": str(start.get("session_id") or ""),
             "exit_status": str((end or {}).get("exit_status") or "running")}
        if model:
            a["model"] = model
        t_end = _int((end or {}).get("timestamp")) or last_ts
        spans.append(SpanSpec("capsule.session", str(start["trace_id"]), str(start["span_id"]),
                              start.get("parent_span_id") if isinstance(start.get("parent_span_id"), str) else None,
                              _ns(_int(start.get("timestamp")) or 0), _ns(t_end), "internal", a,
                              a["exit_status"] not in ("ok", "formation_ended")))
    return spans


def _tokens(r: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for ours, theirs in (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens")):
        v = _int(r.get(ours))
        if v is not None:
            out[theirs] = v
    return out


def export(specs: Sequence[SpanSpec], url: str, *, service: str, version: str,
           timeout: float = EXPORT_TIMEOUT) -> None:
    """Post ``specs`` to ``url`` with the SDK's OTLP/HTTP (protobuf) exporter.

    Raises:
        ImportError: the OpenTelemetry SDK is not installed.
        RuntimeError: the collector did not take them.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    quiet = logging.getLogger("opentelemetry")  # its retry lines are not the session's stderr:
    quiet.propagate = False                       # export_session logs the outcome once
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    resource = Resource.create({"service.name": service, "service.version": version})
    kinds = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
    flags = TraceFlags(TraceFlags.SAMPLED)
    spans = []
    for s in specs:
        ctx = SpanContext(int(s.trace_id, 16), int(s.span_id, 16), is_remote=False, trace_flags=flags)
        parent = (SpanContext(int(s.trace_id, 16), int(s.parent_span_id, 16), is_remote=True, trace_flags=flags)
                  if s.parent_span_id else None)
        spans.append(ReadableSpan(
            name=s.name, context=ctx, parent=parent, resource=resource, attributes=dict(s.attributes),
            kind=kinds[s.kind], start_time=s.start_ns, end_time=max(s.end_ns, s.start_ns),
            status=Status(StatusCode.ERROR if s.error else StatusCode.OK),
        ))
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        raise RuntimeError(f"the collector at {url} did not take {len(spans)} spans")


def formation_span(formation_id: str, trace_id: str, parent_span_id: str | None, *, name: str,
                   start_ms: int, end_ms: int, exit_status: int) -> SpanSpec:
    """The formation's own span (its id the formation id's last 16 hex digits, as its members'
    ``TRACEPARENT`` names it): ``invoke_agent <project>``, the members' sessions below it."""
    return SpanSpec(f"invoke_agent {name}", trace_id, formation_id[-16:], parent_span_id, _ns(start_ms), _ns(end_ms),
                    "server", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                               "murmur.formation_id": formation_id, "exit_status": exit_status},
                    exit_status != 0)


def export_session(trace: Path, url: str, *, log: Path, timeout: float = EXPORT_TIMEOUT) -> bool:
    """Export one ended session's trace; any failure is one line in ``log``, never raised.

    Returns:
        bool: whether the collector took the spans.
    """
    try:
        records = load(trace).records
        start = next((r for r in records if r.get("event_type") == "session_start"), {})
        specs = spans_of(records)
        if specs:
            export(specs, url, service=str(start.get("capsule_name") or "capsule"),
                   version=str(start.get("capsule_version") or ""), timeout=timeout)
        return True
    except Exception as exc:  # an export never fails the session: say why, once
        _log_failure(log, url, exc)
        return False


def export_logged(specs: Sequence[SpanSpec], url: str, *, service: str, version: str, log: Path,
                  timeout: float = EXPORT_TIMEOUT) -> bool:
    """:func:`export`, a failure one line in ``log`` (never raised)."""
    try:
        export(specs, url, service=service, version=version, timeout=timeout)
        return True
    except Exception as exc:
        _log_failure(log, url, exc)
        return False


def _log_failure(log: Path, url: str, exc: BaseException) -> None:
    """One line naming why an export failed (a log that cannot be written is dropped)."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as fh:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            fh.write(f"{stamp} export to {url} failed: {type(exc).__name__}: {exc}\n")
    except OSError:
        pass
