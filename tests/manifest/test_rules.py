"""Tests of the pure value rules: relative paths, endpoints, durations."""

from __future__ import annotations

import pytest

from murmur.manifest.rules import (
    endpoint_problem,
    is_capsule_name,
    is_scoped_name,
    parse_duration,
    relative_path_problem,
)


class TestRelativePaths:
    @pytest.mark.parametrize("path", [".", "src", "a/b/../c", "./x", "a/.."])
    def test_inside(self, path: str) -> None:
        """Relative paths that stay inside are accepted."""
        assert relative_path_problem(path) is None

    @pytest.mark.parametrize("path", ["", "/etc", "\\x", "C:\\x", "c:x", "..", "a/../..", "a\x00"])
    def test_outside(self, path: str) -> None:
        """Absolute, drive-letter, escaping and NUL paths are refused."""
        assert relative_path_problem(path) is not None


class TestEndpoints:
    @pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://localhost:1/v1",
                                     "http://127.0.0.2", "http://[::1]:80"])
    def test_accepted(self, url: str) -> None:
        """https anywhere, http to loopback."""
        assert endpoint_problem(url) is None

    @pytest.mark.parametrize("url", ["http://example.com", "api.openai.com", "ftp://h",
                                     "https://", "http://10.0.0.1", "https://h:99999"])
    def test_refused(self, url: str) -> None:
        """http off loopback, schemeless, other schemes and bad ports are refused."""
        assert endpoint_problem(url) is not None


class TestNamesAndDurations:
    def test_capsule_names(self) -> None:
        """Names are [a-z0-9-], no dash at either end, at most 100 characters."""
        assert is_capsule_name("a") and is_capsule_name("a-1") and is_capsule_name("a" * 100)
        for bad in ("", "-a", "a-", "A", "a_b", "a" * 101, "a/b"):
            assert not is_capsule_name(bad), bad

    def test_scoped_names(self) -> None:
        """Scoped names are <scope>/<name>."""
        assert is_scoped_name("local/demo")
        assert not is_scoped_name("demo") and not is_scoped_name("local/") and not is_scoped_name("a/b/c")

    @pytest.mark.parametrize(("text", "seconds"), [("10", 10), ("10s", 10), ("2m", 120),
                                                   ("3h", 10800), ("7d", 604800), ("0", 0)])
    def test_durations(self, text: str, seconds: int) -> None:
        """Durations are whole numbers with an optional s/m/h/d suffix."""
        assert parse_duration(text) == seconds

    @pytest.mark.parametrize("text", ["", "1.5h", "10 days", "-1", "h"])
    def test_bad_durations(self, text: str) -> None:
        """Anything else is not a duration."""
        assert parse_duration(text) is None
