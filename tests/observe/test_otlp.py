"""OpenTelemetry export (spec/trace.md "OpenTelemetry export"): spans reach an OTLP/HTTP
receiver the test starts, decoded from the real protobuf payload, with parent links that
rebuild the session; a failed export never fails the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from murmur.ids import new_id
from murmur.observe import otlp
from murmur.session.trace import TraceWriter
from murmur.tracectx import SpanContext
from observe.otlp_receiver import receiver


def agent_trace(path: Path, joins: SpanContext | None = None) -> None:
    """A session with a task, two model turns, a tool call and its shell step, a member call."""
    with TraceWriter(path, new_id("ses"), joins=joins) as w:
        s = w.emit("session_start", parent_id=None, capsule_name="coder", capsule_version="1.2.0", model="m-1")
        t = w.emit("task_start", parent_id=s, task_id="tsk_1", origin="user")
        i = w.emit("inference", parent_id=t, turn=0, input_tokens=120, output_tokens=30, decision="tool_call",
                   tool_name="bash", duration_ms=40)
        w.emit("tool_call", parent_id=i, turn=0, tool_name="bash", input_bytes=20, output_bytes=5, duration_ms=9,
               status="ok")
        w.emit("shell", parent_id=i, turn=0, binary="/bin/echo", command="echo hi", exit_code=0, duration_ms=7)
        c = w.emit("member_call_start", parent_id=t, call_id="mcl_1", member="reviewer")
        assert c
        w.emit("member_call", parent_id=t, call_id="mcl_1", member="reviewer", status="completed", duration_ms=3)
        w.emit("inference", parent_id=t, turn=1, input_tokens=200, output_tokens=10, decision="end_turn",
               duration_ms=30)
        w.emit("task_end", parent_id=t, task_id="tsk_1", exit_status="ok", duration_ms=90, turns=2,
               input_tokens=320, output_tokens=40, tool_calls=1, shell_calls=1)
        w.emit("session_end", parent_id=s, exit_status="ok", duration_ms=100)


def test_spans_reach_the_receiver_and_rebuild_the_session(tmp_path: Path) -> None:
    """Upstream's span names with GenAI attributes, the trace's own ids, and parent links from
    every span up to capsule.session (whose parent is the span it joined)."""
    joined = SpanContext("ab" * 16, "cd" * 8)
    agent_trace(tmp_path / "trace.jsonl", joins=joined)
    with receiver() as (url, got):
        assert otlp.export_session(tmp_path / "trace.jsonl", url + "/v1/traces", log=tmp_path / "otel.log")
    assert got.paths == ["/v1/traces"] and not (tmp_path / "otel.log").exists()
    names = sorted(s["name"] for s in got.spans)
    assert names == ["capsule.inference", "capsule.inference", "capsule.session", "capsule.shell",
                     "capsule.tool_call", "invoke_agent coder", "invoke_agent reviewer"]
    by_id = {s["span_id"]: s for s in got.spans}
    assert {s["trace_id"] for s in got.spans} == {"ab" * 16}
    session = next(s for s in got.spans if s["name"] == "capsule.session")
    assert session["parent_span_id"] == "cd" * 8 and session["attributes"]["exit_status"] == "ok"
    assert (session["resource"]["service.name"], session["resource"]["service.version"]) == ("coder", "1.2.0")
    for s in got.spans:  # every span but the session's hangs from one that arrived, up to the session
        hops, at = 0, s
        while at is not session:
            at = by_id[at["parent_span_id"]]
            hops += 1
        assert hops <= 3
    chat = [s for s in got.spans if s["name"] == "capsule.inference"]
    assert {s["attributes"]["gen_ai.operation.name"] for s in chat} == {"chat"}
    assert sorted(s["attributes"]["gen_ai.usage.input_tokens"] for s in chat) == [120, 200]
    tool = next(s for s in got.spans if s["name"] == "capsule.tool_call")
    assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool" and tool["attributes"]["tool_name"] == "bash"
    assert by_id[tool["parent_span_id"]]["name"] == "capsule.inference"
    task = next(s for s in got.spans if s["name"] == "invoke_agent coder")
    assert task["parent_span_id"] == session["span_id"] and task["attributes"]["gen_ai.usage.output_tokens"] == 40
    shell = next(s for s in got.spans if s["name"] == "capsule.shell")
    assert shell["end"] - shell["start"] == 7_000_000 and shell["attributes"]["command"] == "echo hi"


def test_a_failed_export_is_one_log_line(tmp_path: Path) -> None:
    """A collector that answers 500, and one that is not there: False and a line in otel.log."""
    agent_trace(tmp_path / "trace.jsonl")
    with receiver(status=500) as (url, got):
        assert not otlp.export_session(tmp_path / "trace.jsonl", url + "/v1/traces", log=tmp_path / "otel.log",
                                       timeout=1.0)
    assert got.spans == []
    with receiver() as (url, _):
        closed = url
    assert not otlp.export_session(tmp_path / "trace.jsonl", closed + "/v1/traces", log=tmp_path / "otel.log",
                                   timeout=1.0)
    lines = (tmp_path / "otel.log").read_text().splitlines()
    assert len(lines) == 2 and all("failed" in line for line in lines)


def test_endpoint_precedence() -> None:
    """The manifest's key, then the traces variable as given, then the base variable + /v1/traces."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:4318/", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}
    assert otlp.endpoint("http://m:4318", env) == "http://m:4318/v1/traces"
    assert otlp.endpoint(None, env) == "http://t/x"
    assert otlp.endpoint(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:4318/"}) == "http://b:4318/v1/traces"
    assert otlp.endpoint(None, {}) is None


PLAN = 'steps:\n  - id: say\n    shell: [echo, "{{ task }}"]\noutput: "{{ steps.say.stdout }}"\n'


def _run(tmp_path: Path, manifest_extra: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    capsule = tmp_path / "capsule"
    capsule.mkdir(exist_ok=True)
    (capsule / "murmur.yaml").write_text(
        "name: otel-probe\nversion: 0.3.0\nplan: plan.yaml\ncapabilities:\n  shell:\n    allow: [echo]\n" + manifest_extra)
    (capsule / "plan.yaml").write_text(PLAN)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MURMUR_", "OTEL_"))}
    out = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "run", "--task", "hello", "--json"], cwd=capsule,
                         env={**base, "MURMUR_HOME": str(tmp_path / "home"), **env}, capture_output=True, text=True,
                         timeout=60, check=False)
    ready = json.loads(out.stdout.splitlines()[0])
    return out, Path(ready["records_dir"])


