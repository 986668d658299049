"""Plan templates: ``{{ … }}`` expressions over the task text and earlier steps (spec/plan.md).

A template is literal text with expressions between ``{{`` and ``}}``. An expression is a
value followed by filters::

    {{ task }}                       the task text
    {{ task.words[1] }}              the second whitespace-separated word ('' when absent)
    {{ task.lines[-1] }}             the last line
    {{ steps.count.stdout }}         stdout of step `count` (trailing newlines removed)
    {{ steps.x.exit_code }}          also: .stderr .output .status
    {{ workdir }}                    the session's workdir (absolute path)
    {{ session_id }}                 this session's ``ses_…`` id
    {{ formation_id }}               the formation's ``frm_…`` id ('' outside a formation)
    {{ "literal" }}                  a quoted string (how to write a literal ``{{``)
    {{ task | after: "audit " | word: 0 | default: "." }}

Filters: ``trim``, ``after: S``, ``before: S``, ``word: N``, ``line: N``, ``match: RE``
(first capture group, else the whole match, else ''), ``default: S`` (when empty),
``count_lines`` (the number of non-blank lines, as text).
Nothing is evaluated: parsing builds a small tree at plan load and rendering walks it, so
a malformed expression is a load-time error and rendering never fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

__all__ = [
    "STEP_FIELDS",
    "Expr",
    "Filter",
    "Scope",
    "StepView",
    "Template",
    "TemplateError",
    "parse_template",
]

STEP_FIELDS = ("stdout", "stderr", "exit_code", "output", "status")
"""Fields of a step a template may read."""

FILTERS_STR = ("after", "before", "match", "default")
FILTERS_INT = ("word", "line")
FILTERS_NONE = ("trim", "count_lines")

_IDENT = r"[A-Za-z_][A-Za-z0-9_-]*"
_PATH_RE = re.compile(
    rf"""^(?:
        (?P<task>task)(?:\.(?P<split>words|lines)\[(?P<index>-?\d+)\])? |
        (?P<workdir>workdir) |
        (?P<session>session_id) |
        (?P<formation>formation_id) |
        steps\.(?P<step>{_IDENT})\.(?P<field>{_IDENT})
    )$""",
    re.X,
)


class TemplateError(ValueError):
    """A template or condition that cannot be parsed.

    Attributes:
        message (str): what is wrong, naming the offending text.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


@attrs.frozen
class StepView:
    """What templates see of one step (all text; '' for a step that did not run)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: str = ""
    output: str = ""
    status: str = ""

    def get(self, field: str) -> str:
        """One of :data:`STEP_FIELDS`."""
        value: str = getattr(self, field)
        return value


@attrs.frozen
class Scope:
    """The values a template renders from.

    Attributes:
        task (str): the task text.
        workdir (str): the session workdir (absolute).
        steps (Mapping[str, StepView]): finished (or skipped) steps by id.
        session_id (str): this session's ``ses_…`` id.
        formation_id (str): the formation's ``frm_…`` id; '' when the session is in none.
    """

    task: str = ""
    workdir: str = ""
    steps: Mapping[str, StepView] = attrs.field(factory=dict)
    session_id: str = ""
    formation_id: str = ""


@attrs.frozen
class Filter:
    """One ``| name[: arg]`` of an expression."""

    name: str
    arg: str | int | None = None

    def apply(self, value: str) -> str:
        """The filtered text (never raises)."""
        arg = self.arg
        if self.name == "trim":
            return value.strip()
        if self.name == "count_lines":
            return str(sum(1 for line in value.splitlines() if line.strip()))
        if self.name == "after":
            assert isinstance(arg, str)
            head, sep, tail = value.partition(arg)
            return tail if sep else ""
        if self.name == "before":
            assert isinstance(arg, str)
            head, sep, tail = value.partition(arg)
            return head if sep else ""
        if self.name == "word":
            assert isinstance(arg, int)
            return _pick(value.split(), arg)
        if self.name == "line":
            assert isinstance(arg, int)
            return _pick(value.splitlines(), arg)
        if self.name == "match":
            assert isinstance(arg, str)
            found = re.search(arg, value)
            if found is None:
                return ""
            return (found.group(1) or "") if found.re.groups else found.group(0)
        if self.name == "default":
            assert isinstance(arg, str)
            return value if value else arg
        raise AssertionError(self.name)


def _pick(items: list[str], index: int) -> str:
    try:
        return items[index]
    except IndexError:
        return ""


@attrs.frozen
class Expr:
    """One ``{{ … }}``: a value (path or literal) and its filters.

    Attributes:
        path (str | None): ``task``, ``task.words[N]``, ``workdir``, ``session_id``,
            ``formation_id`` or ``steps.ID.FIELD``;
            None for a literal.
        literal (str): the literal's text (when ``path`` is None).
        filters (tuple[Filter, ...]): applied left to right.
    """

    path: str | None
    literal: str = ""
    filters: tuple[Filter, ...] = ()

    @property
    def step(self) -> str | None:
        """The step id the expression reads, if any."""
        if self.path is None:
            return None
        m = _PATH_RE.match(self.path)
        assert m is not None
        return m.group("step")

    def value(self, scope: Scope) -> str:
        """The expression's text in ``scope`` (never raises)."""
        if self.path is None:
            text = self.literal
        else:
            m = _PATH_RE.match(self.path)
            assert m is not None
            if m.group("task"):
                text = scope.task
                if m.group("split"):
                    parts = text.split() if m.group("split") == "words" else text.splitlines()
                    text = _pick(parts, int(m.group("index")))
            elif m.group("workdir"):
                text = scope.workdir
            elif m.group("session"):
                text = scope.session_id
            elif m.group("formation"):
                text = scope.formation_id
            else:
                view = scope.steps.get(m.group("step"), StepView())
                text = view.get(m.group("field"))
        for f in self.filters:
            text = f.apply(text)
        return text


