"""A step's ``if``: one comparison of two templates, or the truthiness of one (spec/plan.md).

Grammar (nothing is evaluated as code)::

    condition := ["not"] operand [op operand]
    op        := == | != | < | <= | > | >= | contains
    operand   := template text, or a "quoted" / 'quoted' template (spaces and operators inside)

Operands are rendered, then compared. Unquoted operands are trimmed; quoted ones are kept as
written. ``==``/``!=`` compare as numbers when both sides are numbers, else as text; ``<``
etc. need numbers on both sides (otherwise the step fails with the reason). Without an
operator the rendered text is false when it is empty, ``0``, ``false``, ``no`` or ``off``
(any case), true otherwise.
"""

from __future__ import annotations

import re

import attrs

from murmur.plan.template import Scope, Template, TemplateError, parse_template, unquote

__all__ = ["OPERATORS", "Condition", "ConditionError", "Operand", "parse_condition"]

OPERATORS = ("==", "!=", "<=", ">=", "<", ">", "contains")
FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})
_OP_RE = re.compile(r"(?:(?<=\s)|^)(==|!=|<=|>=|<|>|contains)(?=\s|$)")
_NUMBER_RE = re.compile(r"^-?\d+(?:\.\d+)?$")


class ConditionError(ValueError):
    """A condition that parsed but cannot be decided (a non-number compared with ``<``)."""


@attrs.frozen
class Operand:
    """One side of a condition."""

    template: Template
    quoted: bool = False

    def render(self, scope: Scope) -> str:
        """Rendered text (trimmed unless quoted)."""
        text = self.template.render(scope)
        return text if self.quoted else text.strip()


@attrs.frozen
class Condition:
    """A parsed ``if``.

    Attributes:
        source (str): the text as written.
        left (Operand): the operand (the only one without an operator).
        op (str | None): one of :data:`OPERATORS`, or None for truthiness.
        right (Operand | None): the right operand.
        negate (bool): a leading ``not``.
    """

    source: str
    left: Operand
    op: str | None = None
    right: Operand | None = None
    negate: bool = False

    @property
    def steps(self) -> frozenset[str]:
        """Ids of the steps the condition reads."""
        found = self.left.template.steps
        if self.right is not None:
            found |= self.right.template.steps
        return found

    def evaluate(self, scope: Scope) -> bool:
        """Decide the condition in ``scope``.

        Raises:
            ConditionError: an ordering comparison with a side that is not a number.
        """
        return self._decide(scope) != self.negate

    def _decide(self, scope: Scope) -> bool:
        left = self.left.render(scope)
        if self.op is None or self.right is None:
            return left.strip().lower() not in FALSE_WORDS
        right = self.right.render(scope)
        if self.op == "contains":
            return right in left
        numbers = _NUMBER_RE.match(left.strip()) and _NUMBER_RE.match(right.strip())
        if self.op in ("==", "!="):
            same = float(left) == float(right) if numbers else left == right
            return same == (self.op == "==")
        if not numbers:
            raise ConditionError(
                f"`{self.source}`: cannot compare {left!r} {self.op} {right!r} (both sides must be numbers)"
            )
        a, b = float(left), float(right)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[self.op]


def _mask(text: str) -> str:
    """``text`` with ``{{…}}`` and quoted spans replaced by ``x`` (same length)."""
    out = list(text)
    i = 0
    while i < len(text):
        if text.startswith("{{", i):
            end = text.find("}}", i + 2)
            end = len(text) if end < 0 else end + 2
        elif text[i] in "\"'":
            end = i + 1
            while end < len(text) and text[end] != text[i]:
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, len(text))
        else:
            i += 1
            continue
        for j in range(i, end):
            out[j] = "x"
        i = end
    return "".join(out)


def _operand(text: str, source: str) -> Operand:
    stripped = text.strip()
    if not stripped:
        raise TemplateError(f"`{source}`: an operand is missing")
    inner = unquote(stripped)
    if inner is not None:
        return Operand(parse_template(inner), quoted=True)
    return Operand(parse_template(stripped))


def parse_condition(text: str) -> Condition:
    """Parse an ``if`` condition.

    Args:
        text (str): the condition as written in the plan.

    Returns:
        Condition: the parsed condition.

    Raises:
        TemplateError: an empty condition, more than one operator, a missing operand, or a
            malformed template inside.
    """
    masked = _mask(text)
    negate = False
    body_start = len(masked) - len(masked.lstrip())
    if re.match(r"not\s", masked[body_start:]):
        negate = True
        body_start += 3
    body, mbody = text[body_start:], masked[body_start:]
    if not body.strip():
        raise TemplateError(f"`{text}`: the condition is empty")
    ops = list(_OP_RE.finditer(mbody))
    if len(ops) > 1:
        raise TemplateError(
            f"`{text}`: one comparison per condition (found {', '.join(m.group(1) for m in ops)})"
        )
    rest = mbody
    for m in ops:
        rest = rest[: m.start()] + " " * (m.end() - m.start()) + rest[m.end() :]
    if re.search(r"[<>]|==|!=", rest):
        raise TemplateError(
            f"`{text}`: write the operator with spaces around it, or quote text holding < > = !"
        )
    if not ops:
        return Condition(text, _operand(body, text), negate=negate)
    m = ops[0]
    left = _operand(body[: m.start()], text)
    right = _operand(body[m.end() :], text)
    return Condition(text, left, m.group(1), right, negate)
