"""Seed 002's acceptance scenario on capsules, with real agent CLIs (issue 20, Proof).

`lead` (Claude Code) has its Bash tool run the link `reviewer "…"`; `reviewer` (Claude Code)
runs the link `fixer "…"`; `fixer` (Codex) runs a shell command in Codex's own sandbox and
answers. Every CLI is the real one from npm: the Claude Code capsules talk to scripted
Anthropic-compatible servers, the Codex capsule to a scripted OpenAI Responses server, all on
loopback. A real mur-roost referees; every session is a real `mur run`.

The scenario's processes are found by containment and the process tree only: the lead's
`mur run` and its descendants, plus every process in the cgroup units beneath it
(:func:`scenario_pids`), never by environment or command line.

The three talk to one provider (one endpoint origin: the scripted Anthropic and Responses
servers answer on one port, :mod:`e2e._models` ``keys=``) that checks the credential as a
real provider does, and all three manifests name `api_key: ${LEAD_KEY}`; only the lead's
`mur run` holds LEAD_KEY (a delegated child gets a variable only through
`capabilities.env.allow` of every session above it, spec/delegation.md, which would put the
key into the environment of the lead's and reviewer's commands). The lead's gateway attaches
it to every call of the tree (spec/gateway.md "Keys"), every CLI holding the placeholder;
the provider refuses the placeholder itself. The scan covers every process of the Codex
capsule, Codex itself included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from agent.npm_cli import npm_bin
from agent.scripted import Reply, an_text, an_tools, carried_key
from agent.scripted_openai import ModelReply, exec_call, function_outputs, input_texts, message
from murmur.containment import cgroup
from murmur.containment.host import CGROUP, detect, pid_cgroup
from murmur.registry import install

from ._delegation import (
    MUR,
    TOKEN,
    Procs,
    alive,
    descendants,
    of,
    send_task,
    status_text,
    submit_task,
    trace,
    wait_until,
)
from ._models import ModelServers, claude_side, model_servers

pytestmark = pytest.mark.e2e

LEAD_KEY = "sk-ant-lead-SECRET-5e0c7b2d9f41a3"
PLACEHOLDER = "murmur-gateway-placeholder"
GRACE = 25.0  # seconds: the cascade's bound (spec/tree.md, "one grace for every depth")


def agent_capsule(root: Path, name: str, *, endpoint: str, spawn: tuple[str, ...] = (),
                  shell: tuple[str, ...] = ("echo", "sleep"), key: str | None = None,
                  command: str = "claude", budget: int | None = 200000, net: tuple[str, ...] = ()) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name}", "version: 0.1.0", f"description: the {name} of the scenario", "capabilities:",
             "  shell:", f"    allow: [{', '.join(shell)}]"]
    if spawn:
        lines += ["  spawn:", f"    allow: [{', '.join(spawn)}]"]
    if net:  # a delegated child's provider must be one its parent's network.allow covers (spec/gateway.md)
        lines += ["  network:", f"    allow: [{', '.join(net)}]"]
    lines += ["inference:", "  transport: process", f"  command: {command}", "  model: test-model",
              f"  endpoint: {endpoint}", "  max_turns: 4", f"  system_prompt: You are the {name}."]
    if budget is not None:  # an agent reaches an agent capsule only under a ceiling (spec/routing.md)
        lines.append(f"  budget_tokens: {budget}")
    if key:
        lines.append(f"  api_key: ${{{key}}}")
    lines += ["lifecycle:", "  task_acceptance: queue", "  queue_depth: 4", "  after_task: sleep"]
    (d / "murmur.yaml").write_text("\n".join(lines) + "\n")
    return d


@pytest.fixture(scope="module")
def clis() -> Path:
    claude = npm_bin("@anthropic-ai/claude-code", "claude")
    codex = npm_bin("@openai/codex", "codex")
    assert claude == codex, (claude, codex)  # one node_modules/.bin for both
    return claude


@pytest.fixture(scope="module")
def models() -> Iterator[ModelServers]:
    # one provider that checks the key (only LEAD_KEY opens it)
    with model_servers({"lead": claude_side, "reviewer": claude_side}, responses=("fixer",),
                       keys={LEAD_KEY}) as servers:
        yield servers


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, models: ModelServers) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("harness-home")
    src = tmp_path_factory.mktemp("harness-src")
    # every manifest names the same endpoint (origin) and reference: the root's key opens it for all
    dirs = [
        agent_capsule(src, "fixer", endpoint=models.responses("fixer").base_url, command="codex", key="LEAD_KEY"),
        agent_capsule(src, "loose", endpoint=models.responses("fixer").base_url, command="codex", budget=None,
                      key="LEAD_KEY"),
        agent_capsule(src, "reviewer", endpoint=models["reviewer"].url, spawn=("fixer",), net=("127.0.0.1",),
                      key="LEAD_KEY"),
        agent_capsule(src, "lead", endpoint=models["lead"].url, spawn=("reviewer", "fixer", "loose"),
                      key="LEAD_KEY", net=("127.0.0.1",), shell=("echo", "sleep", "curl")),
    ]
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        for d in dirs:
            install(d, global_=True)
    yield home


@pytest.fixture
def procs(tmp_path: Path, home: Path, clis: Path, models: ModelServers) -> Iterator[Procs]:
    for server in models.servers.values():
        server.script.clear()
        server.requests.clear()
        server.answered.clear()
        server.refused.clear()
        server.holding = type(server.holding)()
    for responses in models.openai.values():
        responses.script.clear()
        responses.requests.clear()
        responses.refused.clear()
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    env["PATH"] = f"{clis}:{env.get('PATH', '/usr/bin:/bin')}"
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE", "MURMUR_SPAWN",
                 "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                 "CODEX_HOME", "LEAD_KEY"):
        env.pop(name, None)
    p = Procs(tmp_path, env)
    try:
        yield p
    finally:
        p.close()


def lead(procs: Procs, tmp_path: Path, *extra: str) -> tuple[Any, str]:
    """mur-roost and the lead's `mur run` (the only process holding LEAD_KEY)."""
    _roost, url = procs.roost("--spawn-allow", "lead")
    env = {**procs.env, "LEAD_KEY": LEAD_KEY}
    p = procs.mur_run("lead", tmp_path / "work", url, *extra, env=env)
    return p, p.ready["url"]


