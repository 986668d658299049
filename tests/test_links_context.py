"""The `mur context` text and how an agent gets it (pure parts; spec/links.md "mur context")."""

from __future__ import annotations

from murmur.links.context import ContextFacts, context_text, general_text, with_context


def test_context_names_the_spawn_set_bounds_and_statuses() -> None:
    """The text names the capsule, each callable capsule with its description, the bounds and exits."""
    text = context_text(ContextFacts("boss", [("kid", "echoes"), ("napper", "")], depth=1, watch_secs=600,
                                     connections=8))
    assert "capsule `boss`" in text and "  kid — echoes" in text and "  napper\n" in text
    assert "124" in text and "126" in text and "& wait" in text and "600s" in text
    assert len(text.splitlines()) <= 60


def test_general_form_outside_a_session() -> None:
    """Outside a session: the form, no capsule names."""
    text = general_text()
    assert "Outside a session" in text and "Exit status" in text and len(text.splitlines()) <= 60


def test_with_context_appends_after_the_system_prompt() -> None:
    """The context follows the capsule's own system prompt; alone when there is none; nothing added without."""
    assert with_context("Be terse.", "CTX") == "Be terse.\n\nCTX"
    assert with_context(None, "CTX") == "CTX"
    assert with_context("Be terse.", None) == "Be terse."
    assert with_context(None, None) is None


def test_context_states_the_tree_caps() -> None:
    """Issue 30 item 3: `mur context` shows the per-tree total and the same-capsule chain cap."""
    text = context_text(ContextFacts("boss", [("kid", "")], depth=1, watch_secs=600, connections=8,
                                     tree_total=10, same_chain=2))
    assert "This tree may ask for 10 delegations in all (refused ones count)" in text, text
    assert "at most 2 times in a row" in text, text
    unset = context_text(ContextFacts("boss", [("kid", "")], depth=1, watch_secs=600, connections=8))
    assert "any number of delegations" in unset and "without a chain cap" in unset, unset
