"""One `mur demo --keep` run, read as one trace (spec/trace.md; issue 29's "done when").

The run is shared by every test here (a module fixture): a slow `find` keeps the members and
the delegated child busy for a moment, `mur watch --tree` follows the formation from the start,
and every session exports its spans to an OTLP/HTTP receiver the fixture holds. Then:
`mur trace show --tree` prints the formation and the child; every record of every session
carries one trace id; the watch showed the child's events while it ran and ended with the
root; the spans rebuild the tree; the page draws in headless Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import pytest

from e2e._demo import demo_env, make_fixture, running_demo, wait_gone
from observe import chromium
from observe.otlp_receiver import Received, receiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@attrs.define
class DemoRun:
    rc: int
    home: Path
    base: Path
    stderr: str
    formation: str
    journal: list[dict[str, Any]]
    watch_rc: int | None
    watch_lines: list[tuple[int, str]]
    watch_err: str
    spans: list[dict[str, Any]]
    env: dict[str, str]

    def sessions(self) -> dict[str, dict[str, Any]]:
        """id -> the journal's start event."""
        return {e["id"]: e for e in self.journal if e["event"] == "start"}

    def records(self, sid: str) -> list[dict[str, Any]]:
        path = Path(self.sessions()[sid]["records_dir"]) / "trace.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def mur(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "murmur.cli.mur", *argv], env=self.env, capture_output=True,
                              text=True, timeout=60, check=False)


def _slow_find(root: Path) -> Path:
    real = shutil.which("find")
    assert real is not None
    d = root / "slowbin"
    d.mkdir()
    (d / "find").write_text(f"#!/bin/sh\nsleep 1.5\nexec {real} \"$@\"\n")
    (d / "find").chmod(0o755)
    return d


