"""Tests of origin/trust/lane classification (contract sheet section 6.5)."""

from __future__ import annotations

import pytest

from murmur.session.origin import LOCAL_USER, classify


class TestClassify:
    @pytest.mark.parametrize(
        ("headers", "expected"),
        [
            ({}, ("event", "untrusted", "bg")),
            ({"x-murmur-task-origin": "user"}, ("event", "untrusted", "bg")),
            ({"x-murmur-task-origin": "system"}, ("event", "untrusted", "bg")),
            ({"x-murmur-task-origin": "bogus", "x-murmur-task-trust": "trusted"}, ("event", "untrusted", "bg")),
            ({"x-murmur-task-origin": "peer"}, ("peer", "untrusted", "peer")),
            ({"x-murmur-task-origin": "peer", "x-murmur-task-trust": "trusted"}, ("peer", "trusted", "peer")),
            ({"x-murmur-task-origin": "PEER", "x-murmur-task-trust": "weird"}, ("peer", "untrusted", "peer")),
            ({"x-murmur-task-origin": "completion", "x-murmur-task-trust": "trusted"}, ("completion", "trusted", "bg")),
        ],
    )
    def test_table(self, headers: dict[str, str], expected: tuple[str, str, str]) -> None:
        """Only peer and completion are taken from the wire; all else is an untrusted event."""
        c = classify(headers)
        assert (c.origin, c.trust, c.lane) == expected

    def test_delegation_headers_read_only_for_completion(self) -> None:
        """The delegation headers are read on completion requests and ignored elsewhere."""
        h = {"x-murmur-delegation-id": "dlg_1", "x-murmur-completion-session": "ses_1"}
        assert classify(h).delegation_id is None
        c = classify({**h, "x-murmur-task-origin": "completion"})
        assert (c.delegation_id, c.completion_session) == ("dlg_1", "ses_1")

    def test_local_user(self) -> None:
        """A local task is user, trusted, user lane."""
        assert (LOCAL_USER.origin, LOCAL_USER.trust, LOCAL_USER.lane) == ("user", "trusted", "user")
