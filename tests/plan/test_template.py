"""Tests of plan templates: values, filters, parse errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur.plan.template import Scope, StepView, TemplateError, parse_template

SCOPE = Scope(
    task="audit src/app now\nsecond line",
    workdir="/w",
    steps={"count": StepView(stdout="42", stderr="warn", exit_code="0", output="42", status="ok")},
)


def render(text: str, scope: Scope = SCOPE) -> str:
    return parse_template(text).render(scope)


class TestValues:
    def test_literal_only(self) -> None:
        """Text without expressions renders as written."""
        t = parse_template("plain text")
        assert t.is_literal and t.render(SCOPE) == "plain text"

    def test_task(self) -> None:
        """`task` is the whole task text."""
        assert render("got: {{ task }}") == "got: audit src/app now\nsecond line"

    def test_words_and_lines(self) -> None:
        """`task.words[N]` / `task.lines[N]` pick parts; negative counts from the end."""
        assert render("{{ task.words[1] }}|{{task.words[-1]}}|{{ task.lines[1] }}") == "src/app|line|second line"

    def test_out_of_range_is_empty(self) -> None:
        """An index past the end renders empty, never fails."""
        assert render("[{{ task.words[99] }}]") == "[]"

    def test_step_fields(self) -> None:
        """Step fields render their text."""
        assert render("{{ steps.count.stdout }} {{ steps.count.exit_code }} {{ steps.count.status }}") == "42 0 ok"

    def test_unknown_step_at_render_is_empty(self) -> None:
        """A step not in scope (skipped, not yet run) renders empty."""
        assert render("[{{ steps.other.output }}]") == "[]"

    def test_workdir_and_literal(self) -> None:
        """`workdir` and quoted literals render."""
        assert render('{{ workdir }} {{ "{{ not a template }}" }}') == "/w {{ not a template }}"

    def test_session_and_formation_ids(self) -> None:
        """`session_id` and `formation_id` render the scope's ids ('' outside a formation)."""
        scope = Scope(task="t", session_id="ses_" + "a" * 32, formation_id="frm_" + "b" * 32)
        assert render("{{ session_id }} {{ formation_id }}", scope) == f"ses_{'a' * 32} frm_{'b' * 32}"
        assert render("[{{ formation_id }}]") == "[]"

    def test_steps_referenced(self) -> None:
        """A template reports the step ids it reads."""
        t = parse_template("{{ steps.a.stdout }} {{ steps.b-2.status | trim }} {{ task }}")
        assert t.steps == {"a", "b-2"}


class TestFilters:
    def test_after_word_default(self) -> None:
        """Filters chain left to right."""
        assert render('{{ task | after: "audit " | word: 0 }}') == "src/app"
        assert render('{{ task | after: "missing" | default: "." }}') == "."

    def test_before_trim_line(self) -> None:
        """before, trim and line filters."""
        assert render('{{ task | before: "now" | trim }}') == "audit src/app"
        assert render("{{ task | line: -1 }}") == "second line"

    def test_match(self) -> None:
        """match gives the first group, or the whole match, or ''."""
        assert render('{{ task | match: "src/(\\\\w+)" }}') == "app"
        assert render('{{ task | match: "s\\\\w+" }}') == "src"
        assert render('{{ task | match: "zzz" }}') == ""

    def test_count_lines(self) -> None:
        """count_lines counts non-blank lines."""
        assert render("{{ task | count_lines }}", Scope(task="a\n\n b \nc\n")) == "3"
        assert render("{{ task | count_lines }}", Scope(task="")) == "0"

    def test_pipe_inside_quotes(self) -> None:
        """A | inside a quoted argument is not a filter separator."""
        scope = Scope(task="a|b")
        assert render('{{ task | after: "|" }}', scope) == "b"


class TestParseErrors:
    @pytest.mark.parametrize(
        ("text", "needle"),
        [
            ("{{ task", "never closed"),
            ("oops }}", "without an opening"),
            ("{{ }}", "empty expression"),
            ("{{ tasks }}", "unknown value"),
            ("{{ steps.a.stdoutt }}", "unknown step field"),
            ("{{ task | shout }}", "unknown filter"),
            ("{{ task | word: x }}", "whole number"),
            ("{{ task | after: x }}", "quoted string"),
            ("{{ task | after }}", "needs an argument"),
            ("{{ task | trim: 1 }}", "takes no argument"),
            ('{{ task | match: "(" }}', "bad regular expression"),
            ('{{ "a\\q" }}', "unknown escape"),
        ],
    )
    def test_refused(self, text: str, needle: str) -> None:
        """Malformed templates are refused at parse with a reason."""
        with pytest.raises(TemplateError, match=needle):
            parse_template(text)


class TestProperties:
    @given(st.text().filter(lambda s: "{{" not in s and "}}" not in s))
    def test_plain_text_round_trips(self, text: str) -> None:
        """Any text without braces pairs renders as itself."""
        assert parse_template(text).render(Scope()) == text

    @given(st.text())
    def test_task_renders_verbatim(self, task: str) -> None:
        """The task text is substituted verbatim, whatever it holds."""
        assert parse_template("{{ task }}").render(Scope(task=task)) == task