def _read_journal(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("tracedemo")
    target = make_fixture(base)
    env = demo_env(_slow_find(base))
    demo_dir = base / "demo"
    home = demo_dir / "home"
    got: Received
    with receiver() as (url, got):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
        with running_demo(["--home", str(demo_dir), "--keep", str(target)], base, env) as (proc, err_path):
            journal = home / "tree" / "journal.jsonl"
            formation = None
            deadline = time.monotonic() + 120
            while formation is None and time.monotonic() < deadline and proc.poll() is None:
                for ev in _read_journal(journal):
                    frm = (ev.get("lineage") or {}).get("formation_id")
                    if ev.get("event") == "start" and frm:
                        formation = frm
                time.sleep(0.05)
            assert formation is not None, err_path.read_text()
            watch_env = {**env, "MURMUR_HOME": str(home)}
            watch = subprocess.Popen([sys.executable, "-m", "murmur.cli.mur", "watch", "--tree", formation],
                                     env=watch_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            lines: list[tuple[int, str]] = []

            def read() -> None:
                assert watch.stdout is not None
                for line in watch.stdout:
                    lines.append((int(time.time() * 1000), line.rstrip("\n")))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            try:
                rc = proc.wait(timeout=150)
                watch_rc = watch.wait(timeout=30)
            finally:
                if watch.poll() is None:
                    watch.kill()
                    watch.wait()
            reader.join(5)
            assert watch.stdout is not None and watch.stderr is not None
            watch.stdout.close()
            watch_err = watch.stderr.read()
            watch.stderr.close()
            stderr = err_path.read_text()
        assert wait_gone(str(base), 30) == []
        spans = list(got.spans)
    yield DemoRun(rc, home, demo_dir, stderr, formation, _read_journal(home / "tree" / "journal.jsonl"), watch_rc,
                  lines, watch_err, spans, watch_env)


def test_demo_ran_and_named_its_page(run: DemoRun) -> None:
    """The demo completed and its report names the trace page it kept."""
    assert run.rc == 0, run.stderr
    page = run.base / "trace.html"
    assert f"trace page: {page.resolve().as_uri()}" in run.stderr and page.is_file()


def test_show_tree_prints_the_formation_and_its_delegated_child(run: DemoRun) -> None:
    """No address: the newest root, the formation; its members, the check desk it reached over
    HTTP and the desk's delegated child, each once, the child under the desk."""
    out = run.mur("trace", "show", "--tree")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"trace {run.sessions()[next(iter(run.sessions()))]['id'][:0]}")
    assert f"frm_…{run.formation[-4:]}" in lines[0] and "5 sessions" in lines[0]
    rows = {}
    for sid, start in run.sessions().items():
        found = [i for i, ln in enumerate(lines) if f"ses_…{sid[-4:]} {start['capsule']}" in ln]
        assert len(found) == 1, (sid, out.stdout)
        rows[start["capsule"].split("@")[0]] = found[0]
    assert rows["audit-desk"] < rows["audit-pycheck"]
    text = out.stdout
    assert "(delegated)" in text and "delegation → audit-pycheck" in text and "call → checker: completed" in text
    assert "shell " in text and "task tsk_…" in text
    doc = json.loads(run.mur("trace", "show", "--tree", "--json").stdout)
    assert doc["root"] == run.formation and len(doc["trace_ids"]) == 1
    assert sorted(n["id"] for n in doc["nodes"] if n["kind"] == "session") == sorted(run.sessions())


def test_every_record_of_every_session_carries_one_trace_id(run: DemoRun) -> None:
    """One trace id on every record of the five sessions; span ids are 16 hex; the hops link:
    each member's task names the lead's task span, the desk's task the checker's, the child's
    session the desk's task."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    traces: set[str] = set()
    for sid, start in run.sessions().items():
        recs = run.records(sid)
        assert recs, sid
        by_role[start["capsule"].split("@")[0]] = recs
        for r in recs:
            traces.add(r["trace_id"])
            assert len(r["span_id"]) == 16 and int(r["span_id"], 16) >= 0
            assert r["span_id"] == r["event_id"][-16:]
            assert len(r["parent_span_id"]) == 16  # the demo starts every session under its own span
    assert len(traces) == 1 and len(next(iter(traces))) == 32

    def spans(role: str, kind: str) -> set[str]:
        return {r["span_id"] for r in by_role[role] if r["event_type"] == kind}

    def task_parent(role: str, origin: str) -> str:
        return next(r["parent_span_id"] for r in by_role[role] if r["event_type"] == "task_start" and r["origin"] == origin)

    assert task_parent("audit-inventory", "peer") in spans("audit-lead", "task_start")
    assert task_parent("audit-checker", "peer") in spans("audit-lead", "task_start")
    assert task_parent("audit-desk", "event") in spans("audit-checker", "task_start")
    child_start = by_role["audit-pycheck"][0]
    assert child_start["event_type"] == "session_start"
    assert child_start["parent_span_id"] in spans("audit-desk", "task_start")
    members = [by_role[m][0] for m in ("audit-lead", "audit-inventory", "audit-checker")]
    assert {m["parent_span_id"] for m in members} == {run.formation[-16:]}


def test_watch_tree_showed_the_child_while_it_ran_and_ended_with_the_root(run: DemoRun) -> None:
    """`mur watch --tree FRM` printed the child's records before the child ended, and exited 0
    once the formation's members had ended."""
    assert run.watch_rc == 0, run.watch_err
    child = next(sid for sid, s in run.sessions().items() if s["capsule"].startswith("audit-pycheck"))
    child_end = next(r for r in run.records(child) if r["event_type"] == "session_end")["timestamp"]
    seen = [(at, line) for at, line in run.watch_lines if f"ses_…{child[-4:]} audit-pycheck" in line]
    assert seen, "\n".join(line for _, line in run.watch_lines)
    assert seen[0][0] < child_end, (seen[0], child_end)
    assert any("shell exit 0" in line for _, line in seen)
    lead = next(sid for sid, s in run.sessions().items() if s["capsule"].startswith("audit-lead"))
    lead_end = next(r for r in run.records(lead) if r["event_type"] == "session_end")["timestamp"]
    assert run.watch_lines[-1][0] >= lead_end - 1000
    assert f"frm_…{run.formation[-4:]} ended" in run.watch_err


def test_spans_reach_the_collector_and_rebuild_the_tree(run: DemoRun) -> None:
    """Every session exported its spans (OTEL_EXPORTER_OTLP_ENDPOINT, passed down to the child)
    and the launcher its formation's: five capsule.session spans in one trace, and from the
    child's session span the parent links climb through the desk's task, the checker's task and
    the lead's task to the lead's session and the formation."""
    sessions = {s["attributes"]["murmur.session_id"]: s for s in run.spans if s["name"] == "capsule.session"}
    assert sorted(sessions) == sorted(run.sessions())
    assert len({s["trace_id"] for s in run.spans}) == 1
    by_id = {s["span_id"]: s for s in run.spans}
    roles = {sid: s["capsule"].split("@")[0] for sid, s in run.sessions().items()}
    owner = {}
    for sid in run.sessions():
        for r in run.records(sid):
            owner[r["span_id"]] = roles[sid]
    child = next(sid for sid, role in roles.items() if role == "audit-pycheck")
    at, climbed = sessions[child], []
    while at is not None:
        climbed.append((owner.get(at["span_id"]), at["name"]))
        at = by_id.get(at["parent_span_id"] or "")
    assert climbed[0] == ("audit-pycheck", "capsule.session")
    assert ("audit-desk", "invoke_agent audit-desk") in climbed
    assert ("audit-checker", "invoke_agent audit-checker") in climbed
    assert climbed[-2] == ("audit-lead", "capsule.session")
    assert climbed[-1] == (None, "invoke_agent audit")  # the launcher's formation span, the members' parent
    top = next(s for s in run.spans if s["span_id"] == run.formation[-16:])
    assert top["attributes"]["murmur.formation_id"] == run.formation and top["attributes"]["exit_status"] == 0
    assert any(s["name"] == "capsule.shell" for s in run.spans)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))

    def with_class(self, cls: str) -> list[dict[str, str]]:
        return [a for _, a in self.found if cls in a.get("class", "").split()]


