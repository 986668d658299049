"""A threaded agent over real `mur run` processes: two tasks in one context, SIGKILL, `--resume @1`.

The provider is a scripted OpenAI-compatible server in the test's Trio loop; it records what
each call sent, so the test asserts what the model received (spec/conversations.md).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest
import trio

from .scripted import Reply, ScriptedServer, oa_text
from .test_e2e_run import Mur, mur_runner, start_mur  # noqa: F401  (mur_runner is a fixture)

pytestmark = pytest.mark.e2e

KEY = "sk-e2e-SECRET-resume-1234567890"

MANIFEST = """\
name: talker
version: 0.1.0
inference:
  driver:
    artifact: murmur-driver-openai
  endpoint: {endpoint}
  model: local-model
  api_key: ${{API_KEY}}
  max_turns: 2
lifecycle:
  task_acceptance: queue
  after_task: sleep
  conversation: threaded
"""


async def _ready(m: Mur) -> dict[str, object]:
    with trio.fail_after(60):
        while b"\n" not in m.stdout:
            if m.proc.poll() is not None:
                raise AssertionError(m.stderr_text)
            await trio.sleep(0.05)
    return dict(json.loads(m.stdout.split(b"\n", 1)[0]))


def _send(text: str, context: str) -> dict[str, object]:
    msg = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}], "contextId": context}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": msg, "configuration": {"returnImmediately": True}}}


def _contents(body: object) -> list[str]:
    """The messages' texts, with the fence of an untrusted wire task taken off."""
    assert isinstance(body, dict)
    fence = "<untrusted-content source=task:event>\n"
    return [(m.get("content") or "").removeprefix(fence).removesuffix("\n</untrusted-content>")
            for m in body["messages"]]


async def test_a_killed_threaded_session_resumes_its_context(
    provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]  # noqa: F811
) -> None:
    """Task 2 sends task 1's exchange; after SIGKILL mid-task 2, `mur run --resume @1` sends both."""
    cap = tmp_path / "capsule"
    cap.mkdir()
    (cap / "murmur.yaml").write_text(MANIFEST.format(endpoint=provider.url + "/v1"))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MURMUR_HOME": str(tmp_path / "home"), "API_KEY": KEY}
    first_reached = trio.Event()
    provider.add(Reply(oa_text("Noted: the colour is teal.")), Reply(hold=True, arrived=first_reached))
    args = ["--manifest", str(cap), "--workdir", str(work), "--no-env-file"]
    m = await start_mur(nursery, mur_runner, [*args, "--json"], cwd=tmp_path, env=env)
    ready = await _ready(m)
    url = str(ready["url"])
    async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as client:
        r = await client.post(url + "/", json=_send("the colour is teal", "ctx_talk"))
        task1 = r.json()["result"]["task"]["id"]
        with trio.fail_after(30):
            while True:
                got = await client.post(url + "/", json={"jsonrpc": "2.0", "id": 2, "method": "GetTask",
                                                         "params": {"id": task1}})
                if got.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
                    break
                await trio.sleep(0.05)
        await client.post(url + "/", json=_send("what colour?", "ctx_talk"))
    with trio.fail_after(30):
        await provider.holding.wait()
    assert _contents(provider.requests[1].body) == ["the colour is teal", "Noted: the colour is teal.", "what colour?"]
    os.killpg(m.proc.pid, signal.SIGKILL)
    with trio.fail_after(30):
        await m.proc.wait()

    provider.add(Reply(oa_text("It was teal.")))
    r2 = await start_mur(nursery, mur_runner, [*args, "--resume", "@1", "--task", "remind me"], cwd=tmp_path, env=env)
    with trio.fail_after(60):
        code = await r2.proc.wait()
        await r2.drained.wait()
    assert code == 0, r2.stderr_text
    assert r2.stdout.decode() == "It was teal.\n"
    assert _contents(provider.requests[2].body) == [
        "the colour is teal", "Noted: the colour is teal.", "what colour?", "remind me"]
    traces = sorted((tmp_path / "home" / "records").rglob("trace.jsonl"))
    resumed = [json.loads(x) for t in traces for x in t.read_text().splitlines()[:1] if '"resumed_from": "' in x
               or '"resumed_from":"' in x]
    assert len(resumed) == 1 and resumed[0]["context_id"] == "ctx_talk"
    assert resumed[0]["resumed_from"].endswith(str(ready["session_id"]))
    assert "formation_id" not in resumed[0]
