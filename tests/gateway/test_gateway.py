"""The gateway live: a scripted provider behind it, callers placed by their process (spec/gateway.md).

The test process is the tree's root session (the gateway serves the root's own calls, as it
does under ``mur run``). A process outside the tree is made by a double fork: its grandchild
is reparented away from the test process, so no ancestor of it is a session of the tree.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator

import attrs
import httpx
import pytest
import trio

from agent.scripted import Reply, ScriptedServer, an_text, oa_text
from murmur import procstat
from murmur.gateway import Gateway, KeyTable, Node, Tree, base_url, run_gateway

KEY = "sk-test-real-key-7f3a"
PLACEHOLDER = "murmur-gateway-placeholder"


@attrs.define
class Rig:
    provider: ScriptedServer
    gateway: Gateway
    url: str
    records: list[dict[str, object]]

    def via(self, path: str) -> str:
        return base_url(self.url, self.provider.url) + path


@pytest.fixture
async def rig(nursery: trio.Nursery) -> AsyncIterator[Rig]:
    provider = ScriptedServer(keys={KEY})  # it checks the key, as a real provider does
    await nursery.start(provider.serve)
    me = os.getpid()
    ticks = procstat.start_time(me)
    assert ticks is not None
    tree = Tree().add(Node("root", me, ticks, None, (f"127.0.0.1:{provider.port}",), budget=40))
    keys = KeyTable().with_key(provider.url, "${GW_TEST_KEY}", {"GW_TEST_KEY": KEY})
    records: list[dict[str, object]] = []
    gateway = Gateway(tree, keys, records.append)
    url = await nursery.start(run_gateway, gateway)
    yield Rig(provider, gateway, url, records)


async def _direct_and_via(
    rig: Rig, path: str, body: dict[str, object], reply: Reply
) -> tuple[httpx.Response, httpx.Response]:
    rig.provider.add(reply, reply)
    async with httpx.AsyncClient() as client:
        direct = await client.post(rig.provider.url + path, json=body, headers={"x-api-key": KEY})
        via = await client.post(rig.via(path), json=body, headers={"x-api-key": PLACEHOLDER})
    return direct, via


async def test_anthropic_plain_and_streamed_pass_through_byte_for_byte(rig: Rig) -> None:
    for stream in (False, True):
        body = {"model": "claude-x", "max_tokens": 5, "messages": [], "stream": stream}
        direct, via = await _direct_and_via(
            rig, "/v1/messages", body, Reply(an_text("hi", inp=3, out=2))
        )
        assert via.status_code == direct.status_code == 200
        assert via.content == direct.content
        assert via.headers["content-type"] == direct.headers["content-type"]
    seen = rig.provider.requests
    assert [r.headers.get("x-api-key") for r in seen] == [KEY] * 4  # the placeholder never arrives
    calls = [r for r in rig.records if r["type"] == "model_call"]
    assert [(c["tokens_in"], c["tokens_out"], c["status"]) for c in calls] == [
        (3, 2, 200),
        (3, 2, 200),
    ]
    assert all(c["session"] == "root" and c["key"] == "${GW_TEST_KEY}" for c in calls)
    assert KEY not in json.dumps(rig.records)


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
async def test_the_placeholder_opens_nothing_at_the_provider(rig: Rig, dialect: str) -> None:
    """Straight to the provider, the placeholder (or no key, or another) is refused 401 in the
    provider's shape; the same request through the gateway (the control) is answered, with
    the real key attached there."""
    path, reply = ("/v1/messages", an_text("x")) if dialect == "anthropic" else ("/v1/chat/completions", oa_text("x"))
    sent = {"x-api-key": PLACEHOLDER} if dialect == "anthropic" else {"authorization": f"Bearer {PLACEHOLDER}"}
    body = {"model": "m", "max_tokens": 5, "messages": []}
    rig.provider.add(Reply(reply))
    async with httpx.AsyncClient() as client:
        direct = [await client.post(rig.provider.url + path, json=body, headers=h)
                  for h in (sent, {}, {"x-api-key": "sk-another"})]
        via = await client.post(rig.via(path), json=body, headers=sent)
    assert [d.status_code for d in direct] == [401] * 3
    if dialect == "anthropic":
        assert direct[0].json()["type"] == "error" and direct[0].json()["error"]["type"] == "authentication_error"
    else:
        assert direct[0].json()["error"]["code"] == "invalid_api_key"
    assert len(rig.provider.refused) == 3
    assert via.status_code == 200 and via.json() == reply
    assert [r.headers.get("x-api-key") or r.headers.get("authorization") for r in rig.provider.answered] == [
        KEY if dialect == "anthropic" else f"Bearer {KEY}"]


async def test_openai_gets_a_bearer_key_and_counts_usage(rig: Rig) -> None:
    body = {"model": "gpt-x", "messages": []}
    direct, via = await _direct_and_via(
        rig, "/v1/chat/completions", body, Reply(oa_text("ok", prompt=4, completion=6))
    )
    assert via.content == direct.content
    assert rig.provider.requests[-1].headers.get("authorization") == f"Bearer {KEY}"
    assert "x-api-key" not in rig.provider.requests[-1].headers
    assert rig.gateway.tree.nodes["root"].spent == 10


async def test_an_endpoint_network_allow_does_not_cover_is_refused(rig: Rig) -> None:
    async with httpx.AsyncClient() as client:
        got = await client.post(
            base_url(rig.url, "http://127.0.0.1:9") + "/v1/messages",
            json={},
            headers={"x-api-key": PLACEHOLDER},
        )
    assert got.status_code == 403
    error = got.json()["error"]
    assert error["type"] == "permission_error" and error["message"].startswith("E-GWY-002")
    assert rig.provider.requests == []  # nothing went out


async def test_a_spent_budget_refuses_the_next_call(rig: Rig) -> None:
    rig.provider.add(*[Reply(an_text("x", inp=10, out=10)) for _ in range(3)])
    body = {"model": "m", "max_tokens": 5, "messages": []}
    async with httpx.AsyncClient() as client:
        first = await client.post(rig.via("/v1/messages"), json=body)
        second = await client.post(rig.via("/v1/messages"), json=body)  # 40 of 40 now spent
        third = await client.post(rig.via("/v1/messages"), json=body)
    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 400)
    assert third.json()["error"]["message"].startswith("E-GWY-004")
    assert len(rig.provider.requests) == 2
    reached = [r for r in rig.records if r["type"] == "spend_ceiling_reached"]
    assert reached and reached[0]["node"] == "root" and reached[0]["spent_tokens"] == 40


CHILD = """
import json, os, sys, httpx
url, provider = sys.argv[1], sys.argv[2]
with httpx.Client(trust_env=False) as c:
    reg = c.post(url + "/_murmur/sessions", json={"session": "child", "budget_tokens": 500,
        "network_allow": [provider, "evil.example"]})
    call = c.post(url + "/up/http/" + provider + "/v1/messages", json={"model": "m", "messages": []},
        headers={"x-api-key": "murmur-gateway-placeholder"})
    print(json.dumps({"reg": reg.json(), "status": call.status_code, "env": KEY_NAME in os.environ}))
