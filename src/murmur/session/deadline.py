"""``--deadline``: one fixed moment after which the session winds down (pure; spec/session.md).

Accepted forms:

* an absolute RFC 3339 time with a zone, e.g. ``2026-12-01T17:30:00Z`` or
  ``2026-12-01T18:30:00.250+01:00``;
* a duration counted from the moment ``mur run`` starts: a positive integer followed by
  ``s``, ``m``, ``h`` or ``d`` (``90s``, ``15m``, ``2h``, ``1d``), or several of them run
  together (``1h30m``).

The moment is at most ten years away. Anything else is refused with ``E-RUN-054``.
"""

from __future__ import annotations

import datetime as dt
import re

from murmur.diagnostics import error
from murmur.errors import UsageError

MAX_AHEAD = 10 * 366 * 86400.0  # ten years, in seconds
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(?:\d+[smhd])+$")
_PART = re.compile(r"(\d+)([smhd])")
_HINT = "give an RFC 3339 time such as 2026-12-01T17:30:00Z, or a duration such as 90s, 15m or 2h"


def _refuse(value: str, why: str) -> UsageError:
    return UsageError(error("E-RUN-054", f"--deadline {value!r} {why}", hint=_HINT))


def parse_deadline(value: str, *, now: float) -> float:
    """The deadline ``value`` names, as Unix seconds.

    Args:
        value (str): the ``--deadline`` argument.
        now (float): the current Unix time in seconds (durations count from it).

    Returns:
        float: the deadline moment in Unix seconds (may already be past for an RFC 3339 time).

    Raises:
        UsageError: ``E-RUN-054`` when the value is neither form, names a zero duration,
            has no time zone, or lies more than ten years ahead.
    """
    text = value.strip()
    if _DURATION.match(text):
        secs = sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
        if secs <= 0:
            raise _refuse(value, "is a zero duration")
        if secs > MAX_AHEAD:
            raise _refuse(value, "is more than ten years away")
        return now + secs
    try:
        moment = dt.datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise _refuse(value, "is neither an RFC 3339 time nor a duration") from None
    if "T" not in text.upper() or moment.tzinfo is None:
        raise _refuse(value, "has no date-time with a time zone (add Z or an offset)")
    at = moment.timestamp()
    if at - now > MAX_AHEAD:
        raise _refuse(value, "is more than ten years away")
    return at


def on_trio_clock(unix: float, *, now_unix: float, now_trio: float) -> float:
    """The Unix moment ``unix`` as a Trio clock reading (pure; read both clocks once, then call).

    A deadline is converted once, where it enters a Trio run, and lives on as a cancel scope's
    ``deadline``; nothing reads the wall clock again to ask whether it fell (spec/session.md
    "Deadline").

    Args:
        unix (float): the moment, Unix seconds.
        now_unix (float): ``time.time()`` read now.
        now_trio (float): ``trio.current_time()`` read at the same moment.

    Returns:
        float: the moment on the Trio clock (in the past when ``unix`` already fell).
    """
    return now_trio + (unix - now_unix)


def rfc3339(unix: float) -> str:
    """``unix`` seconds as an RFC 3339 UTC time with milliseconds (``…T…Z``)."""
    moment = dt.datetime.fromtimestamp(unix, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
