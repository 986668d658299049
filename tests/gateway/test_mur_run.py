"""`mur run` of an agent capsule under its own gateway (real processes; spec/gateway.md).

The root starts the gateway; its driver calls through it with a placeholder; its commands are
never handed the key; ``--budget-tokens`` refuses the call
after the budget is spent, and the trace names the node.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from agent.scripted import Reply, ScriptedServer, oa_text, oa_tools
from agent.test_e2e_run import KEY, Mur, capsule, mur_runner, start_mur, trace_records  # noqa: F401

pytestmark = pytest.mark.e2e


@pytest.fixture
async def provider(nursery: trio.Nursery) -> ScriptedServer:
    server = ScriptedServer(keys={KEY})  # it checks the key, as a real provider does
    await nursery.start(server.serve)
    return server


async def _run(nursery: trio.Nursery, started: list[Mur], tmp_path: Path, provider: ScriptedServer,
               *extra: str, gateway: str | None = None) -> tuple[int, Mur, list[dict[str, object]]]:
    cap, work, env = capsule(tmp_path, provider.url + "/v1")
    # on by default for a root that calls models (spec/gateway.md "When a root runs one")
    env = {k: v for k, v in env.items() if k != "MURMUR_GATEWAY"}
    if gateway is not None:
        env["MURMUR_GATEWAY"] = gateway
    m = await start_mur(nursery, started, ["--manifest", str(cap), "--workdir", str(work), "--no-env-file",
                                           *extra, "--task", "go"], cwd=tmp_path, env=env)
    with trio.fail_after(60):
        code = await m.proc.wait()
        await m.drained.wait()
    return code, m, trace_records(tmp_path / "home")


async def test_the_root_calls_through_its_gateway_and_its_commands_never_see_the_key(
    provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]  # noqa: F811
) -> None:
    provider.add(
        Reply(oa_tools(("c1", "cat", {"args": ["/proc/self/environ"]}), prompt=20, completion=3)),
        Reply(oa_text("done", prompt=30, completion=2)),
    )
    code, m, records = await _run(nursery, mur_runner, tmp_path, provider)
    assert code == 0, m.stderr_text
    assert [r.headers["authorization"] for r in provider.requests] == [f"Bearer {KEY}"] * 2
    assert provider.refused == []  # every call it answered carried the real key
    command_env = json.dumps(provider.requests[1].body["messages"])  # what `cat` printed
    assert "TRACEPARENT=" in command_env  # the command's environment was read
    assert KEY not in command_env and "API_KEY=" not in command_env
    (start,) = [r for r in records if r["event_type"] == "session_start"]
    gateway = start["gateway"]
    assert isinstance(gateway, dict) and list(gateway["keys"].values()) == ["${API_KEY}"]
    calls = [r for r in records if r["event_type"] == "model_call"]
    assert [(c["session"], c["tokens_in"], c["tokens_out"], c["status"]) for c in calls] == [
        (start["session_id"], 20, 3, 200), (start["session_id"], 30, 2, 200)]
    assert all(isinstance(c["latency_ms"], float) for c in calls)
    # one record per call, with its lineage: the task, the tree's root, the parent node
    (task_start,) = [r for r in records if r["event_type"] == "task_start"]
    assert [(c["task"], c["root"], c["parent"]) for c in calls] == [(task_start["task_id"], start["session_id"], None)] * 2
    assert all("model" in c for c in calls)  # as the provider reports it (the scripted one names none)
    assert len(calls) == len(provider.requests)
    assert KEY not in json.dumps(records)


async def test_murmur_gateway_off_sends_the_calls_straight_to_the_provider(
    provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]  # noqa: F811
) -> None:
    """The control of the test above: with MURMUR_GATEWAY=off no gateway runs."""
    provider.add(Reply(oa_text("done", prompt=30, completion=2)))
    code, m, records = await _run(nursery, mur_runner, tmp_path, provider, gateway="off")
    assert code == 0, m.stderr_text
    assert len(provider.requests) == 1
    (start,) = [r for r in records if r["event_type"] == "session_start"]
    assert "gateway" not in start
    assert not [r for r in records if r["event_type"] == "model_call"]


async def test_a_tree_budget_refuses_the_call_after_it_is_spent(
    provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]  # noqa: F811
) -> None:
    provider.add(
        Reply(oa_tools(("c1", "ls", {"args": []}), prompt=50, completion=8)),
        Reply(oa_tools(("c2", "ls", {"args": []}), prompt=60, completion=8)),
        Reply(oa_text("never asked")),
    )
    code, m, records = await _run(nursery, mur_runner, tmp_path, provider, "--budget-tokens", "100")
    assert code != 0
    assert "E-GWY-004" in m.stderr_text, m.stderr_text
    assert len(provider.requests) == 2  # 58, then 126 of 100: the third call never left
    (start,) = [r for r in records if r["event_type"] == "session_start"]
    (reached,) = [r for r in records if r["event_type"] == "spend_ceiling_reached"]
    assert reached["node"] == start["session_id"] and reached["spent_tokens"] == 126
    # the root's `mur ps --tree --json` shows the spend by node (spec/tree.md "TOKENS")
    env = {**os.environ, "MURMUR_HOME": str(tmp_path / "home")}
    ps = await trio.run_process([sys.executable, "-m", "murmur.cli.mur", "ps", "--tree", "--json"], env=env,
                                capture_stdout=True)
    (root,) = [r for r in json.loads(ps.stdout)["roots"] if r["id"] == start["session_id"]]
    assert root["tokens"] == {"own": 126, "subtree": 126, "budget": 100}
    shown = await trio.run_process([sys.executable, "-m", "murmur.cli.mur", "ps", "--tree", "--all"], env=env,
                                   capture_stdout=True)
    text = shown.stdout.decode()
    assert "TOKENS" in text.splitlines()[0] and "126/126" in text
