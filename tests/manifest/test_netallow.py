"""Tests of allow entries: their forms (E-CAP-001), parsing, URL targets and coverage (sheet 1.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur.manifest.netallow import (
    NetEntry,
    allow_entry_problem,
    covers,
    entry_covers,
    is_loopback_host,
    parse_net_entry,
    url_target,
)

_SAMPLES = [
    "example.com", "Example.COM", "localhost", "example.com:443", "https://example.com",
    "http://localhost:8080", "https://example.com/", "10.0.0.1", "10.0.0.1:22", "[::1]",
    "[::1]:8080", "http://[::1]:9", " example.com ", "", "ftp://example.com",
    "https://example.com/path", "https://h?q=1", "example.com:0", "example.com:65536",
    "example.com:http", "exa mple.com", "-bad.com", "https://user@h", "https://", "[::1",
    "[zz]", "https://h:", "::1", "h/x", ":80",
]


class TestAllowEntries:
    @pytest.mark.parametrize("entry", [
        "example.com", "localhost", "example.com:443", "https://example.com",
        "http://localhost:8080", "https://example.com/", "10.0.0.1", "10.0.0.1:22", "[::1]",
        "[::1]:8080", "http://[::1]:9", "a-b.example.org",
    ])
    def test_accepted(self, entry: str) -> None:
        """URL, bare host and host:port forms parse."""
        assert allow_entry_problem(entry) is None

    @pytest.mark.parametrize("entry", [
        "", " example.com", "ftp://example.com", "https://example.com/path", "https://h?q=1",
        "https://h#f", "example.com:0", "example.com:65536", "example.com:http", "exa mple.com",
        "-bad.com", "https://user@h", "https://", "[::1", "[zz]", "https://h:", "::1", "h/x",
    ])
    def test_refused(self, entry: str) -> None:
        """Other schemes, paths, queries, bad ports and bad hosts are refused."""
        assert allow_entry_problem(entry) is not None


class TestNetEntries:
    @pytest.mark.parametrize(
        ("text", "parsed"),
        [
            ("example.com", NetEntry("example.com")),
            ("Example.COM", NetEntry("example.com")),
            ("example.com:8080", NetEntry("example.com", None, 8080)),
            ("https://example.com", NetEntry("example.com", "https", 443)),
            ("http://example.com", NetEntry("example.com", "http", 80)),
            ("https://example.com:8443/", NetEntry("example.com", "https", 8443)),
            ("[::1]:9000", NetEntry("::1", None, 9000)),
            ("[::1]", NetEntry("::1")),
            ("ftp://example.com", None),
            ("https://example.com/path", None),
            ("example.com:http", None),
            ("", None),
        ],
    )
    def test_parse(self, text: str, parsed: NetEntry | None) -> None:
        """Bare host, host:port and URL forms parse; anything else does not."""
        assert parse_net_entry(text) == parsed

    @pytest.mark.parametrize(
        ("parent", "child", "covered"),
        [
            ("example.com", "example.com", True),
            ("example.com", "https://example.com", True),  # the seed's own example
            ("example.com", "http://example.com:8080", True),
            ("example.com", "example.com:8080", True),
            ("https://example.com", "https://example.com", True),
            ("https://example.com", "https://example.com:443", True),
            ("https://example.com", "example.com", False),  # the seed's own example
            ("https://example.com", "http://example.com", False),
            ("https://example.com", "https://example.com:8443", False),
            ("example.com:8080", "http://example.com:8080", True),
            ("example.com:8080", "example.com", False),
            ("example.com:8080", "example.com:9090", False),
            ("http://example.com:8080", "example.com:8080", False),
            ("example.com", "api.example.com", False),
            ("EXAMPLE.com", "example.COM", True),
            ("weird entry", "weird entry", True),
            ("weird entry", "other", False),
        ],
    )
    def test_coverage(self, parent: str, child: str, covered: bool) -> None:
        """A bare host covers every scheme and port; a scheme form covers only itself."""
        assert covers(parent, child) is covered

    @given(st.sampled_from(["h", "h:81", "http://h", "https://h", "https://h:8443", "g"]))
    def test_reflexive(self, entry: str) -> None:
        """Every entry covers itself."""
        assert covers(entry, entry)


class TestOneGrammar:
    @pytest.mark.parametrize("entry", _SAMPLES)
    def test_parse_agrees_with_the_rule(self, entry: str) -> None:
        """An entry parses exactly when the manifest rule accepts it (spaces around ignored)."""
        assert (parse_net_entry(entry) is None) is (allow_entry_problem(entry.strip()) is not None)


class TestUrlTarget:
    @pytest.mark.parametrize(
        ("url", "target"),
        [
            ("http://127.0.0.1:41234", NetEntry("127.0.0.1", "http", 41234)),
            ("https://Example.com/a/b?q", NetEntry("example.com", "https", 443)),
            ("http://example.com", NetEntry("example.com", "http", 80)),
            ("ws://example.com", NetEntry("example.com", "ws", 0)),
            ("http://example.com:99999", None),
            ("http:///path", None),
        ],
    )
    def test_target(self, url: str, target: NetEntry | None) -> None:
        """A URL reaches its scheme, host and port (default by scheme); its path is ignored."""
        assert url_target(url) == target

    @pytest.mark.parametrize(
        ("entry", "url", "reached"),
        [
            ("example.com", "https://example.com/v1", True),
            ("example.com:8080", "http://example.com:8080/x", True),
            ("example.com:8080", "http://example.com/x", False),
            ("https://example.com", "https://example.com:443/", True),
            ("https://example.com", "http://example.com", False),
            ("[::1]:9", "http://[::1]:9/", True),
        ],
    )
    def test_entry_covers_a_target(self, entry: str, url: str, reached: bool) -> None:
        """The same coverage rule decides whether an entry reaches a concrete URL."""
        parsed, target = parse_net_entry(entry), url_target(url)
        assert parsed is not None and target is not None
        assert entry_covers(parsed, target) is reached


class TestLoopback:
    @pytest.mark.parametrize(
        ("host", "loopback"),
        [
            ("localhost", True),
            ("LocalHost", True),
            ("127.0.0.1", True),
            ("127.8.9.10", True),
            ("::1", True),
            ("10.0.0.1", False),
            ("example.com", False),
            ("localhost.example.com", False),
        ],
    )
    def test_is_loopback_host(self, host: str, loopback: bool) -> None:
        """localhost and loopback IP literals are loopback; other hosts are not."""
        assert is_loopback_host(host) is loopback