def test_a_session_exports_from_the_manifest_key(tmp_path: Path) -> None:
    """`observability.otel_endpoint` sends the session's spans at its end (a real `mur run`)."""
    with receiver() as (url, got):
        out, records = _run(tmp_path, f"observability:\n  otel_endpoint: {url}\n", {})
    assert out.returncode == 0, out.stderr
    assert "W-SEC-019" not in out.stderr
    names = sorted(s["name"] for s in got.spans)
    assert names == ["capsule.session", "capsule.shell", "invoke_agent otel-probe"]
    first = json.loads((records / "trace.jsonl").read_text().splitlines()[0])
    assert {s["trace_id"] for s in got.spans} == {first["trace_id"]}


def test_an_unreachable_collector_never_fails_the_task(tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT at a closed port: the run still ends ok; otel.log says why."""
    with receiver() as (url, _):
        closed = url
    out, records = _run(tmp_path, "", {"OTEL_EXPORTER_OTLP_ENDPOINT": closed, "OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    assert out.returncode == 0, out.stderr
    assert (records / "out" / "result.txt").read_text().strip() == "hello"
    assert "export" not in out.stderr.lower()  # the exporter's retry lines stay out of the session's stderr
    log = records / "logs" / "otel.log"
    assert "failed" in log.read_text()
