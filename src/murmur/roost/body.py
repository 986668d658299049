"""Decoding a request body into a JSON object, with every hostile shape refused as input.

Design: seed 000, "Refusals" (``400 Bad Request``: the body is not valid JSON); the wire
rules are RFC 8259 with the interoperability limits of RFC 7493 (I-JSON). The HTTP layer
(:mod:`murmur.roost.app`) answers :class:`BodyError` with ``400`` and its message.

What is refused, and why it is not an internal error:

* nesting deeper than :data:`MAX_DEPTH` (the endpoints read flat objects; Python's decoder
  would otherwise raise ``RecursionError`` at about a thousand levels);
* ``NaN``, ``Infinity`` and ``-Infinity`` literals (not JSON);
* strings holding an unpaired UTF-16 surrogate (``"\\ud800"``): valid by the grammar, but
  they name no character and cannot be echoed back as UTF-8.

Integers of any length are accepted: one longer than Python's digit limit decodes to a
:class:`decimal.Decimal`, so it is "a field that is not a string" like any other number.
"""

from __future__ import annotations

import decimal
import json
import sys

__all__ = ["MAX_DEPTH", "BodyError", "decode_object"]

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects a body may have (the top-level object is depth 1)."""

_NOT_JSON = "request body is not valid JSON"


class BodyError(ValueError):
    """The body is not one JSON object this daemon will read; ``str(exc)`` is the 400 message."""


def _reject_constant(literal: str) -> object:
    raise BodyError(f"{_NOT_JSON}: `{literal}` is not a JSON number")


def _parse_int(digits: str) -> int | decimal.Decimal:
    if len(digits) <= sys.get_int_max_str_digits() or sys.get_int_max_str_digits() == 0:
        return int(digits)
    return decimal.Decimal(digits)


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


def decode_object(raw: bytes) -> dict[str, object]:
    """Decode a request body that must be one JSON object.

    Args:
        raw (bytes): the body as received (already bounded by the daemon's size cap).

    Returns:
        dict[str, object]: the object; numbers are ``int``, ``float`` or (past Python's
        integer digit limit) ``decimal.Decimal``.

    Raises:
        BodyError: not UTF-8, not JSON, nested deeper than :data:`MAX_DEPTH`, a
            non-finite number literal, an unpaired surrogate, or not an object.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError(f"{_NOT_JSON}: it is not UTF-8") from None
    if _nesting_exceeds(text, MAX_DEPTH):
        raise BodyError(f"{_NOT_JSON}: nested deeper than {MAX_DEPTH} levels")
    try:
        body = json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except BodyError:
        raise
    except (ValueError, RecursionError):
        raise BodyError(_NOT_JSON) from None
    if not isinstance(body, dict):
        raise BodyError("request body must be a JSON object")
    if _has_lone_surrogate(body):
        raise BodyError(f"{_NOT_JSON}: a string holds an unpaired surrogate")
    return body
