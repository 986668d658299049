"""A child that holds its own key value still calls through the gateway, which attaches the
child's value (spec/gateway.md "Keys"; issue 27, "Keys").

The test process is the tree's root (its gateway holds ``${API_KEY}`` = A, from the root's
environment); the child is a real `mur run` of an agent capsule whose manifest names the same
endpoint and reference and whose own environment holds ``API_KEY`` = B. The provider checks
the credential as a real one does and records which key each call carried: the child's calls
arrive with B, the root's with A. B is then searched for everywhere the tree could have put it:
the gateway's records, the child's trace and records, the spend files, the command's
environment as the model read it, and ``/proc/*/environ`` of every process of the tree while
the child runs; it is found only in the child's own `mur run` process (the scan's control).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio

from agent.scripted import (
    Received,
    Reply,
    ScriptedServer,
    carried_key,
    files_under,
    oa_text,
    oa_tools,
)
from agent.test_e2e_run import Mur, capsule, mur_runner, start_mur  # noqa: F401
from murmur import procstat
from murmur.gateway import Gateway, KeyTable, Node, Tree, base_url, run_gateway, write_spend

pytestmark = pytest.mark.e2e

KEY_A = "sk-root-A-0c1d2e3f4a5b6c7d"
KEY_B = "sk-child-B-9e8d7c6b5a4f3e2d"


def _tree_of(pid: int) -> set[int]:
    """``pid`` and every live process below it (by /proc parent links)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rfind(")") + 2:].split()[1])
    found, grew = {pid}, True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in found and child not in found:
                found.add(child)
                grew = True
    return found


def _holding(pids: Iterable[int], secret: bytes) -> set[int]:
    out = set()
    for pid in pids:
        try:
            if secret in Path(f"/proc/{pid}/environ").read_bytes():
                out.add(pid)
        except OSError:
            continue
    return out


async def test_a_child_s_own_key_is_attached_to_its_calls_and_found_nowhere_else(
    tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur], monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("MURMUR_HOME", str(home))  # the root's spend files go there too
    child_pid: list[int] = []
    scans: list[set[int]] = []

    def scan(received: Received) -> None:
        # while the child's call is in flight: which process of the tree holds B?
        if child_pid:
            scans.append(_holding(_tree_of(os.getpid()) | _tree_of(child_pid[0]), KEY_B.encode()))
        return None  # the script answers

    provider = ScriptedServer(scan, keys={KEY_A, KEY_B})
    await nursery.start(provider.serve)
    me = os.getpid()
    ticks = procstat.start_time(me)
    assert ticks is not None
    tree = Tree().add(Node("root", me, ticks, None, (f"127.0.0.1:{provider.port}",)))
    keys = KeyTable().with_key(provider.url + "/v1", "${API_KEY}", {"API_KEY": KEY_A})
    records: list[dict[str, object]] = []
    gateway = Gateway(tree, keys, records.append, on_spend=partial(write_spend, "root"))
    url = await nursery.start(run_gateway, gateway)

    provider.add(
        Reply(oa_tools(("c1", "cat", {"args": ["/proc/self/environ"]}), prompt=20, completion=3)),
        Reply(oa_text("done", prompt=30, completion=2)),
        Reply(oa_text("the root's", prompt=1, completion=1)),
    )
    cap, work, env = capsule(tmp_path, provider.url + "/v1")  # names ${API_KEY} at the provider
    env.update({"API_KEY": KEY_B, "MURMUR_HOME": str(home), "MURMUR_GATEWAY_ENDPOINT": url})
    m = await start_mur(nursery, mur_runner, ["--manifest", str(cap), "--workdir", str(work), "--no-env-file",
                                              "--task", "go"], cwd=tmp_path, env=env)
    child_pid.append(m.proc.pid)
    with trio.fail_after(90):
        code = await m.proc.wait()
        await m.drained.wait()
    assert code == 0, m.stderr_text
    async with httpx.AsyncClient(trust_env=False) as client:  # the root's own call
        mine = await client.post(base_url(url, provider.url + "/v1") + "/chat/completions",
                                 json={"model": "m", "messages": []},
                                 headers={"authorization": "Bearer murmur-gateway-placeholder"})
    assert mine.status_code == 200
    await gateway.flush()

    # the provider: the child's calls carried B, the root's A; nothing was refused
    assert [carried_key(r.headers) for r in provider.answered] == [KEY_B, KEY_B, KEY_A]
    assert provider.refused == []
    (reg,) = [r for r in records if r["type"] == "gateway_session"]
    assert reg["parent"] == "root" and reg["key"] == "${API_KEY}" and reg["own_key"] is True
    calls = [r for r in records if r["type"] == "model_call"]
    assert [(c["session"], c["key"]) for c in calls] == [(reg["session"], "${API_KEY}")] * 2 + [("root", "${API_KEY}")]
    # B is in no record, trace, spend file or workdir file; not in the command's environment
    secret = KEY_B.encode()
    assert secret not in json.dumps(records).encode()
    assert KEY_B not in json.dumps(provider.answered[1].body["messages"])  # what `cat` printed
    assert "TRACEPARENT=" in json.dumps(provider.answered[1].body["messages"])  # (it was read)
    written = files_under(home) + files_under(work)
    assert any(p.name == "trace.jsonl" for p in written) and any(p.parent.name == "root" for p in written)
    assert [p for p in written if secret in p.read_bytes()] == []
    # and no process of the tree held B but the child's own `mur run` (which must: the control)
    assert scans[:2] == [{m.proc.pid}] * 2, (scans, m.proc.pid)  # (the third: the root's, the child gone)
