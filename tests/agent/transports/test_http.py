"""Shared HTTP plumbing: endpoints, key references, backoff, reply helpers (pure parts)."""

from __future__ import annotations

import pytest

from murmur.agent.transports import InferenceError
from murmur.agent.transports.http import (
    RetryPolicy,
    check_endpoint,
    is_retryable,
    key_variable,
    malformed_reply,
    parse_retry_after,
    redact,
    resolve_api_key,
    retry_delay,
    usage_tokens,
)


class TestKeys:
    def test_reference_forms(self) -> None:
        """Only ${UPPER_SNAKE_CASE} is a reference; anything else is literal."""
        assert key_variable("${API_KEY}") == "API_KEY"
        assert key_variable("${_X1}") == "_X1"
        for literal in ("$API_KEY", "${api_key}", "${A-B}", "sk-123", "${A}x", None):
            assert key_variable(literal) is None

    def test_resolution(self) -> None:
        """A reference reads the environment; a literal is itself; None means keyless."""
        assert resolve_api_key("${K}", {"K": "v"}) == "v"
        assert resolve_api_key("sk-lit", {}) == "sk-lit"
        assert resolve_api_key(None, {"K": "v"}) is None

    @pytest.mark.parametrize("env", [{}, {"K": ""}, {"K": "  "}])
    def test_unset_fails_naming_the_variable(self, env: dict[str, str]) -> None:
        """An unset or blank variable fails with runtime_error naming it."""
        with pytest.raises(InferenceError) as info:
            resolve_api_key("${K}", env)
        assert info.value.cause == "runtime_error" and "${K}" in info.value.message

    def test_redact(self) -> None:
        """The secret is replaced everywhere; tiny or absent secrets change nothing."""
        assert redact("a sk-12345 b sk-12345", "sk-12345") == "a [redacted] b [redacted]"
        assert redact("abc", None) == "abc" and redact("abc", "a") == "abc"


class TestEndpoint:
    def test_reasons(self) -> None:
        """Each refusal says why."""
        assert "not loopback" in check_endpoint("http://example.com")
        assert "http(s) URL" in check_endpoint("example.com")
        assert "query" in check_endpoint("https://x/?a=1")
        assert check_endpoint("https://x") is None


class TestBackoff:
    def test_retryable_statuses(self) -> None:
        """429 and 5xx are retried; other statuses are not."""
        assert [s for s in (200, 400, 401, 403, 404, 408, 429, 500, 502, 503, 599) if is_retryable(s)] == [
            429, 500, 502, 503, 599]

    def test_exponential_capped(self) -> None:
        """Waits double from the base up to the cap; jitter adds at most its bound."""
        p = RetryPolicy(base_delay=1.0, max_delay=8.0, jitter=0.25)
        assert [retry_delay(p, n, None, 0.0) for n in range(1, 7)] == [1, 2, 4, 8, 8, 8]
        assert retry_delay(p, 1, None, 0.999) == pytest.approx(1.24975)

    def test_retry_after(self) -> None:
        """A longer Retry-After wins, capped; a shorter one does not shorten the wait."""
        p = RetryPolicy(base_delay=1.0, max_delay=30.0, jitter=0.0, max_retry_after=60.0)
        assert retry_delay(p, 1, 10.0, 0.0) == 10.0
        assert retry_delay(p, 3, 1.0, 0.0) == 4.0
        assert retry_delay(p, 1, 3600.0, 0.0) == 60.0

    def test_parse_retry_after(self) -> None:
        """Delta seconds parse; dates, negatives and junk do not."""
        assert parse_retry_after("5") == 5.0 and parse_retry_after(" 1.5 ") == 1.5
        for bad in (None, "Wed, 21 Oct 2015 07:28:00 GMT", "-1", "nan", "inf"):
            assert parse_retry_after(bad) is None


class TestKeyCharacters:
    @pytest.mark.parametrize("value", ["sk-a b", "sk-\nX-Injected: 1", "sk-é", "sk-\t"])
    def test_unsendable_keys_fail_without_quoting(self, value: str) -> None:
        """A key that cannot be a header value fails naming its source, never the value."""
        with pytest.raises(InferenceError) as info:
            resolve_api_key("${K}", {"K": value})
        assert "${K}" in info.value.message and value.strip() not in info.value.message
        with pytest.raises(InferenceError):
            resolve_api_key(value, {})


class TestReplyHelpers:
    @pytest.mark.parametrize(
        ("data", "counts"),
        [
            ({"usage": {"in": 3, "out": 5}}, (3, 5)),
            ({"usage": {"in": 3}}, (3, 0)),
            ({"usage": {"in": True, "out": "5"}}, (0, 0)),
            ({"usage": []}, (0, 0)),
            ({}, (0, 0)),
        ],
    )
    def test_usage_tokens(self, data: dict[str, object], counts: tuple[int, int]) -> None:
        """Token counts are whole numbers from usage; anything else counts 0."""
        assert usage_tokens(data, "in", "out") == counts

    def test_malformed_reply(self) -> None:
        """A malformed reply is a malformed_response naming the dialect and the reason."""
        err = malformed_reply("OpenAI", "no choices")
        assert err.cause == "malformed_response"
        assert err.message == "the OpenAI-compatible provider's reply is malformed: no choices"
