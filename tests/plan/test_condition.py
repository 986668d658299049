"""Tests of step conditions (`if`)."""

from __future__ import annotations

import pytest

from murmur.plan.condition import ConditionError, parse_condition
from murmur.plan.template import Scope, StepView, TemplateError

SCOPE = Scope(
    task="please fix urgent bug",
    steps={
        "x": StepView(stdout="12", exit_code="0", status="ok", output="12"),
        "e": StepView(stdout="", exit_code="2", status="failed"),
    },
)


def decide(text: str) -> bool:
    return parse_condition(text).evaluate(SCOPE)


class TestEvaluate:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("{{ steps.x.exit_code }} == 0", True),
            ("{{ steps.e.exit_code }} == 0", False),
            ("{{ steps.e.exit_code }} != 0", True),
            ("{{ steps.x.status }} == ok", True),
            ("{{ steps.x.stdout }} > 10", True),
            ("{{ steps.x.stdout }} <= 11.5", False),
            ("{{ steps.x.stdout }} >= 12", True),
            ("{{ steps.x.stdout }} < 100", True),
            ("{{ steps.x.stdout }} == 12.0", True),
            ("{{ task }} contains urgent", True),
            ('{{ task }} contains "fix urgent"', True),
            ('{{ task }} contains " bug "', False),
            ("not {{ task }} contains urgent", False),
            ("{{ steps.x.stdout }}", True),
            ("{{ steps.e.stdout }}", False),
            ("not {{ steps.e.stdout }}", True),
            ("false", False),
            ("OFF", False),
            ("0", False),
            ("yes", True),
        ],
    )
    def test_table(self, text: str, expected: bool) -> None:
        """Each condition decides as the grammar says."""
        assert decide(text) is expected

    def test_operator_inside_quotes_is_text(self) -> None:
        """An operator inside a quoted operand is part of the text."""
        scope = Scope(task="a == b")
        assert parse_condition('{{ task }} == "a == b"').evaluate(scope)

    def test_ordering_needs_numbers(self) -> None:
        """An ordering comparison with text is a condition error naming both sides."""
        with pytest.raises(ConditionError, match="both sides must be numbers"):
            decide("{{ task }} > 3")

    def test_steps_read(self) -> None:
        """A condition reports the steps both operands read."""
        assert parse_condition("{{ steps.a.stdout }} == {{ steps.b.stdout }}").steps == {"a", "b"}


class TestParseErrors:
    @pytest.mark.parametrize(
        ("text", "needle"),
        [
            ("", "empty"),
            ("not   ", "empty"),
            ("{{ steps.x.stdout }} == 1 == 1", "one comparison"),
            ("{{ steps.x.exit_code }}==0", "spaces around"),
            ("== 1", "operand is missing"),
            ("{{ steps.x.stdout }} ==   ", "operand is missing"),
            ("{{ nope }} == 1", "unknown value"),
        ],
    )
    def test_refused(self, text: str, needle: str) -> None:
        """Malformed conditions are refused at parse."""
        with pytest.raises(TemplateError, match=needle):
            parse_condition(text)
