"""A small OTLP/HTTP receiver for tests: it decodes the real protobuf payload of every
``POST /v1/traces`` with the OpenTelemetry protocol package and keeps the spans."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(v: Any) -> object:
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


class Received:
    """What the receiver decoded: ``spans`` (dicts), ``posts`` (request count), ``paths``."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.posts = 0
        self.paths: list[str] = []
        self.lock = threading.Lock()

    def take(self, body: bytes) -> None:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        with self.lock:
            self.posts += 1
            for rs in req.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append({
                            "name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex() or None,
                            "attributes": {a.key: _value(a.value) for a in s.attributes},
                            "resource": resource, "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                            "kind": s.kind, "status": s.status.code,
                        })


@contextmanager
def receiver(status: int = 200) -> Iterator[tuple[str, Received]]:
    """A receiver on a free loopback port: yields its base URL and what it received."""
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            got.paths.append(self.path)
            if status == 200 and self.path == "/v1/traces":
                got.take(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(status)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
