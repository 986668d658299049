"""The sandbox's trace records stay in the session's one tree, end to end through ``mur run``
(spec/containment.md "Network", spec/trace.md ``sandbox_refused``).

A plan step asks the egress proxy for a loopback server that ``network.allow`` does not name:
under advisory the request reaches the server (the control); under scoped and sealed the proxy
refuses it and the session writes a ``sandbox_refused`` record naming the host, parented to
``session_start``, and every record of the trace still has its parent in it.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.sandbox.conftest import backed

from murmur.manifest.model import Containment

pytestmark = pytest.mark.e2e

MANIFEST = ("name: netfence\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  containment: {klass}\n"
            "  shell:\n    allow: [python3]\n")
FETCH = ("import sys, urllib.request\n"
         "try:\n    print('GOT', urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n"
         "except Exception as exc:\n    print('REFUSED', exc)\n")


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"from-the-server"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _run(tmp_path: Path, bin_dir: Path, klass: str, port: int) -> tuple[str, list[dict[str, object]]]:
    capsule = tmp_path / f"capsule-{klass}"
    capsule.mkdir()
    (capsule / "murmur.yaml").write_text(MANIFEST.format(klass=klass))
    argv = ["python3", "-c", FETCH, f"http://127.0.0.1:{port}/"]
    (capsule / "plan.yaml").write_text(f"steps:\n  - id: s\n    shell: {json.dumps(argv)}\n"
                                       'output: "{{ steps.s.stdout }}"\n')
    work = tmp_path / f"work-{klass}"
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    env.pop("MURMUR_SANDBOX_CLASS", None)  # the class under test is the manifest's
    done = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "run", "--task", "go", "--workdir", str(work)],
                          cwd=capsule, capture_output=True, text=True, timeout=120, env=env)
    (trace,) = [t for t in Path(os.environ["MURMUR_HOME"]).rglob("trace.jsonl") if str(work) in str(t)]
    return done.stdout + done.stderr, [json.loads(line) for line in trace.read_text().splitlines()]


@pytest.mark.parametrize("klass", ["scoped", "sealed"])
def test_a_refused_request_is_a_record_of_the_one_tree(tmp_path: Path, bin_dir: Path, server: int,
                                                        klass: str) -> None:
    backed(Containment(klass))
    out, records = _run(tmp_path, bin_dir, "advisory", server)
    assert "GOT from-the-server" in out, out  # the control: advisory reaches the server
    assert not [r for r in records if r["event_type"] == "sandbox_refused"]
    out, records = _run(tmp_path, bin_dir, klass, server)
    assert "GOT from-the-server" not in out and "REFUSED" in out, out
    (start,) = [r for r in records if r["event_type"] == "session_start"]
    (refused,) = [r for r in records if r["event_type"] == "sandbox_refused"]
    assert (refused["host"], refused["port"], refused["scheme"]) == ("127.0.0.1", server, "http")
    assert refused["parent_id"] == start["event_id"]
    assert refused["parent_span_id"] == start["span_id"] and refused["trace_id"] == start["trace_id"]
    ids = {r["event_id"] for r in records}
    assert [r["event_type"] for r in records if r["parent_id"] is None] == ["session_start"]
    assert all(r["parent_id"] in ids for r in records if r["parent_id"] is not None)  # one tree
    assert records[-1]["event_type"] == "session_end"
