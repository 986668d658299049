"""Decoding a request body as JSON, with every hostile shape refused as input.

Used by mur-roost (``400 Bad Request`` when the body is not valid JSON; spec/roost.md,
"Endpoints") and by the door (``-32700``; spec/door.md). The wire rules
are RFC 8259 with the interoperability limits of RFC 7493 (I-JSON).

What is refused, and why it is not an internal error:

* nesting deeper than a bound (:data:`MAX_DEPTH` unless the caller says; Python's decoder
  would otherwise raise ``RecursionError`` at about a thousand levels);
* ``NaN``, ``Infinity`` and ``-Infinity`` literals (not JSON);
* strings holding an unpaired UTF-16 surrogate (``"\\ud800"``): valid by the grammar, but
  they name no character and cannot be echoed back as UTF-8.

Integers of any length are accepted: one longer than Python's digit limit decodes to a
:class:`decimal.Decimal`, so it is "a field that is not a string" like any other number.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import decimal

__all__ = ["ECHO_LIMIT", "MAX_DEPTH", "BodyError", "decode", "decode_object", "echo", "loggable"]

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects a roost body may have (the top-level object is depth 1)."""

_NOT_JSON = "request body is not valid JSON"


class BodyError(ValueError):
    """The body is not one JSON object this daemon will read; ``str(exc)`` is the 400 message."""


def _reject_constant(literal: str) -> object:
    raise BodyError(f"{_NOT_JSON}: `{literal}` is not a JSON number")


def _parse_int(digits: str) -> int | decimal.Decimal:
    if len(digits) <= sys.get_int_max_str_digits() or sys.get_int_max_str_digits() == 0:
        return int(digits)
    import decimal  # only for an integer past the digit limit: a plain start loads none

    return decimal.Decimal(digits)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_parse_int)
"""Built once: ``json.loads`` given hooks builds a new decoder (and scanner) at every call."""


def _nesting_exceeds(raw: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than ``limit`` (a linear scan, no recursion)."""
    depth = 0
    in_string = False
    escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _has_lone_surrogate(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def decode(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> object:
    """Decode one JSON value from a request body.

    Args:
        raw (bytes | str): the body as received (already bounded by the server's size cap).
        max_depth (int): the deepest nesting of arrays and objects accepted.

    Returns:
        object: the value; numbers are ``int``, ``float`` or (past Python's integer digit
        limit) ``decimal.Decimal``.

    Raises:
        BodyError: not UTF-8, not JSON, nested deeper than ``max_depth``, a non-finite
            number literal, or a string holding an unpaired surrogate.
    """
    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError(f"{_NOT_JSON}: it is not UTF-8") from None
    # Fewer brackets than the bound cannot nest past it (the scan is a Python loop per character).
    brackets = text.count("[") + text.count("{")
    if brackets > max_depth and _nesting_exceeds(text, max_depth):
        raise BodyError(f"{_NOT_JSON}: nested deeper than {max_depth} levels")
    try:
        body = _DECODER.decode(text)
    except BodyError:
        raise
    except (ValueError, RecursionError):
        raise BodyError(_NOT_JSON) from None
    # Strictly decoded UTF-8 holds no surrogate, so only a `\u` escape can make one.
    if (isinstance(raw, str) or "\\u" in text) and _has_lone_surrogate(body):
        raise BodyError(f"{_NOT_JSON}: a string holds an unpaired surrogate")
    return body


def decode_object(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> dict[str, object]:
    """:func:`decode`, for a body that must be one JSON object.

    Raises:
        BodyError: as :func:`decode`, or the value is not an object.
    """
    body = decode(raw, max_depth=max_depth)
    if not isinstance(body, dict):
        raise BodyError("request body must be a JSON object")
    return body


ECHO_LIMIT = 200
"""Characters of client input an error message repeats (the door and mur-roost)."""


def echo(value: str, limit: int = ECHO_LIMIT) -> str:
    """``value`` as an error message may repeat it: at most ``limit`` characters, cut with ``…``."""
    return value if len(value) <= limit else value[: limit - 1] + "…"


def loggable(value: str, limit: int = ECHO_LIMIT) -> str:
    """``value`` as one log line may carry it: control characters (a newline that would forge
    a second line, an escape sequence) written as JSON escapes, then cut as :func:`echo` cuts."""
    return echo(json.dumps(value, ensure_ascii=False)[1:-1], limit)
