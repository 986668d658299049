"""Tests of --deadline parsing."""

from __future__ import annotations

import datetime as dt

import pytest

from murmur.errors import UsageError
from murmur.session.deadline import parse_deadline, rfc3339

NOW = 1_800_000_000.0


class TestParse:
    @pytest.mark.parametrize(
        ("value", "offset"),
        [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), (" 5s ", 5)],
    )
    def test_durations(self, value: str, offset: int) -> None:
        """Durations count from now."""
        assert parse_deadline(value, now=NOW) == NOW + offset

    def test_rfc3339(self) -> None:
        """An RFC 3339 time with a zone names that moment."""
        expected = dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC).timestamp()
        assert parse_deadline("2027-01-15T08:00:00Z", now=NOW) == expected
        at = parse_deadline("2027-01-15T08:00:00.250+01:00", now=NOW)
        assert at == parse_deadline("2027-01-15T07:00:00.250Z", now=NOW)
        assert rfc3339(at) == "2027-01-15T07:00:00.250Z"

    def test_past_moment_allowed(self) -> None:
        """A moment already past is returned as is (the session winds down at once)."""
        assert parse_deadline("2020-01-01T00:00:00Z", now=NOW) < NOW

    @pytest.mark.parametrize(
        "value",
        ["", "soon", "90", "0s", "5w", "2027-01-15", "2027-01-15T08:00:00", "20000d", "2099-01-01T00:00:00Z"],
    )
    def test_refused(self, value: str) -> None:
        """Anything else is E-RUN-054, a usage error."""
        with pytest.raises(UsageError) as info:
            parse_deadline(value, now=NOW)
        assert info.value.code == "E-RUN-054"
        assert info.value.exit_status == 2