@attrs.frozen
class Template:
    """A parsed template.

    Attributes:
        source (str): the text as written.
        parts (tuple[str | Expr, ...]): literal text and expressions, in order.
    """

    source: str
    parts: tuple[str | Expr, ...]

    @property
    def steps(self) -> frozenset[str]:
        """Ids of the steps this template reads."""
        return frozenset(p.step for p in self.parts if isinstance(p, Expr) and p.step)

    @property
    def is_literal(self) -> bool:
        """True when the template has no expression."""
        return all(isinstance(p, str) for p in self.parts)

    def render(self, scope: Scope) -> str:
        """The text with every expression replaced by its value (never raises)."""
        return "".join(p if isinstance(p, str) else p.value(scope) for p in self.parts)


def parse_template(text: str) -> Template:
    """Parse template text.

    Args:
        text (str): literal text with ``{{ expression }}`` parts.

    Returns:
        Template: the parsed template.

    Raises:
        TemplateError: an unclosed ``{{``, a stray ``}}``, or a malformed expression.
    """
    parts: list[str | Expr] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            tail = text[pos:]
            if "}}" in tail:
                raise TemplateError(f"`}}}}` without an opening `{{{{` in {text!r}")
            if tail:
                parts.append(tail)
            break
        lead = text[pos:start]
        if "}}" in lead:
            raise TemplateError(f"`}}}}` without an opening `{{{{` in {text!r}")
        if lead:
            parts.append(lead)
        end = _find_close(text, start + 2)
        if end < 0:
            raise TemplateError(f"`{{{{` is never closed in {text!r}")
        parts.append(_parse_expr(text[start + 2 : end]))
        pos = end + 2
    return Template(text, tuple(parts))


def _find_close(text: str, pos: int) -> int:
    """Index of the ``}}`` closing an expression starting at ``pos`` (quotes respected)."""
    quote: str | None = None
    i = pos
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif text.startswith("}}", i):
            return i
        i += 1
    return -1


def _split_top(expr: str, sep: str) -> list[str]:
    """Split on ``sep`` outside quotes."""
    out, cur, quote, i = [], [], None, 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(expr):
                cur.append(expr[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def unquote(token: str) -> str | None:
    """The text of a quoted string token (``"…"`` or ``'…'``), or None if it is not one."""
    token = token.strip()
    if len(token) < 2 or token[0] not in "\"'" or token[-1] != token[0]:
        return None
    body, out, i = token[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise TemplateError(f"unknown escape `\\{nxt}` in {token}")
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        if ch == token[0]:
            raise TemplateError(f"unescaped quote inside {token}")
        out.append(ch)
        i += 1
    return "".join(out)


def _parse_expr(inner: str) -> Expr:
    pieces = _split_top(inner, "|")
    head = pieces[0].strip()
    if not head:
        raise TemplateError(f"empty expression `{{{{{inner}}}}}`")
    lit = unquote(head)
    if lit is not None:
        path: str | None = None
    else:
        m = _PATH_RE.match(head)
        if m is None:
            raise TemplateError(
                f"unknown value `{head}` (use task, task.words[N], task.lines[N], workdir, session_id, "
                "formation_id, "
                'steps.ID.FIELD or a "quoted string")'
            )
        if m.group("field") and m.group("field") not in STEP_FIELDS:
            raise TemplateError(
                f"unknown step field `{m.group('field')}` in `{head}` "
                f"(one of: {', '.join(STEP_FIELDS)})"
            )
        path, lit = head, ""
    filters = tuple(_parse_filter(p) for p in pieces[1:])
    return Expr(path, lit, filters)


def _parse_filter(text: str) -> Filter:
    name, colon, raw = text.partition(":")
    name = name.strip()
    raw = raw.strip()
    known = FILTERS_STR + FILTERS_INT + FILTERS_NONE
    if name not in known:
        raise TemplateError(f"unknown filter `{name}` (one of: {', '.join(known)})")
    if name in FILTERS_NONE:
        if colon:
            raise TemplateError(f"filter `{name}` takes no argument")
        return Filter(name)
    if not colon or not raw:
        raise TemplateError(f"filter `{name}` needs an argument (`{name}: …`)")
    if name in FILTERS_INT:
        if not re.fullmatch(r"-?\d+", raw):
            raise TemplateError(f"filter `{name}` needs a whole number, not `{raw}`")
        return Filter(name, int(raw))
    arg = unquote(raw)
    if arg is None:
        raise TemplateError(f'filter `{name}` needs a quoted string argument (`{name}: "…"`)')
    if name == "match":
        try:
            re.compile(arg)
        except re.error as exc:
            raise TemplateError(f"filter `match` has a bad regular expression {raw}: {exc}") from exc
    return Filter(name, arg)