""".replace("KEY_NAME", repr("GW_TEST_KEY"))

OUTSIDE = """
import os, sys, time, httpx
url, provider = sys.argv[1], sys.argv[2]
parent = os.getpid()
if os.fork():
    os._exit(0)
while os.getppid() == parent:
    time.sleep(0.005)
with httpx.Client(trust_env=False) as c:
    got = c.post(url + "/up/http/" + provider + "/v1/messages", json={}, headers={"anthropic-version": "1"})
    reg = c.post(url + "/_murmur/sessions", json={"session": "intruder"})
print(got.status_code, got.json()["error"]["message"][:9], reg.status_code, flush=True)
"""


async def test_a_child_registers_under_its_parent_and_gets_a_clamped_ceiling(rig: Rig) -> None:
    rig.provider.add(Reply(an_text("x", inp=10, out=5)))
    done = await trio.run_process(
        [sys.executable, "-c", CHILD, rig.url, f"127.0.0.1:{rig.provider.port}"],
        capture_stdout=True,
        env={k: v for k, v in os.environ.items() if k != "GW_TEST_KEY"},
    )
    out = json.loads(done.stdout)
    assert out["reg"]["parent"] == "root" and out["reg"]["budget_tokens"] == 40  # min(500, 40 left)
    assert out["reg"]["network_allow"] == [
        f"127.0.0.1:{rig.provider.port}"
    ]  # what the root does not hold is dropped
    assert out["status"] == 200 and out["env"] is False
    assert rig.provider.requests[-1].headers["x-api-key"] == KEY
    assert (
        rig.gateway.tree.nodes["child"].spent == 15 and rig.gateway.tree.nodes["root"].spent == 15
    )


OWN_KEY = """
import json, sys, httpx
url, provider, value = sys.argv[1], sys.argv[2], sys.argv[3]
with httpx.Client(trust_env=False) as c:
    reg = c.post(url + "/_murmur/sessions", json={"session": "child", "network_allow": [provider],
        "key": {"endpoint": "http://" + provider, "reference": "${GW_TEST_KEY}", "value": value}})
    call = c.post(url + "/up/http/" + provider + "/v1/messages", json={"model": "m", "messages": []})
    print(json.dumps({"reg": reg.text, "status": call.status_code}))
