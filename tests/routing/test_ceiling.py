"""Seed 003's rule as one decision (murmur.routing.ceiling): an agent reaches an agent capsule
only under a positive spending ceiling; `mur agent who` shows the same reason it refuses by."""

from __future__ import annotations

import attrs

from murmur.routing.catalog import Catalog
from murmur.routing.ceiling import SENTENCE, block, ceiling_of, ceiling_refusal
from murmur.routing.index import answer
from murmur.routing.render import route_json, to_text
from routing.fixtures import capsule, manifest

SEED = "an agent-triggered run without a spending ceiling is refused"


def test_the_sentence_is_the_seed_s_own() -> None:
    assert SENTENCE == SEED


def test_an_agent_to_an_agent_without_a_ceiling_is_refused_and_with_one_proceeds() -> None:
    lead = manifest("lead", agent=True)
    bare = manifest("fixer", agent=True)  # max_turns 10, no budget_tokens
    capped = manifest("fixer", agent=True, budget=20000)
    why = ceiling_refusal("delegate-task", lead, bare, "fixer", "restart the session")
    assert why is not None
    assert why.startswith(f"spawn refused: {SEED}. route: delegate-task fixer — 'fixer' is an agent "
                          "capsule without a spending ceiling (inference.budget_tokens is not set)")
    assert why.endswith("authorize: set `inference.budget_tokens: <input + output tokens per task>` in "
                        "fixer's murmur.yaml, reinstall it, and restart the session")
    # the negative control: with a ceiling it proceeds
    assert ceiling_refusal("delegate-task", lead, capped, "fixer", "restart the session") is None
    member = ceiling_refusal("call-member", lead, bare, "fixer", "relaunch the formation")
    assert member is not None and member.startswith(f"call refused: {SEED}. route: call-member fixer")


def test_a_plan_asker_or_a_plan_target_needs_no_ceiling() -> None:
    bare = manifest("fixer", agent=True)
    assert ceiling_refusal("delegate-task", manifest("plan"), bare, "fixer", "x") is None
    assert ceiling_refusal("delegate-task", manifest("lead", agent=True), manifest("tool"), "tool", "x") is None
    assert ceiling_of(manifest("tool")) is None


def test_a_zero_turn_or_zero_token_ceiling_is_no_ceiling() -> None:
    agent = manifest("a", agent=True, budget=5)
    no_turns = attrs.evolve(agent, inference=attrs.evolve(agent.inference, max_turns=0))
    zero = manifest("a", agent=True, budget=0)
    assert ceiling_of(agent) is not None and ceiling_of(agent).positive  # type: ignore[union-attr]
    assert block(agent, no_turns, "a", "x") is not None and "inference.max_turns" in block(agent, no_turns, "a", "x")[0]  # type: ignore[index]
    assert block(agent, zero, "a", "x") is not None


def test_agent_who_shows_the_route_s_ceiling_and_blocks_by_the_same_rule() -> None:
    lead = capsule("lead", agent=True, shell=("ls", "cargo"), spawn=("capped", "bare"))
    catalog = Catalog((
        lead,
        capsule("capped", agent=True, budget=20000, shell=("cargo",)),
        capsule("bare", agent=True, shell=("cargo",)),
    ))
    ans = answer(catalog, can="cargo", asking="lead")
    (ready,) = ans.ready
    (blocked,) = ans.blocked
    assert (ready.target, blocked.target) == ("capped", "bare")
    assert route_json(ready)["ceiling"] == {"max_turns": 10, "budget_tokens": 20000, "positive": True}
    assert route_json(blocked)["ceiling"] == {"max_turns": 10, "budget_tokens": None, "positive": False}
    text = to_text(ans, can="cargo", skill=None)
    assert "ceiling 10 turns, 20000 tokens per task" in text
    assert "ceiling:   none (inference.budget_tokens is not set)" in text
    why = ceiling_refusal("delegate-task", lead.manifest, catalog.capsules[2].manifest, "bare", "restart the session")
    assert why is not None and blocked.reason in why and (blocked.authorize or "") in why