def test_page_draws_in_headless_chromium(run: DemoRun, tmp_path_factory: pytest.TempPathFactory,
                                         request: pytest.FixtureRequest) -> None:
    """`mur trace view --html` of the run, in Debian's chromium: a node per session, an edge per
    member call, door call and delegation, a lane per session, no console message; a screenshot
    is saved and its path printed."""
    exe = chromium.binary()
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it as root)")
    page = tmp_path_factory.mktemp("page") / "tree.html"
    out = run.mur("trace", "view", "--html", str(page), run.formation)
    assert out.returncode == 0 and out.stdout.strip() == f"page: {page.resolve().as_uri()}", out.stderr
    dom, console = chromium.dump_dom(page)
    assert console == []
    bad = page.with_name("bad.html")  # the negative control: a console error is seen
    bad.write_text('<html><body><script>console.error("seen");</script></body></html>')
    assert any('"seen"' in line for line in chromium.dump_dom(bad)[1])
    els = _Elements()
    els.feed(dom)
    body = next(a for t, a in els.found if t == "body")
    assert body.get("data-drawn") == "1" and "data-errors" not in body
    nodes = [a for a in els.with_class("node") if a.get("data-kind") == "session"]
    assert sorted(a["data-id"] for a in nodes) == sorted(run.sessions())
    edges = [(a["data-kind"], a["data-refused"]) for a in els.with_class("edge")]
    assert sorted(e for e in edges if e[0] != "member") == [("call", "false")] * 3 + [("delegation", "false")]
    assert edges.count(("member", "false")) == 3
    lanes = [a["data-session"] for a in els.with_class("lane")]
    assert sorted(lanes) == sorted(run.sessions())
    assert lanes.index(next(s for s in lanes if run.sessions()[s]["capsule"].startswith("audit-desk"))) < \
        lanes.index(next(s for s in lanes if run.sessions()[s]["capsule"].startswith("audit-pycheck")))
    assert {a.get("data-kind") for a in els.with_class("span")} >= {"task", "shell", "delegation", "teardown"}
    shot = chromium.screenshot(page, Path(os.environ.get("MURMUR_TRACE_SCREENSHOT",
                                                         str(tmp_path_factory.getbasetemp() / "trace-page.png"))))
    assert shot.is_file() and shot.stat().st_size > 10_000
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"trace page: {page}  screenshot: {shot}")
