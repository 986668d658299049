"""The gateway's pure parts: paths, keys, reach, budget arithmetic, reported usage (spec/gateway.md)."""

from __future__ import annotations

import json

import pytest

from murmur.diagnostics import FALLBACK_HINTS
from murmur.gateway.keys import KeyClaim, KeyTable, claim_of, parse_claim
from murmur.gateway.nodes import Node, Tree, clamp_allow, reaches
from murmur.gateway.refusal import Refusal, body_for
from murmur.gateway.route import base_url, key_headers, origin_of, parse_path
from murmur.gateway.usage import UsageMeter


def test_paths_name_their_upstream() -> None:
    up = parse_path("/up/https/api.anthropic.com/v1/messages", b"beta=true")
    assert up is not None
    assert up.origin == "https://api.anthropic.com:443"
    assert up.url == "https://api.anthropic.com:443/v1/messages?beta=true"
    assert (up.target.host, up.target.scheme, up.target.port) == ("api.anthropic.com", "https", 443)
    assert parse_path("/v1/messages") is None
    assert parse_path("/up/ftp/x/y") is None
    assert base_url("http://127.0.0.1:9", "https://api.openai.com/v1") == (
        "http://127.0.0.1:9/up/https/api.openai.com:443/v1"
    )
    assert origin_of("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080"
    assert origin_of("not a url") is None


def test_key_header_follows_the_dialect() -> None:
    assert key_headers("/up/https/h/v1/messages", {}, "k") == {"x-api-key": "k"}
    assert key_headers("/up/https/h/v1/models", {"anthropic-version": "1"}, "k") == {
        "x-api-key": "k"
    }
    assert key_headers("/up/https/h/v1/responses", {}, "k") == {"authorization": "Bearer k"}
    assert key_headers("/up/https/h/v1/chat/completions", {}, "k") == {"authorization": "Bearer k"}


def test_key_table_is_per_endpoint_and_shows_references_only() -> None:
    env = {"A_KEY": "sk-secret-a", "B_KEY": "sk-secret-b"}
    table = KeyTable().with_key("https://api.anthropic.com", "${A_KEY}", env)
    table = table.with_key("https://api.openai.com/v1", "${B_KEY}", env)
    table = table.with_key("https://api.anthropic.com/v1", "${B_KEY}", env)  # first key stays
    table = table.with_key("https://other.example", "${MISSING}", env)  # nothing to attach
    assert table.describe() == {
        "https://api.anthropic.com:443": "${A_KEY}",
        "https://api.openai.com:443": "${B_KEY}",
    }
    entry = table.key_for("https://api.anthropic.com:443")
    assert entry is not None and entry.value == "sk-secret-a"
    assert "sk-secret" not in repr(table) and "sk-secret" not in repr(entry)


def _chain(*claims: KeyClaim | None) -> list[Node]:
    """Nodes nearest first: the caller, its parent, ..., the root (the table holds its key)."""
    return [Node(f"n{i}", i + 1, 1, None, (), key=c) for i, c in enumerate(claims)]


def test_a_call_carries_the_nearest_key_for_its_endpoint_and_reference() -> None:
    """spec/gateway.md "Keys": the root's table, then each session's own claim."""
    origin = "https://api.anthropic.com:443"
    table = KeyTable().with_key("https://api.anthropic.com", "${K}", {"K": "sk-root-A"})
    own_b = KeyClaim(origin, "${K}", "sk-child-B")
    names_k = KeyClaim(origin, "${K}")  # names the reference, holds no value of it
    names_j = KeyClaim(origin, "${J}")
    got = lambda *claims: table.key_for(origin, _chain(*claims))  # noqa: E731
    assert table.key_for(origin) == table.key_for(origin, _chain(None)) == table.entries[origin]
    assert got(own_b, None).value == "sk-child-B"  # a child holding its own value: its own
    assert got(None, own_b, None).value == "sk-child-B"  # its descendant naming none: the nearest
    assert got(names_k, own_b, None).value == "sk-child-B"  # ...naming the same reference too
    assert got(names_k, None).value == "sk-root-A"  # no value of its own: the root's
    assert got(names_j, own_b, None) is None  # another reference: no holder's key fits
    assert got(KeyClaim(origin, "${J}", "sk-j"), own_b, None).value == "sk-j"
    # a claim is for its own endpoint only: a call elsewhere takes the table's key for there
    assert table.key_for("https://api.openai.com:443", _chain(own_b, None)) is None
    other = KeyClaim("https://api.openai.com:443", "${K}", "sk-openai")
    assert got(other, None).value == "sk-root-A"
    assert "sk-" not in repr(_chain(own_b)) + repr(own_b) + repr(table)


def test_a_session_s_claim_and_its_registration_field() -> None:
    claim = claim_of("https://api.anthropic.com/v1", "${K}", {"K": "sk-b"})
    assert claim == KeyClaim("https://api.anthropic.com:443", "${K}", "sk-b")
    assert claim_of("https://api.anthropic.com", "${K}", {"K": ""}) == KeyClaim("https://api.anthropic.com:443", "${K}")
    assert claim_of(None, "${K}", {"K": "x"}) is None and claim_of("https://h", "plain", {}) is None
    assert parse_claim(claim.wire()) == claim
    assert parse_claim(KeyClaim("http://h:1", "${K}").wire()) == KeyClaim("http://h:1", "${K}")
    assert parse_claim(None) is None
    for bad in ("x", {"endpoint": "ftp://h", "reference": "${K}"}, {"endpoint": "http://h", "reference": "K"},
                {"endpoint": "http://h", "reference": "${K}", "value": 7},
                {"endpoint": "http://h", "reference": "${K}", "value": "sk-z", "extra": 1}):
        with pytest.raises(ValueError) as err:
            parse_claim(bad)
        assert "sk-z" not in str(err.value)


def test_child_reach_is_clamped_by_its_parent() -> None:
    assert clamp_allow(["api.openai.com", "evil.example"], ["https://api.openai.com"]) == ()
    assert clamp_allow(["https://api.openai.com"], ["api.openai.com"]) == (
        "https://api.openai.com",
    )
    assert clamp_allow(["x.example"], None) == ("x.example",)
    up = parse_path("/up/https/api.openai.com/v1/responses")
    assert up is not None
    assert reaches(["api.openai.com"], up.target)
    assert not reaches(["http://api.openai.com"], up.target)  # scheme bound by the URL form


def test_budget_arithmetic_over_a_tree() -> None:
    tree = Tree().add(Node("root", 1, 1, None, ("h",), budget=100))
    assert tree.ceiling("root", 500) == 100  # a child gets no more than the root has left
    tree = tree.add(Node("a", 2, 2, "root", ("h",), budget=tree.ceiling("root", 500)))
    tree = tree.add(Node("b", 3, 3, "a", ("h",), budget=tree.ceiling("a", 30)))
    assert tree.nodes["b"].budget == 30
    tree = tree.charge("b", 25)
    assert [tree.nodes[s].spent for s in ("root", "a", "b")] == [25, 25, 25]
    assert tree.left("b") == 5 and tree.left("a") == 75
    assert tree.spent_out("b") is None
    tree = tree.charge("b", 5)
    out = tree.spent_out("b")
    assert out is not None and out.session == "b"
    assert tree.spent_out("a") is None  # a sibling path is not stopped by b's own budget
    tree = tree.charge("a", 70)
    out = tree.spent_out("b")
    assert out is not None and out.session == "root"  # the highest spent node is named
    assert tree.ceiling("a", None) == 0
    unbounded = Tree().add(Node("r", 1, 1, None, ()))
    assert unbounded.left("r") is None and unbounded.ceiling("r", 7) == 7


def test_usage_from_every_dialect_plain_and_streamed() -> None:
    plain = UsageMeter(streamed=False)
    plain.feed(b'{"model":"m","usage":{"input_tokens"')
    plain.feed(b':7,"output_tokens":3}}')
    plain.close()
    assert (plain.tokens_in, plain.tokens_out, plain.model) == (7, 3, "m")

    anthropic = UsageMeter(streamed=True)
    stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"model":"c",'
        b'"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n'
    )
    for i in range(0, len(stream), 5):  # split anywhere
        anthropic.feed(stream[i : i + 5])
    anthropic.close()
    assert (anthropic.tokens_in, anthropic.tokens_out) == (12, 9)

    chat = UsageMeter(streamed=True)
    chat.feed(b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n')
    chat.feed(
        b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
    )
    chat.close()
    assert chat.total == 6

    responses = UsageMeter(streamed=True)
    responses.feed(
        b'event: response.completed\ndata: {"type":"response.completed","response":'
        b'{"model":"g","usage":{"input_tokens":5,"output_tokens":8}}}'
    )
    responses.close()  # the last line had no newline
    assert (responses.total, responses.model) == (13, "g")


def test_refusals_are_shaped_like_the_provider_s_errors() -> None:
    refusal = Refusal(403, "E-GWY-001", "outside")
    an = json.loads(body_for(refusal, anthropic=True))
    assert an == {
        "type": "error",
        "error": {
            "type": "permission_error",
            "message": f"E-GWY-001: outside (hint: {FALLBACK_HINTS['E-GWY-001']})",
        },
    }
    oa = json.loads(body_for(refusal, anthropic=False))
    assert oa["error"]["code"] == "E-GWY-001" and oa["error"]["message"].startswith("E-GWY-001")


def test_a_root_runs_the_gateway_by_default_when_its_tree_calls_models() -> None:
    """On for a tree that calls models unless MURMUR_GATEWAY=off; a budget always runs it;
    a tree that calls no models runs none."""
    from murmur.assembly.gatewaying import wanted

    assert wanted(100, False, {}) and wanted(100, True, {}) and wanted(100, True, {"MURMUR_GATEWAY": "off"})
    assert wanted(None, True, {}) and wanted(None, True, {"MURMUR_GATEWAY": "on"})
    assert not wanted(None, True, {"MURMUR_GATEWAY": "off"}) and not wanted(None, True, {"MURMUR_GATEWAY": "0"})
    assert not wanted(None, False, {}) and not wanted(None, False, {"MURMUR_GATEWAY": "on"})


def test_a_tree_calls_models_through_inference_or_delegation() -> None:
    from murmur.assembly.gatewaying import tree_calls_models
    from murmur.manifest.load import parse_manifest

    plan = parse_manifest("name: p\nversion: 0.1.0\nplan: plan.yaml\n", path="murmur.yaml")
    spawner = parse_manifest(
        "name: s\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  spawn:\n    allow: [worker]\n",
        path="murmur.yaml")
    agent = parse_manifest(
        "name: a\nversion: 0.1.0\nartifacts:\n  - name: d\n    version: 0.2.0\n    runtime: driver\n"
        "inference:\n  driver:\n    artifact: d\n  model: m\n  endpoint: http://127.0.0.1:9/v1\n"
        "  api_key: ${K}\n", path="murmur.yaml")
    assert not tree_calls_models([plan])
    assert tree_calls_models([spawner]) and tree_calls_models([agent]) and tree_calls_models([plan, agent])