"""


async def test_a_child_s_registered_key_is_attached_to_its_calls_only_and_never_shown(rig: Rig) -> None:
    own = "sk-child-own-value-31ab"
    rig.provider.keys = {KEY, own}
    rig.provider.add(Reply(an_text("child")), Reply(an_text("root")))
    done = await trio.run_process(
        [sys.executable, "-c", OWN_KEY, rig.url, f"127.0.0.1:{rig.provider.port}", own], capture_stdout=True)
    out = json.loads(done.stdout)
    assert out["status"] == 200 and own not in out["reg"]  # the reply does not echo it
    async with httpx.AsyncClient() as client:  # the root's call: the root's key still
        assert (await client.post(rig.via("/v1/messages"), json={})).status_code == 200
    assert [r.headers["x-api-key"] for r in rig.provider.answered] == [own, KEY]
    (reg,) = [r for r in rig.records if r["type"] == "gateway_session"]
    assert (reg["key"], reg["own_key"]) == ("${GW_TEST_KEY}", True)
    assert own not in json.dumps(rig.records) and own not in repr(rig.gateway.tree)


async def test_a_process_outside_the_tree_is_refused(rig: Rig) -> None:
    done = await trio.run_process(
        [sys.executable, "-c", OUTSIDE, rig.url, f"127.0.0.1:{rig.provider.port}"],
        capture_stdout=True,
    )
    assert done.stdout.split() == [b"403", b"E-GWY-001", b"403"]
    assert rig.provider.requests == []
    # negative control: the same request from inside the tree goes through
    rig.provider.add(Reply(an_text("x")))
    async with httpx.AsyncClient() as client:
        ok = await client.post(rig.via("/v1/messages"), json={}, headers={"anthropic-version": "1"})
    assert ok.status_code == 200


async def test_bad_paths_registrations_and_dead_upstreams_are_refused_with_codes(rig: Rig) -> None:
    async with httpx.AsyncClient() as client:
        nowhere = await client.post(rig.url + "/v1/messages", json={})
        bad = await client.post(rig.url + "/_murmur/sessions", content=b"not json")
        again = await client.post(
            rig.url + "/_murmur/sessions", json={"session": "x"}
        )  # root is one already
    assert nowhere.status_code == 404 and nowhere.json()["error"]["message"].startswith("E-GWY-003")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "E-GWY-005"
    assert again.status_code == 403 and again.json()["error"]["code"] == "E-GWY-001"
    # an upstream that refuses connections: a port just closed, under a root that may reach it
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rig.gateway.tree = Tree().add(
        attrs.evolve(rig.gateway.tree.nodes["root"], allow=("127.0.0.1",))
    )
    async with httpx.AsyncClient() as client:
        dead = await client.post(
            base_url(rig.url, f"http://127.0.0.1:{port}") + "/v1/chat/completions", json={}
        )
    assert dead.status_code == 502 and dead.json()["error"]["code"] == "E-GWY-006"
    assert [r["status"] for r in rig.records if r["type"] == "model_call"] == [502]


OWN_PROVIDER = """
import json, sys, httpx
url, provider = sys.argv[1], sys.argv[2]
with httpx.Client(trust_env=False) as c:
    reg = c.post(url + "/_murmur/sessions", json={"session": "child", "network_allow": [provider]})
    call = c.post(url + "/up/http/" + provider + "/v1/chat/completions", json={"model": "m", "messages": []})
    print(json.dumps({"allow": reg.json()["network_allow"], "status": call.status_code,
                      "code": call.json().get("error", {}).get("code")}))
