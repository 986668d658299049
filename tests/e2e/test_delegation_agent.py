"""`delegate-task` end to end: an agent parent (scripted OpenAI-compatible provider on loopback),
a real mur-roost, a real child; a refusal as a plain sentence; the child watch expiring.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from agent.scripted import oa_text, oa_tools
from murmur.registry import install

from ._delegation import (
    TOKEN,
    Procs,
    alive,
    completion_settled,
    descendants,
    of,
    pids_naming,
    plan_capsule,
    roost_status,
    send_task,
    status_text,
    token_hits,
    trace,
    wait_until,
)

pytestmark = pytest.mark.e2e

DELEGATOR = """\
name: delegator
version: 0.1.0
artifacts:
  - name: murmur-driver-openai
    version: 0.2.0
    runtime: driver
capabilities:
  shell:
    allow: [sleep]
  spawn:
    allow: [sleeper]
inference:
  driver:
    artifact: murmur-driver-openai
  endpoint: {endpoint}
  model: local-model
  api_key: ${{API_KEY}}
  max_tokens: 256
  max_turns: 4
  system_prompt: Delegate the work.
lifecycle:
  task_acceptance: queue
  queue_depth: 4
  after_task: sleep
  delegation_deadline_secs: 2
"""


class Provider:
    """A scripted OpenAI-compatible endpoint in a thread; records every request body."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with provider.lock:
                    provider.requests.append(body)
                    reply = provider.replies.pop(0) if provider.replies else oa_text("(script ended)")
                out = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool-result contents of one provider request."""
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


@pytest.fixture
def setup_env(tmp_path: Path) -> Iterator[tuple[Procs, Path]]:
    home = tmp_path / "home"
    env = dict(os.environ)
    env.update({"MURMUR_HOME": str(home), "API_KEY": "sk-test-key-0000"})
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_DELEGATION_TIMEOUT_SECS"):
        env.pop(name, None)
    procs = Procs(tmp_path, env)
    try:
        yield procs, home
    finally:
        procs.close()


class TestDelegateTask:
    def test_refusal_started_and_child_watch_expiry(self, setup_env: tuple[Procs, Path], tmp_path: Path) -> None:
        """A refused call is a plain sentence; a started one returns at once; the watch ends the child."""
        procs, home = setup_env
        provider = Provider([
            oa_tools(("c1", "delegate-task", {"capsule": "sleeper", "version": "9.9.9", "task": "1"})),
            oa_tools(("c2", "delegate-task", {"capsule": "sleeper", "version": "0.1.0", "task": "30"})),
            oa_text("delegated"),
            oa_text("noted the outcome"),
        ])
        try:
            src = tmp_path / "src" / "delegator"
            src.mkdir(parents=True)
            (src / "murmur.yaml").write_text(DELEGATOR.format(endpoint=provider.url))
            nap = 'steps:\n  - id: nap\n    shell: [sleep, "{{ task }}"]\noutput: "slept {{ task }}"\n'
            sleeper = plan_capsule(tmp_path / "src", "sleeper", plan=nap, shell=["sleep"], after="exit", acceptance="single")
            with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
                install(src, global_=True)
                install(sleeper, global_=True)
            roost, url = procs.roost("--spawn-allow", "delegator", env={**procs.env})
            work = tmp_path / "work"
            parent = procs.mur_run("delegator", work, url)
            task = send_task(parent.ready["url"], "please delegate")
            assert task["status"]["state"] == "TASK_STATE_COMPLETED" and status_text(task) == "delegated"

            refused = tool_results(provider.requests[1])[-1]
            assert "{" not in refused and "could not be resolved" in refused  # the daemon's sentence, no JSON
            started_text = tool_results(provider.requests[2])[-1]
            started = json.loads(started_text[started_text.index("{"): started_text.rindex("}") + 1])
            assert started["status"] == "started" and started["capsule"] == "sleeper"
            assert started["child_workdir"].startswith(".murmur/children/sleeper-")
            child_dir = work / started["child_workdir"]
            child_pids = descendants(pids_naming(str(child_dir)))
            assert child_pids

            def arrived() -> dict[str, Any] | None:
                recs = trace(parent.ready["records_dir"])
                got = [r for r in of(recs, "task_start") if r["origin"] == "completion"]
                return got[0] if got else None

            completion_task = wait_until(arrived, timeout=30, what="the terminated completion task")
            assert completion_task["lane"] == "bg"
            data = wait_until(lambda: completion_settled(child_dir), timeout=30, what="the record's delivery")
            assert (data["status"], data["reported_by"], data["delivered"]) == ("terminated", "launcher", True)
            assert data["delegation_id"] == started["delegation_id"]
            assert "lifecycle.delegation_deadline_secs (2 s)" in data["detail"]
            wait_until(lambda: not alive(child_pids), timeout=30, what="the child to be ended")
            wait_until(lambda: len(provider.requests) == 4, timeout=30, what="the completion turn")
            final_user = [m for m in provider.requests[3]["messages"] if m.get("role") == "user"][-1]
            assert started["delegation_id"] in str(final_user["content"])
            records = trace(parent.ready["records_dir"])
            outcomes = {(r["delegation_id"], r["outcome"]) for r in of(records, "delegation")}
            assert (None, "refused") in outcomes and (started["delegation_id"], "terminated") in outcomes
            sid = parent.ready["session_id"]
            wait_until(lambda: roost_status(url, sid)["live_children"] == 0, timeout=30, what="live_children 0")
            for body in provider.requests:
                assert not TOKEN.search(json.dumps(body).encode())
            assert token_hits([work, home / "records", tmp_path / "logs"], [parent.pid, roost.pid]) == []
        finally:
            provider.close()
