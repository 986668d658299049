"""The rules of one ``call-member`` call: busy schedule, deadline, answer cap, scrubbing (pure).

Specification: ``spec/formation.md`` "`call-member`" (statuses, the busy schedule,
answers).
"""

from __future__ import annotations

from collections.abc import Iterable

from murmur import timing

OUTPUT_CAP = 64 * 1024
"""Bytes of a member's answer kept (UTF-8); longer answers are cut and marked."""

CUT_MARKER = "\n[murmur: the answer was cut at 64 KiB]"
"""Appended to an answer cut at :data:`OUTPUT_CAP`."""

IN_FLIGHT_GRACE = 6.0
"""Seconds an offer in flight when the calling task ends is still waited for."""


def busy_wait(refusals: int, *, first: float = timing.BUSY_FIRST_WAIT, cap: float = timing.BUSY_MAX_WAIT) -> float:
    """Seconds to wait after the ``refusals``-th refusal in a row before the next offer.

    1 s after the first, doubling after each later one, never more than 8 s (jitter is added
    by the caller).

    Args:
        refusals (int): how many offers have been refused so far (>= 1).
    """
    return float(min(first * 2.0 ** max(refusals - 1, 0), cap))


def no_door(member: str, door: str) -> str:
    """Why a call failed when the callee's door URL never arrived (``door``: its virtual address)."""
    return f"the door of {member} ({door}) did not arrive on the formation channel in time"


def deadline_ending(member: str, door: str, *, held: bool, offered: bool, last_busy: bool) -> tuple[str, str]:
    """How a call ends when its deadline falls: ``(status, reason)``.

    The deadline is the call's cancel scope's, so it cuts short whatever the call was doing,
    a request in flight included (an offer cut short counts as unanswered).

    Args:
        member (str): the callee.
        door (str): the callee's virtual address (the only address a reason names).
        held (bool): the member took the task (the call was following it).
        offered (bool): at least one offer was sent (else the call was still waiting for the
            callee's door URL).
        last_busy (bool): the last offer was answered busy.

    Returns:
        tuple[str, str]: ``timed_out`` when held; ``failed`` when no door URL arrived;
        ``rejected`` when the member was last busy; otherwise ``unreachable``.
    """
    if held:
        return "timed_out", f"{member} did not finish before the call's deadline"
    if not offered:
        return "failed", no_door(member, door)
    if last_busy:
        return "rejected", f"{member} stayed busy until the call's deadline"
    return "unreachable", f"{member} did not answer before the call's deadline"


def cut_output(text: str, cap: int = OUTPUT_CAP) -> tuple[str, bool]:
    """``(text cut to cap UTF-8 bytes + CUT_MARKER, True)``, or ``(text, False)`` if it fits."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text, False
    return data[:cap].decode("utf-8", "ignore") + CUT_MARKER, True


def scrub(text: str, secrets_: Iterable[tuple[str, str]]) -> str:
    """``text`` with every secret replaced: ``(secret, replacement)`` pairs, longest first."""
    for secret, replacement in sorted(secrets_, key=lambda p: -len(p[0])):
        if secret:
            text = text.replace(secret, replacement)
    return text

