"""Every protocol bound, named after what it bounds (seconds; :data:`SHELL_OUTPUT_CAP` is bytes).

Production values are exactly the spec/ pages'. Tests use MockClock rather than changing them;
the few multi-process tests that need a shorter bound pass it explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping

APPROVAL_LIFETIME = 60.0  # roost approval expiry after grant (spec/roost.md)
WIND_DOWN_GUARD = 20.0  # a session exits 143 this long after its wind-down trigger
DEADLINE_EOF_SLACK = 1.0  # a member's lifeline EOF this close before its own --deadline moment is the formation's deadline (the launcher and the member each convert the moment to their own Trio clock)
LAUNCHER_KILL = 25.0  # launcher SIGKILLs a member's group this long after closing its lifeline
READINESS = 180.0  # per-member readiness bound (formations)
READINESS_PROBE_INTERVAL = 0.1  # card probe interval during readiness
CHANNEL_FIRST_LINE = 10.0  # member waits this long for its formation channel's first line
DOOR_URL_WAIT = 10.0  # a call waits this long for a callee's door URL on the channel
DELEGATION_LAUNCH = 180.0  # child's first --json line must arrive within this
DELEGATION_DELIVERY = 30.0  # task delivery to a fresh child retried for this long
DELEGATION_LAUNCHER_START = 5.0  # a delegation waits this long for its session's launcher to run (else failed)
CHILD_WATCH = 600.0  # default delegation_deadline_secs
IDLE_TIMEOUT = 30.0  # non queue+sleep sessions wait this long for an A2A message
SSE_KEEPALIVE = 2.0  # SSE comment interval on open streams (a2a-sdk clients drop after 5 s of silence)
MEMBER_POLL = 0.5  # call-member polls GetTask this often
BUSY_FIRST_WAIT = 1.0  # busy member: first re-offer after this
BUSY_MAX_WAIT = 8.0  # busy member: waits double up to this
BUSY_JITTER = 0.25  # busy member: up to this much jitter per wait
SHELL_OUTPUT_CAP = 1 << 20  # bytes of stdout/stderr kept per shell command
SHELL_DRAIN_AFTER_EXIT = 1.0  # after a command's main process exits and its unit is killed, output still in flight is read this long
A2A_REQUEST = 10.0  # one loopback A2A request (a member call, a child's task delivery and polls, a completion post)
READINESS_PROBE_REQUEST = 2.0  # one door probe request during readiness

DELEGATION_TIMEOUT_ENV = "MURMUR_DELEGATION_TIMEOUT_SECS"
"""The process-wide override of ``lifecycle.delegation_deadline_secs`` (spec/delegation.md)."""


def delegation_bound(declared_secs: int, environ: Mapping[str, str]) -> int:
    """The delegation bound in whole seconds, resolved once by the composition root.

    It bounds a started child's watch, a plan ``capsule`` or ``member`` step, and a formation
    member's call (spec/architecture.md "Deadlines").

    Args:
        declared_secs (int): the manifest's ``lifecycle.delegation_deadline_secs``.
        environ (Mapping[str, str]): the process environment.

    Returns:
        int: ``MURMUR_DELEGATION_TIMEOUT_SECS`` when it is a positive whole number (ASCII
        digits, surrounding blanks ignored), else ``declared_secs``.
    """
    raw = environ.get(DELEGATION_TIMEOUT_ENV, "").strip()
    if raw.isascii() and raw.isdigit() and int(raw) > 0:
        return int(raw)
    return int(declared_secs)
