"""The child's environment, built from nothing (seed 000, "The child's environment")."""

from __future__ import annotations

from murmur import tracectx
from murmur.delegation.environment import child_environment

PARENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/op",
    "MURMUR_HOME": "/tmp/mh",
    "SHARED": "shared-value",
    "PARENT_ONLY": "parent-value",
    "CHILD_WANTS": "not-granted",
    "OPENAI_API_KEY": "sk-never",
    "MURMUR_ROOST_URL": "http://stale",
    "MURMUR_SPAWNER": "stale",
}


def build(parent: dict[str, str] = PARENT, parent_allow: tuple[str, ...] = ("SHARED", "PARENT_ONLY", "ABSENT"),
          child_allow: tuple[str, ...] = ("SHARED", "CHILD_WANTS", "ABSENT", "PATH", "MURMUR_SPAWNER")) -> dict[str, str]:
    return child_environment(
        parent,
        parent_allow=parent_allow,
        child_allow=child_allow,
        roost_url="http://127.0.0.1:7700",
        spawner='{"url":"x"}',
        lifeline_fd=5,
    )


class TestChildEnvironment:
    def test_exactly_the_table(self) -> None:
        """PATH, HOME, MURMUR_HOME, the runtime's three, TRACEPARENT (the delegating work's
        span: here, outside any, a fresh root), and the names both lists hold."""
        env = build()
        assert tracectx.parse(env.pop("TRACEPARENT")) is not None
        assert env == {
            "SHARED": "shared-value",
            "MURMUR_HOME": "/tmp/mh",
            "PATH": "/usr/bin:/bin",
            "HOME": "/home/op",
            "MURMUR_ROOST_URL": "http://127.0.0.1:7700",
            "MURMUR_SPAWNER": '{"url":"x"}',
            "MURMUR_SPAWNER_LIFELINE": "5",
        }

    def test_runtime_names_cannot_be_displaced(self) -> None:
        """A child listing a runtime name under env.allow gets the runtime's value."""
        env = build(parent_allow=("PATH", "MURMUR_SPAWNER"), child_allow=("PATH", "MURMUR_SPAWNER"))
        assert env["MURMUR_SPAWNER"] == '{"url":"x"}' and env["PATH"] == "/usr/bin:/bin"

    def test_name_the_parent_does_not_hold_is_absent(self) -> None:
        """Both lists declare ABSENT, the parent does not hold it: absent from the child."""
        assert "ABSENT" not in build()

    def test_nothing_else_leaks(self) -> None:
        """Variables outside both lists (keys included) never reach the child."""
        env = build()
        assert "OPENAI_API_KEY" not in env and "PARENT_ONLY" not in env and "CHILD_WANTS" not in env

    def test_blank_murmur_home_is_not_passed(self) -> None:
        """MURMUR_HOME passes only when set and non-blank; a missing HOME falls back."""
        env = child_environment({"MURMUR_HOME": " "}, parent_allow=(), child_allow=(), roost_url="u",
                                spawner="s", lifeline_fd=3, home_fallback="/fallback")
        assert "MURMUR_HOME" not in env and env["HOME"] == "/fallback" and env["PATH"]


def test_child_joins_the_delegating_span() -> None:
    """The child's TRACEPARENT names the span of the work that delegated (spec/trace.md)."""
    span = tracectx.SpanContext("5" * 32, "6" * 16)
    token = tracectx.CURRENT.set(span)
    try:
        assert build()["TRACEPARENT"] == span.traceparent
        assert build(parent={**PARENT, "TRACEPARENT": "00-" + "7" * 32 + "-" + "8" * 16 + "-01"},
                     parent_allow=("TRACEPARENT",), child_allow=("TRACEPARENT",))["TRACEPARENT"] == span.traceparent
    finally:
        tracectx.CURRENT.reset(token)
