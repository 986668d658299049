"""YAML text to located plain values, with YAML 1.2 semantics decided by the schema.

murmur reads its YAML files (``murmur.yaml``, ``murmur.lock``, and anything else that wants
the same rules) through :func:`parse_located`. It composes the document with ruamel.yaml
but does **not** let the YAML resolver decide types: every scalar is kept as the exact text
the user wrote, wrapped in :class:`YStr` together with its position and whether it was
plain (unquoted). The schema that consumes the tree then decides what the text means, so
an unquoted ``version: 1.10`` stays the text ``1.10`` and ``name: no`` stays ``no``.

Shapes produced:

* a mapping becomes a :class:`YMap` (a ``dict`` keyed by ``str``, remembering each key's
  position, and which keys were written with no value at all — those are left out of the
  dict, because a key with no value is absent);
* a sequence becomes a :class:`YSeq` (a ``list`` remembering each item's position);
* a scalar becomes a :class:`YStr`.

Syntax errors, multi-document streams, non-scalar or duplicate keys, and documents that
expand past :data:`MAX_NODES` values (alias bombs) become one coded diagnostic.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

MAX_NODES = 50_000
"""Most values a document may expand to (anchors and aliases count every use)."""

MAX_FLOW_DEPTH = 100
"""Most ``[``/``{`` a document may nest: ruamel's scanner is quadratic in flow depth (a line
of 20,000 ``[`` takes seconds), so deeper text is refused before it is parsed."""

NULL_WORDS = frozenset({"null", "Null", "NULL", "~"})
"""YAML 1.2 core-schema spellings of null (only meaningful where a value is not text)."""

_INT_RE = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT_RE = re.compile(
    r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
)
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})


class YStr(str):
    """A scalar's exact text plus where it was written.

    Attributes:
        line (int | None): 1-based line, None when the value did not come from a file.
        col (int | None): 1-based column.
        plain (bool): True when written unquoted (so ``true``/``10`` may mean bool/int).
    """

    line: int | None
    col: int | None
    plain: bool

    def __new__(
        cls, text: str, line: int | None = None, col: int | None = None, *, plain: bool = True
    ) -> YStr:
        self = super().__new__(cls, text)
        self.line = line
        self.col = col
        self.plain = plain
        return self


class YMap(dict[str, Any]):
    """A mapping with key positions.

    Attributes:
        line, col (int | None): where the mapping starts (1-based).
        key_pos (dict[str, tuple[int | None, int | None]]): each key's (line, col),
            including keys written with no value.
        empty_keys (tuple[str, ...]): keys written with no value (absent from the dict).
    """

    line: int | None
    col: int | None
    key_pos: dict[str, tuple[int | None, int | None]]
    empty_keys: tuple[str, ...]

    def __init__(self, line: int | None = None, col: int | None = None) -> None:
        super().__init__()
        self.line = line
        self.col = col
        self.key_pos = {}
        self.empty_keys = ()


class YSeq(list[Any]):
    """A sequence with its own and its items' positions (1-based)."""

    line: int | None
    col: int | None
    item_pos: list[tuple[int | None, int | None]]

    def __init__(self, line: int | None = None, col: int | None = None) -> None:
        super().__init__()
        self.line = line
        self.col = col
        self.item_pos = []


def position(value: object) -> tuple[int | None, int | None]:
    """The (line, col) a located value starts at, or (None, None)."""
    return (getattr(value, "line", None), getattr(value, "col", None))


def parse_located(text: str, *, path: str, code: str = "E-MAN-002") -> object:
    """Parse one YAML document into located values.

    Args:
        text (str): the document.
        path (str): the file name used in diagnostics.
        code (str): the diagnostic code for a malformed document (default ``E-MAN-002``).

    Returns:
        object: a :class:`YMap`, :class:`YSeq` or :class:`YStr`, or None for an empty
        document.

    Raises:
        DiagnosticError: ``code`` for a syntax error, several documents, a non-scalar or
        duplicate key, or more than :data:`MAX_NODES` values.
    """
    too_deep = flow_depth_exceeded(text)
    if too_deep is not None:
        raise DiagnosticError(
            error(code, f"the document nests more than {MAX_FLOW_DEPTH} levels of [ and {{", path=path,
                  line=too_deep, hint="flatten the document")
        )
    yaml = YAML(typ="rt")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = yaml.compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise DiagnosticError(
            error(code, f"not valid YAML: {problem}", path=path, line=line, col=col,
                  hint="fix the YAML syntax at this position")
        ) from None
    except RecursionError:
        raise DiagnosticError(
            error(code, "the document nests too deeply", path=path, hint="flatten the document")
        ) from None
    except (YAMLError, ValueError, TypeError, IndexError, AttributeError) as exc:
        # ruamel raises a few unmarked errors on pathological input; all mean "not YAML".
        raise DiagnosticError(
            error(code, f"not valid YAML: {type(exc).__name__}", path=path,
                  hint="fix the YAML syntax")
        ) from None
    if node is None:
        return None
    budget = [MAX_NODES]
    try:
        return _convert(node, path, code, budget)
    except RecursionError:
        raise DiagnosticError(
            error(code, "the document nests too deeply", path=path, hint="flatten the document")
        ) from None


def flow_depth_exceeded(text: str) -> int | None:
    """The 1-based line where ``[``/``{`` nesting first passes :data:`MAX_FLOW_DEPTH`, or
    None. Every bracket counts, quoted or not (so nothing can hide nesting from the check;
    only a text with over a hundred unclosed brackets in its strings is refused by mistake).
    Text with too few brackets to nest that deep is not scanned."""
    if text.count("[") + text.count("{") <= MAX_FLOW_DEPTH:
        return None
    depth, line = 0, 1
    for ch in text:
        if ch == "\n":
            line += 1
        elif ch in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                return line
        elif ch in "]}":
            depth = max(0, depth - 1)
    return None


def _pos(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _convert(node: Node, path: str, code: str, budget: list[int]) -> object:
    budget[0] -= 1
    if budget[0] < 0:
        line, col = _pos(node)
        raise DiagnosticError(
            error(code, f"the document expands to more than {MAX_NODES} values", path=path,
                  line=line, col=col, hint="remove repeated aliases")
        )
    line, col = _pos(node)
    if isinstance(node, ScalarNode):
        return YStr(str(node.value), line, col, plain=node.style is None)
    if isinstance(node, SequenceNode):
        seq = YSeq(line, col)
        for item in node.value:
            seq.append(_convert(item, path, code, budget))
            seq.item_pos.append(_pos(item))
        return seq
    if isinstance(node, MappingNode):
        out = YMap(line, col)
        empty: list[str] = []
        for knode, vnode in node.value:
            kline, kcol = _pos(knode)
            if not isinstance(knode, ScalarNode):
                raise DiagnosticError(
                    error(code, "a mapping key must be plain text", path=path, line=kline,
                          col=kcol, hint="write the key as a word")
                )
            key = str(knode.value)
            if key in out.key_pos:
                first = out.key_pos[key][0]
                raise DiagnosticError(
                    error(code, f"duplicate key `{key}` (first at line {first})", path=path,
                          line=kline, col=kcol, hint="keep one of the two")
                )
            out.key_pos[key] = (kline, kcol)
            if isinstance(vnode, ScalarNode) and vnode.value == "" and vnode.style is None:
                empty.append(key)  # `key:` with no value: absent
                continue
            out[key] = _convert(vnode, path, code, budget)
        out.empty_keys = tuple(empty)
        return out
    raise DiagnosticError(error(code, "unsupported YAML node", path=path, line=line, col=col))


def is_null(value: object) -> bool:
    """True for a plain YAML 1.2 null word (``null``, ``~``) where text is not expected."""
    return isinstance(value, YStr) and value.plain and str(value) in NULL_WORDS


def as_bool(value: object) -> bool | None:
    """The YAML 1.2 core boolean a plain scalar spells, else None."""
    if isinstance(value, YStr) and value.plain:
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return None


def as_int(value: object) -> int | None:
    """The YAML 1.2 core integer a plain scalar spells (decimal, ``0o``, ``0x``), else None."""
    if isinstance(value, YStr) and value.plain and _INT_RE.fullmatch(value):
        s = str(value)
        if s.startswith("0o"):
            return int(s[2:], 8)
        if s.startswith("0x"):
            return int(s[2:], 16)
        return int(s)
    return None


def to_plain(value: object) -> object:
    """Lower a located value to plain Python with YAML 1.2 core-schema typing.

    Used for free-form blocks (e.g. ``inference.driver.config``) where no schema decides:
    plain scalars become bool/int/float/None when they spell one; everything else is text.
    """
    if isinstance(value, YMap):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, YSeq):
        return [to_plain(v) for v in value]
    if isinstance(value, YStr):
        if not value.plain:
            return str(value)
        b = as_bool(value)
        if b is not None:
            return b
        i = as_int(value)
        if i is not None:
            return i
        if is_null(value):
            return None
        if _FLOAT_RE.fullmatch(value):
            s = str(value).lower()
            if s.endswith("inf"):
                return float("-inf") if s.startswith("-") else float("inf")
            if s.endswith("nan"):
                return float("nan")
            return float(s)
        return str(value)
    return value


def lift(value: object) -> object:
    """Turn plain Python (e.g. parsed JSON) into located values without positions.

    ``None`` values in mappings are dropped (absent); bools become ``true``/``false``,
    numbers their decimal text, all as plain scalars; strings become quoted scalars so
    they are never re-typed.
    """
    if isinstance(value, dict):
        out = YMap()
        for k, v in value.items():
            key = str(k)
            out.key_pos[key] = (None, None)
            if v is None:
                out.empty_keys = (*out.empty_keys, key)
                continue
            out[key] = lift(v)
        return out
    if isinstance(value, list | tuple):
        seq = YSeq()
        for item in value:
            seq.append(lift(item))
            seq.item_pos.append((None, None))
        return seq
    if isinstance(value, bool):
        return YStr("true" if value else "false")
    if isinstance(value, int | float):
        return YStr(repr(value))
    if value is None:
        return YStr("null")
    return YStr(str(value), plain=False)
