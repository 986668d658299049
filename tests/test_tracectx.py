"""W3C trace context (murmur.tracectx; spec/trace.md "Trace ids")."""

from __future__ import annotations

import trio
from hypothesis import given
from hypothesis import strategies as st

from murmur import tracectx
from murmur.tracectx import SpanContext

GOOD = "00-" + "4bf92f3577b34da6a3ce929d0e0e4736" + "-" + "00f067aa0ba902b7" + "-01"


def test_parse_good_and_round_trip() -> None:
    """A version-00 value parses, and the parsed span formats back (sampled)."""
    span = tracectx.parse(GOOD)
    assert span == SpanContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert span.traceparent == GOOD
    assert tracectx.parse(" " + GOOD + "\t") == span


def test_parse_refuses_malformed() -> None:
    """Upper case, all-zero ids, other versions, short fields and junk start a new trace (None)."""
    for bad in (None, "", GOOD.upper(), "01" + GOOD[2:], "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01", GOOD[:-1], GOOD + "-x", "junk"):
        assert tracectx.parse(bad) is None, bad


@given(st.text(max_size=80))
def test_parse_never_raises(value: str) -> None:
    """Any text is a span or None, never an exception."""
    got = tracectx.parse(value)
    assert got is None or (len(got.trace_id), len(got.span_id)) == (32, 16)


def test_env_and_headers_follow_the_current_span() -> None:
    """inject/with_env carry CURRENT; outside traced work headers are unchanged and
    outgoing() makes a fresh root."""
    assert tracectx.inject({}) == {}
    assert tracectx.with_env({"A": "1"}) == {"A": "1"}
    assert tracectx.parse(tracectx.outgoing()) is not None
    span = SpanContext("1" * 32, "2" * 16)
    token = tracectx.CURRENT.set(span)
    try:
        assert tracectx.inject({"x": "y"}) == {"x": "y", "traceparent": span.traceparent}
        assert tracectx.inject({"traceparent": "given"}) == {"traceparent": "given"}
        assert tracectx.with_env({"TRACEPARENT": "old"}) == {"TRACEPARENT": span.traceparent}
        assert tracectx.outgoing() == span.traceparent
        assert tracectx.from_env({"TRACEPARENT": span.traceparent}) == span
    finally:
        tracectx.CURRENT.reset(token)


async def test_tasks_started_inherit_the_span() -> None:
    """Trio copies the starting task's span into the tasks it starts (how a member call made
    from a task names that task)."""
    seen: list[SpanContext | None] = []

    async def child() -> None:
        seen.append(tracectx.CURRENT.get())

    span = SpanContext("3" * 32, "4" * 16)
    async with trio.open_nursery() as nursery:
        token = tracectx.CURRENT.set(span)
        nursery.start_soon(child)
        tracectx.CURRENT.reset(token)
    assert seen == [span]