def bash(call_id: str, command: str, msg_id: str) -> Reply:
    return Reply(an_tools((call_id, "Bash", {"command": command, "description": "run it"}), msg_id=msg_id))


def tool_result(server_requests: list[Any], index: int) -> str:
    """The text of the last tool_result the model received in request ``index``."""
    body = server_requests[index].body
    block = body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result", block
    content = block["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def tree(env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run([*MUR, "ps", "--tree", "--json", "--all"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    roots: list[dict[str, Any]] = json.loads(done.stdout)["roots"]
    return roots


def chain(roots: list[dict[str, Any]], root_id: str) -> list[dict[str, Any]]:
    """root → its first child → that one's first child, as far as it goes."""
    (node,) = [r for r in roots if r["id"] == root_id]
    out = [node]
    while any(c["node"] == "session" for c in node.get("children", [])):  # sessions only
        node = next(c for c in node["children"] if c["node"] == "session")
        out.append(node)
    return out


def scenario_pids(env: dict[str, str], lead_pid: int, lead_session: str) -> set[int]:
    """Every live process of the scenario, by the process trees and by containment: the
    sessions `mur ps --tree` records under the lead (their pids) and their descendants (the
    CLIs, their shells, the links and commands, Codex's sandbox and what runs in it), plus
    every process in the lead session's cgroup unit `murmur-<ses_id>` and its sub-units (on a
    cgroup host), escapees that left the process tree included."""
    sessions = {lead_pid, *(n["pid"] for n in chain(tree(env), lead_session) if isinstance(n.get("pid"), int))}
    found = descendants(sessions)
    host = detect()
    own = pid_cgroup(lead_pid)
    if host.name == CGROUP and host.mount is not None and own is not None:
        unit = host.mount / own.lstrip("/") / f"murmur-{lead_session}"
        found |= set(cgroup.procs(unit))
    return alive(found)


def test_three_levels_answers_flow_up_with_lineage(procs: Procs, tmp_path: Path, models: ModelServers,
                                                   home: Path) -> None:
    models["lead"].add(bash("toolu_l1", 'reviewer "review the patch in src/"', "msg_l1"),
                       Reply(an_text("LEAD: the patch is reviewed and fixed.", msg_id="msg_l2")))
    models["reviewer"].add(bash("toolu_r1", 'fixer "fix the off-by-one"', "msg_r1"),
                           Reply(an_text("REVIEWER: approved after the fixer's change.", msg_id="msg_r2")))
    fixer = models.responses("fixer")
    fixer.add(ModelReply([exec_call("echo FIXED-BY-$((6*7))")]),
              ModelReply([message("FIXER: FIXED-BY-42")]))
    p, url = lead(procs, tmp_path)
    task = send_task(url, "Get the patch reviewed.", timeout=240)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    answer = "".join(part.get("text", "") for a in task.get("artifacts", []) for part in a.get("parts", []))
    assert answer == "LEAD: the patch is reviewed and fixed."
    # each answer flowed up as the tool result its parent's model read
    first, second = fixer.model_calls
    # the link's task reached Codex fenced (a delegated task is untrusted input)
    fenced = "<untrusted-content source=task:event>\nfix the off-by-one\n</untrusted-content>"
    assert input_texts(first.body, "user")[-1].strip() == fenced, input_texts(first.body, "user")
    assert "You are the fixer." in "\n".join(input_texts(first.body, "developer"))
    assert first.headers["authorization"] == f"Bearer {LEAD_KEY}"  # attached by the lead's gateway
    (ran,) = function_outputs(second.body).values()
    assert "Process exited with code 0" in ran and "FIXED-BY-42" in ran, ran
    from_fixer = tool_result(models["reviewer"].requests, 1)
    assert "FIXER: FIXED-BY-42" in from_fixer, from_fixer
    from_reviewer = tool_result(models["lead"].requests, 1)
    assert "REVIEWER: approved after the fixer's change." in from_reviewer, from_reviewer
    # the lead's model had its `mur context` in the system prompt
    system = json.dumps(models["lead"].requests[0].body["system"])
    assert "You are the lead." in system and "Capsules you may delegate to" in system and "reviewer" in system
    # lineage: three sessions, lead → reviewer → fixer
    nodes = chain(tree(procs.env), p.ready["session_id"])
    assert [n["capsule"].split("@")[0].rsplit("/", 1)[-1] for n in nodes] == ["lead", "reviewer", "fixer"], nodes
    assert [n["lineage"]["depth"] for n in nodes] == [1, 2, 3]
    assert nodes[1]["lineage"]["parent"] == f"session:{nodes[0]['id']}"
    assert nodes[2]["lineage"]["parent"] == f"session:{nodes[1]['id']}"
    # the tree's gateway (on by default; spec/gateway.md): every model call of all three went
    # through the lead's gateway, each one record with its lineage; the key was attached there
    records = trace(p.ready["records_dir"])
    calls = of(records, "model_call")
    ids = [n["id"] for n in nodes]
    assert {c["session"] for c in calls} == set(ids), calls
    assert {(c["session"], c["parent"]) for c in calls} == {(ids[0], None), (ids[1], ids[0]), (ids[2], ids[1])}
    assert all(c["status"] == 200 and c["root"] == ids[0] for c in calls), calls
    assert models["lead"].requests[0].headers.get("x-api-key") == LEAD_KEY  # the CLI held the placeholder
    assert_only_the_key_opened(models)
    assert [n["tokens"]["subtree"] for n in nodes] == [
        sum(c["tokens_in"] + c["tokens_out"] for c in calls if c["session"] in ids[i:]) for i in range(3)]
    # the lead's trace: two turns, one Bash call, the link request
    assert [r["decision"] for r in of(records, "inference")] == ["tool_call", "end_turn"]
    assert [r["tool_name"] for r in of(records, "tool_call")] == ["Bash"]
    assert [r["outcome"] for r in of(records, "link_request")] == ["ok"]
    # the fixer's trace: Codex's one turn with its shell command
    (fixer_trace_path,) = (tmp_path / "work").rglob(f"{nodes[2]['id']}/trace.jsonl")  # in the child's workdir
    fixer_trace = trace(fixer_trace_path.parent)
    assert [r["tool_name"] for r in of(fixer_trace, "tool_call")] == ["command_execution"], fixer_trace
    assert [r.get("harness") for r in of(fixer_trace, "inference")] == ["codex"], of(fixer_trace, "inference")
    scan_for_secrets(home, tmp_path, procs)


def test_ctrl_c_at_the_root_ends_all_three(procs: Procs, tmp_path: Path, models: ModelServers,
                                           home: Path) -> None:
    models["lead"].add(bash("toolu_l1", 'reviewer "review slowly"', "msg_l1"),
                       Reply(an_text("never asked", msg_id="msg_l2")))
    models["reviewer"].add(bash("toolu_r1", 'fixer "fix slowly"', "msg_r1"),
                           Reply(an_text("never asked", msg_id="msg_r2")))
    # the fixer's command runs (in Codex's sandbox) until the Ctrl-C
    models.responses("fixer").add(ModelReply([exec_call("echo started > marker && exec sleep 300")]),
                                  ModelReply([message("never asked")]))
    p, url = lead(procs, tmp_path)
    submit_task(url, "Get the patch reviewed.")
    work = tmp_path / "work"
    wait_until(lambda: list(work.glob(".murmur/children/reviewer-*/.murmur/children/fixer-*/marker")),
               timeout=180, what="the fixer's command running")
    session = p.ready["session_id"]
    pids = scenario_pids(procs.env, p.pid, session)
    commands = {pid: _cmd(pid) for pid in pids}
    assert sum("claude" in c for c in commands.values()) >= 2, commands  # two Claude Code CLIs
    assert any("codex" in c for c in commands.values()), commands  # the Codex CLI
    assert any(c.startswith(("/bin/bash", "bash")) for c in commands.values()), commands  # their shells
    # Codex's own sandbox (bubblewrap) under advisory; under scoped or sealed ours encloses it
    # and Codex's is turned off (spec/agent.md "Inside the session's sandbox")
    enclosed = os.environ.get("MURMUR_SANDBOX_CLASS", "advisory") in ("scoped", "sealed")
    assert any(c.startswith("bwrap ") for c in commands.values()) is not enclosed, commands
    assert any(c.startswith("sleep 300") for c in commands.values()), commands  # the fixer's command, in it
    nodes = chain(tree(procs.env), p.ready["session_id"])
    assert [n["state"] for n in nodes] == ["running"] * 3, nodes
    assert scan_processes(procs) >= 6  # the sessions, the CLIs, their shells and links, while busy
    began = time.monotonic()
    os.kill(p.pid, signal.SIGINT)
    wait_until(lambda: not alive(pids), timeout=GRACE, what=f"every process gone (left: {alive(pids)})")
    took = time.monotonic() - began
    print(f"\nCtrl-C at the root → {len(pids)} processes gone in {took:.2f}s (grace {GRACE:.0f}s)")
    ended = wait_until(lambda: _all_ended(procs.env, session), timeout=30, what="three ended")
    assert [(n["state"], n["status"]) for n in ended] == [("ended", "canceled")] * 3, ended
    assert_only_the_key_opened(models)
    scan_for_secrets(home, tmp_path, procs)


def _all_ended(env: dict[str, str], root: str) -> list[dict[str, Any]] | None:
    nodes = chain(tree(env), root)
    return nodes if len(nodes) == 3 and all(n["state"] == "ended" for n in nodes) else None


def test_narrowed_spawn_set_is_126_seen_by_the_model(procs: Procs, tmp_path: Path, models: ModelServers,
                                                     home: Path) -> None:
    models["lead"].add(bash("toolu_l1", 'fixer "skip the reviewer"', "msg_l1"),
                       Reply(an_text("LEAD: fixer is not mine to call.", msg_id="msg_l2")))
    _p, url = lead(procs, tmp_path, "--spawn", "reviewer")
    task = send_task(url, "Call the fixer directly.", timeout=120)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    seen = tool_result(models["lead"].requests, 1)
    assert "126" in seen, seen
    assert "spawn refused: 'fixer' is not in this session's spawn set (narrowed by --spawn / MURMUR_SPAWN)" in seen
    assert not models.responses("fixer").requests  # no fixer session ever asked its model
    assert_only_the_key_opened(models)
    scan_for_secrets(home, tmp_path, procs)


def test_a_link_to_an_agent_without_a_ceiling_is_refused_with_the_rule(
        procs: Procs, tmp_path: Path, models: ModelServers, home: Path) -> None:
    """`loose` is an agent capsule without `inference.budget_tokens`: the lead's link to it is
    refused (125) with the rule's sentence and the routing line, which the lead's model reads;
    no `loose` session starts. The capped `fixer` beside it is reached in the test above."""
    models["lead"].add(bash("toolu_l1", 'loose "fix it without a budget"', "msg_l1"),
                       Reply(an_text("LEAD: loose has no ceiling.", msg_id="msg_l2")))
    _p, url = lead(procs, tmp_path)
    task = send_task(url, "Call loose.", timeout=120)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    seen = tool_result(models["lead"].requests, 1)
    assert "125" in seen, seen
    assert "an agent-triggered run without a spending ceiling is refused" in seen, seen
    assert "route: delegate-task loose — 'loose' is an agent capsule without a spending ceiling" in seen, seen
    assert not models.responses("fixer").requests  # no session asked its model
    assert_only_the_key_opened(models)
    scan_for_secrets(home, tmp_path, procs)


def test_a_tree_budget_spent_at_depth_3_stops_every_client(procs: Procs, tmp_path: Path, models: ModelServers,
                                                           home: Path) -> None:
    """`--budget-tokens 40` at the lead: the lead's and the reviewer's first calls spend 15 each,
    the fixer's first call (Codex, depth 3) 110; the next call of each client, deepest first,
    is refused E-GWY-004 by the gateway, and each client stops with it surfaced. The root's
    `mur ps --tree --json` shows the spend by node (spec/gateway.md "Budgets")."""
    models["lead"].add(bash("toolu_l1", 'reviewer "review the patch"', "msg_l1"),
                       Reply(an_text("LEAD: never asked", msg_id="msg_l2")))
    models["reviewer"].add(bash("toolu_r1", 'fixer "fix it"', "msg_r1"),
                           Reply(an_text("REVIEWER: never asked", msg_id="msg_r2")))
    fixer = models.responses("fixer")
    fixer.add(ModelReply([exec_call("echo FIXED")]), ModelReply([message("FIXER: never asked")]))
    p, url = lead(procs, tmp_path, "--budget-tokens", "40")
    task = send_task(url, "Get the patch reviewed.", timeout=240)
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    assert "E-GWY-004" in status_text(task), status_text(task)  # Claude Code surfaced the refusal
    # no call past the spent budget reached any provider: one scripted call each
    assert (len(models["lead"].requests), len(models["reviewer"].requests), len(fixer.model_calls)) == (1, 1, 1)
    nodes = chain(tree(procs.env), p.ready["session_id"])
    ids = [n["id"] for n in nodes]
    assert len(ids) == 3
    # the spend by node, from the root's `mur ps --tree --json`: own/subtree and each ceiling
    assert [n["tokens"] for n in nodes] == [{"own": 15, "subtree": 140, "budget": 40},
                                            {"own": 15, "subtree": 125, "budget": 25},
                                            {"own": 110, "subtree": 110, "budget": 10}]
    records = trace(p.ready["records_dir"])
    reached = of(records, "spend_ceiling_reached")
    # refused within one call, deepest first, each naming the root whose budget ran out (a
    # CLI's side traffic after that may be refused too: callers are compared in first order)
    assert {r["node"] for r in reached} == {ids[0]}
    assert list(dict.fromkeys(r["caller"] for r in reached)) == [ids[2], ids[1], ids[0]]
    # each client stopped with the refusal surfaced: Codex (fixer), Claude Code (reviewer, lead)
    for sid, client in ((ids[2], "codex"), (ids[1], "Claude Code")):
        (child_trace,) = (tmp_path / "work").rglob(f"{sid}/trace.jsonl")
        failed = of(trace(child_trace.parent), "task_failed")
        assert failed and "E-GWY-004" in failed[0]["reason"] and client in failed[0]["reason"], failed
    (lead_failed,) = of(records, "task_failed")
    assert "E-GWY-004" in lead_failed["reason"] and "Claude Code" in lead_failed["reason"]
    assert_only_the_key_opened(models)
    scan_for_secrets(home, tmp_path, procs)


def assert_only_the_key_opened(models: ModelServers) -> None:
    """Every call the provider answered carried LEAD_KEY, and none was refused for its key."""
    answered = [r for s in models.servers.values() for r in s.answered]
    answered += [r for s in models.openai.values() for r in s.requests]
    assert answered and {carried_key(r.headers) for r in answered} == {LEAD_KEY}, answered
    refused = [r for s in (*models.servers.values(), *models.openai.values()) for r in s.refused]
    assert refused == [], [(r.path, carried_key(r.headers)) for r in refused]


def test_the_placeholder_opens_nothing_at_the_provider(procs: Procs, tmp_path: Path, models: ModelServers,
                                                       home: Path) -> None:
    """The placeholder every CLI holds, sent straight to the provider, is refused 401 in each
    provider's shape; the same request sent through the tree's gateway by a process of the
    tree (the lead's Bash tool runs it with curl: the control) is answered 200, the key
    attached at the gateway."""
    body = {"model": "test-model", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    anthropic = {"x-api-key": PLACEHOLDER, "anthropic-version": "2023-06-01"}
    with httpx.Client(trust_env=False, timeout=30) as client:
        direct = client.post(models.url + "/v1/messages", json=body, headers=anthropic)
        codex = client.post(models.responses("fixer").base_url + "/responses", json={"model": "m", "input": []},
                            headers={"authorization": f"Bearer {PLACEHOLDER}"})
    assert direct.status_code == 401 and direct.json()["error"]["type"] == "authentication_error", direct.text
    assert codex.status_code == 401 and codex.json()["error"]["code"] == "invalid_api_key", codex.text
    assert [len(s.refused) for s in (models["lead"], models.responses("fixer"))] == [1, 1]
    models["lead"].refused.clear()
    models.responses("fixer").refused.clear()
    p, url = lead(procs, tmp_path)
    (start,) = of(trace(p.ready["records_dir"]), "session_start")
    via = f"{start['gateway']['endpoint']}/up/http/127.0.0.1:{models.port}/v1/messages"
    curl = (f"curl -s -o /dev/null -w 'via-gateway:%{{http_code}}' -H 'x-api-key: {PLACEHOLDER}' "
            f"-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' "
            f"-d '{json.dumps(body)}' {via}")
    models["lead"].add(bash("toolu_l1", curl, "msg_l1"), Reply(an_text("LEAD: done.", msg_id="msg_l2")))
    task = send_task(url, "Ask the provider through the gateway.", timeout=120)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    seen = tool_result(models["lead"].requests, 1)
    assert "via-gateway:200" in seen, seen
    (through,) = [r for r in models["lead"].answered if r.body == body]  # curl's request, as it arrived
    assert carried_key(through.headers) == LEAD_KEY
    assert_only_the_key_opened(models)
    scan_for_secrets(home, tmp_path, procs)


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def scan_for_secrets(home: Path, tmp_path: Path, procs: Procs) -> None:
    """No provider key, token, credential or approval string in any file the scenario wrote
    (records, traces, logs, workdirs, the CLIs' homes), nor in the argv or environment of any
    process running for it (the lead's own `mur run` excepted: it holds LEAD_KEY)."""
    secret = LEAD_KEY.encode()
    for root in (home, tmp_path):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                assert secret not in data, path
                if path.name.endswith((".jsonl", ".log", ".err", ".md", ".json")) and "artifacts" not in path.parts:
                    assert not TOKEN.search(data), path
    scan_processes(procs)


def scan_processes(procs: Procs) -> int:
    """The argv / environment part of the scan over every live process of the scenario
    (:func:`scenario_pids`; the Codex capsule's `mur run`, its CLI, sandbox and commands
    included); returns how many processes were read. Only the lead's `mur run` is exempt:
    the fixer is keyless here (module docstring), so its Codex CLI — which by design holds
    its key in its own environment (spec/agent.md, "Codex protocol") — is scanned too."""
    secret = LEAD_KEY.encode()
    lead = next((p for p in procs.started if "local/lead" in " ".join(map(str, p.proc.args))), None)
    if lead is None or not lead.alive():
        return 0
    seen = 0
    for pid in scenario_pids(procs.env, lead.pid, lead.ready["session_id"]):
        if pid == lead.pid:  # the lead's own `mur run` holds LEAD_KEY by design
            continue
        for part in ("cmdline", "environ"):
            try:
                data = Path(f"/proc/{pid}/{part}").read_bytes()
            except OSError:
                continue
            seen += part == "environ"
            assert secret not in data, (pid, part, _cmd(pid))
            assert not TOKEN.search(data), (pid, part, _cmd(pid))
    return seen
