"""MURMUR_SPAWNER: the handle a delegated child reports to (seed 000, "What is injected")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur.delegation.spawner import SpawnerHandle, parse_spawner, spawner_problem
from murmur.errors import DiagnosticError

GOOD = {
    "url": "http://127.0.0.1:4100",
    "session_id": "ses_" + "a" * 32,
    "context_id": "ctx_" + "b" * 32,
    "trust": "trusted",
    "delegation_id": "dlg_" + "c" * 32,
}


def with_(**changes: object) -> str:
    data = {**GOOD, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not None})


class TestParse:
    def test_round_trip(self) -> None:
        """A handle encodes to compact JSON and parses back to the same value."""
        handle = SpawnerHandle(**GOOD)
        text = handle.encode()
        assert " " not in text and json.loads(text) == GOOD
        assert parse_spawner(text) == handle

    @pytest.mark.parametrize("value", [None, "", "   "])
    def test_unset_or_blank_is_normal(self, value: str | None) -> None:
        """Unset or blank means the capsule was not delegated."""
        assert parse_spawner(value) is None

    @pytest.mark.parametrize(
        ("value", "reason"),
        [
            ("not json", "is not JSON"),
            ("[1, 2]", "is not a JSON object"),
            (with_(url=None), "`url` is missing"),
            (with_(delegation_id=None), "`delegation_id` is missing"),
            (with_(context_id=7), "`context_id` is not a non-empty string"),
            (with_(session_id=""), "`session_id` is not a non-empty string"),
            (with_(url="ftp://x"), "`url` is not an http:// address"),
            (with_(trust="root"), "`trust` is neither"),
            (with_(session_id="frm_x"), "`session_id` is not a session id"),
            (with_(delegation_id="mcl_x"), "`delegation_id` is not a delegation id"),
        ],
    )
    def test_unreadable_refuses_with_reason(self, value: str, reason: str) -> None:
        """Anything else is E-RUN-020 naming the reason."""
        with pytest.raises(DiagnosticError) as info:
            parse_spawner(value)
        assert info.value.code == "E-RUN-020"
        assert reason in info.value.diagnostics[0].message

    @given(st.text(min_size=1).filter(lambda s: s.strip() and len(s.strip()) > 3))
    def test_message_never_shows_the_value(self, junk: str) -> None:
        """The diagnostic names a reason, never any of the value."""
        secret = "msc1.SECRET" + junk
        problem = spawner_problem(secret)
        assert problem is not None and "SECRET" not in problem
        with pytest.raises(DiagnosticError) as info:
            parse_spawner(json.dumps({**GOOD, "trust": secret}))
        assert "SECRET" not in str(info.value)
