"""Seed 002's acceptance scenario on capsules, with real agent CLIs (issue 20, Proof).

`lead` (Claude Code) has its Bash tool run the link `reviewer "…"`; `reviewer` (Claude Code)
runs the link `fixer "…"`; `fixer` runs a shell command and answers. Every CLI is the real one
from npm, talking to its own scripted Anthropic-compatible server on loopback. A real
mur-roost referees; every session is a real `mur run`.

Codex had not landed on main when this was written, so `fixer` is a Claude Code capsule too
(FIXER_COMMAND below is the one line to change).
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

import pytest

from agent.npm_cli import npm_bin
from agent.scripted import Reply, an_text, an_tools
from murmur.registry import install

from ._delegation import (
    MUR,
    TOKEN,
    Procs,
    alive,
    descendants,
    of,
    send_task,
    submit_task,
    trace,
    wait_until,
)
from ._models import ModelServers, claude_side, model_servers

pytestmark = pytest.mark.e2e

LEAD_KEY = "sk-ant-lead-SECRET-5e0c7b2d9f41a3"
FIXER_COMMAND = "claude"
GRACE = 25.0  # seconds: the cascade's bound (spec/tree.md, "one grace for every depth")


def agent_capsule(root: Path, name: str, *, endpoint: str, spawn: tuple[str, ...] = (),
                  shell: tuple[str, ...] = ("echo",), key: str | None = None,
                  command: str = "claude") -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    lines = [f"name: {name}", "version: 0.1.0", f"description: the {name} of the scenario", "capabilities:",
             "  shell:", f"    allow: [{', '.join(shell)}]"]
    if spawn:
        lines += ["  spawn:", f"    allow: [{', '.join(spawn)}]"]
    lines += ["inference:", "  transport: process", f"  command: {command}", "  model: test-model",
              f"  endpoint: {endpoint}", "  max_turns: 4", f"  system_prompt: You are the {name}."]
    if key:
        lines.append(f"  api_key: ${{{key}}}")
    lines += ["lifecycle:", "  task_acceptance: queue", "  queue_depth: 4", "  after_task: sleep"]
    (d / "murmur.yaml").write_text("\n".join(lines) + "\n")
    return d


@pytest.fixture(scope="module")
def clis() -> Path:
    return npm_bin("@anthropic-ai/claude-code", "claude")


@pytest.fixture(scope="module")
def models() -> Iterator[ModelServers]:
    with model_servers({"lead": claude_side, "reviewer": claude_side, "fixer": claude_side}) as servers:
        yield servers


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, models: ModelServers) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("harness-home")
    src = tmp_path_factory.mktemp("harness-src")
    dirs = [
        agent_capsule(src, "fixer", endpoint=models["fixer"].url, command=FIXER_COMMAND),
        agent_capsule(src, "reviewer", endpoint=models["reviewer"].url, spawn=("fixer",)),
        agent_capsule(src, "lead", endpoint=models["lead"].url, spawn=("reviewer", "fixer"), key="LEAD_KEY"),
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
        server.holding = type(server.holding)()
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    env["PATH"] = f"{clis}:{env.get('PATH', '/usr/bin:/bin')}"
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE", "MURMUR_SPAWN",
                 "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "LEAD_KEY"):
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
    while node.get("children"):
        node = node["children"][0]
        out.append(node)
    return out


def session_pids(home: Path, exclude: set[int]) -> set[int]:
    """Every live process of the scenario: environment naming the test's MURMUR_HOME, plus
    their descendants (the CLIs, their shells, the links and commands), minus ``exclude``."""
    needle = f"MURMUR_HOME={home}".encode()
    records = str(home).encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env or b"HOME=" + records in env:
            found.add(int(entry.name))
    return alive(descendants(found) - exclude)


def test_three_levels_answers_flow_up_with_lineage(procs: Procs, tmp_path: Path, models: ModelServers,
                                                   home: Path) -> None:
    models["lead"].add(bash("toolu_l1", 'reviewer "review the patch in src/"', "msg_l1"),
                       Reply(an_text("LEAD: the patch is reviewed and fixed.", msg_id="msg_l2")))
    models["reviewer"].add(bash("toolu_r1", 'fixer "fix the off-by-one"', "msg_r1"),
                           Reply(an_text("REVIEWER: approved after the fixer's change.", msg_id="msg_r2")))
    models["fixer"].add(bash("toolu_f1", "echo FIXED-BY-FIXER", "msg_f1"),
                        Reply(an_text("FIXER: FIXED-BY-FIXER", msg_id="msg_f2")))
    p, url = lead(procs, tmp_path)
    task = send_task(url, "Get the patch reviewed.", timeout=240)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    answer = "".join(part.get("text", "") for a in task.get("artifacts", []) for part in a.get("parts", []))
    assert answer == "LEAD: the patch is reviewed and fixed."
    # each answer flowed up as the tool result its parent's model read
    assert "FIXED-BY-FIXER" in tool_result(models["fixer"].requests, 1)
    from_fixer = tool_result(models["reviewer"].requests, 1)
    assert "FIXER: FIXED-BY-FIXER" in from_fixer, from_fixer
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
    # the lead's trace: two turns, one Bash call, the link request
    records = trace(p.ready["records_dir"])
    assert [r["decision"] for r in of(records, "inference")] == ["tool_call", "end_turn"]
    assert [r["tool_name"] for r in of(records, "tool_call")] == ["Bash"]
    assert [r["outcome"] for r in of(records, "link_request")] == ["ok"]
    scan_for_secrets(home, tmp_path, procs)


def test_ctrl_c_at_the_root_ends_all_three(procs: Procs, tmp_path: Path, models: ModelServers,
                                           home: Path) -> None:
    models["lead"].add(bash("toolu_l1", 'reviewer "review slowly"', "msg_l1"),
                       Reply(an_text("never asked", msg_id="msg_l2")))
    models["reviewer"].add(bash("toolu_r1", 'fixer "fix slowly"', "msg_r1"),
                           Reply(an_text("never asked", msg_id="msg_r2")))
    models["fixer"].add(Reply(hold=True))
    p, url = lead(procs, tmp_path)
    roost_pid = procs.started[0].pid
    submit_task(url, "Get the patch reviewed.")
    wait_until(models["fixer"].holding.is_set, timeout=180, what="the fixer's model call in flight")
    pids = session_pids(home, {roost_pid})
    commands = {pid: _cmd(pid) for pid in pids}
    assert sum("claude" in c for c in commands.values()) >= 3, commands  # three CLIs
    assert any(c.startswith(("/bin/bash", "bash")) for c in commands.values()), commands  # their shells
    nodes = chain(tree(procs.env), p.ready["session_id"])
    assert [n["state"] for n in nodes] == ["running"] * 3, nodes
    assert scan_processes(home, procs) >= 6  # the sessions, the CLIs, their shells and links, while busy
    began = time.monotonic()
    os.kill(p.pid, signal.SIGINT)
    wait_until(lambda: not alive(pids), timeout=GRACE, what=f"every process gone (left: {alive(pids)})")
    took = time.monotonic() - began
    print(f"\nCtrl-C at the root → {len(pids)} processes gone in {took:.2f}s (grace {GRACE:.0f}s)")
    ended = wait_until(lambda: _all_ended(procs.env, p.ready["session_id"]), timeout=30, what="three ended")
    assert [(n["state"], n["status"]) for n in ended] == [("ended", "canceled")] * 3, ended
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
    assert not models["fixer"].requests  # no fixer session ever asked its model
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
    scan_processes(home, procs)


def scan_processes(home: Path, procs: Procs) -> int:
    """The argv / environment part of the scan; returns how many processes were read."""
    secret = LEAD_KEY.encode()
    lead_pid = next((p.pid for p in procs.started if "local/lead" in " ".join(map(str, p.proc.args))), None)
    seen = 0
    for pid in session_pids(home, {p.pid for p in procs.started if p.pid != lead_pid}):
        if pid == lead_pid:
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