"""


@pytest.mark.parametrize("parent_covers", [False, True], ids=["parent-lacks-it", "parent-covers-it"])
async def test_a_child_s_own_provider_is_clamped_by_its_parent_s_network_allow(
    rig: Rig, nursery: trio.Nursery, parent_covers: bool
) -> None:
    """A delegated child whose provider its parent's network.allow does not cover is refused
    E-GWY-002 and nothing goes out; when the parent covers it (the control), the call passes."""
    other = ScriptedServer()
    await nursery.start(other.serve)
    other.add(Reply(oa_text("x", prompt=3, completion=1)))
    if parent_covers:
        root = rig.gateway.tree.nodes["root"]
        rig.gateway.tree = Tree().add(attrs.evolve(root, allow=(*root.allow, f"127.0.0.1:{other.port}")))
    done = await trio.run_process(
        [sys.executable, "-c", OWN_PROVIDER, rig.url, f"127.0.0.1:{other.port}"], capture_stdout=True
    )
    out = json.loads(done.stdout)
    if parent_covers:
        assert out == {"allow": [f"127.0.0.1:{other.port}"], "status": 200, "code": None}
        assert len(other.requests) == 1
    else:
        assert out == {"allow": [], "status": 403, "code": "E-GWY-002"}
        assert other.requests == []


async def test_spend_is_persisted_per_node_where_mur_ps_reads_it(
    rig: Rig, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each charged call the caller's and its ancestors' spend files are replaced whole
    (spec/gateway.md "Visible spend"); a registration writes the registrant's."""
    from functools import partial

    from murmur.gateway import read_spend, write_spend

    monkeypatch.setenv("MURMUR_HOME", str(tmp_path))
    rig.gateway.on_spend = partial(write_spend, "root")
    assert read_spend("root") == {}
    rig.provider.add(Reply(an_text("x", inp=10, out=5)), Reply(an_text("y", inp=3, out=2)))
    done = await trio.run_process(
        [sys.executable, "-c", CHILD, rig.url, f"127.0.0.1:{rig.provider.port}"], capture_stdout=True)
    assert json.loads(done.stdout)["status"] == 200
    async with httpx.AsyncClient() as client:  # the root's own call
        assert (await client.post(rig.via("/v1/messages"), json={})).status_code == 200
    await rig.gateway.flush()  # the files are written off the calls' path; this waits for them
    got = read_spend("root")
    assert {k: (v["own_tokens"], v["subtree_tokens"], v["budget_tokens"], v["parent"]) for k, v in got.items()} == {
        "root": (5, 20, 40, None), "child": (15, 15, 40, "root")}
    spend_files = sorted(p.name for p in (tmp_path / "tree" / "spend" / "root").iterdir())  # type: ignore[operator]
    assert spend_files == ["child.json", "root.json"]  # no temporary file left behind


NESTED = """
import json, subprocess, sys, httpx
url, provider, depth = sys.argv[1], sys.argv[2], int(sys.argv[3])
call = lambda c: c.post(url + "/up/http/" + provider + "/v1/messages", json={"model": "m", "messages": []},
                        headers={"anthropic-version": "1"})
with httpx.Client(trust_env=False) as c:
    reg = c.post(url + "/_murmur/sessions", json={"session": f"d{depth}", "network_allow": [provider]})
    assert reg.status_code == 200, reg.text
    if depth < 3:
        below = subprocess.run([sys.executable, "-c", sys.argv[4], url, provider, str(depth + 1), sys.argv[4]],
                               capture_output=True, text=True, check=True)
        out = json.loads(below.stdout)
    else:
        out = {"spend": call(c).status_code}  # depth 3 spends the whole tree budget
    got = call(c)  # then each level, deepest first, asks once more
    out[f"d{depth}"] = [got.status_code, got.json()["error"]["message"][:9] if got.status_code != 200 else ""]
    print(json.dumps(out))
"""


async def test_a_budget_spent_at_depth_3_refuses_the_next_call_anywhere_in_the_tree(rig: Rig) -> None:
    """root (budget 40) → d1 → d2 → d3: d3's call spends 40; the next call of every node is
    refused E-GWY-004 and nothing more goes out; spend_ceiling_reached names the root."""
    rig.provider.add(Reply(an_text("x", inp=30, out=10)), Reply(an_text("never")))
    done = await trio.run_process(
        [sys.executable, "-c", NESTED, rig.url, f"127.0.0.1:{rig.provider.port}", "1", NESTED], capture_stdout=True)
    out = json.loads(done.stdout)
    assert out == {"spend": 200, "d3": [400, "E-GWY-004"], "d2": [400, "E-GWY-004"], "d1": [400, "E-GWY-004"]}
    async with httpx.AsyncClient() as client:
        mine = await client.post(rig.via("/v1/messages"), json={}, headers={"anthropic-version": "1"})
    assert mine.status_code == 400 and len(rig.provider.requests) == 1
    tree = rig.gateway.tree.nodes
    assert [(n, tree[n].spent, tree[n].own) for n in ("root", "d1", "d2", "d3")] == [
        ("root", 40, 0), ("d1", 40, 0), ("d2", 40, 0), ("d3", 40, 40)]
    reached = [r for r in rig.records if r["type"] == "spend_ceiling_reached"]
    assert [(r["node"], r["caller"]) for r in reached] == [("root", "d3"), ("root", "d2"), ("root", "d1"), ("root", "root")]
