"""``mur run`` for one capsule, on the command line: run a prepared session and print how it went.

:func:`run_prepared` runs a :class:`~murmur.session.session.SessionSetup` (from
:func:`murmur.assembly.prepare`) under ``trio.run`` with the signal policy and the console
rules, and returns the exit status (outside ``trio.run``). Specification: spec/session.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from murmur import containment
from murmur.session import (
    CASCADE_SIGNAL,
    SESSION_SIGNALS,
    Console,
    EarlySignals,
    Session,
    SessionSetup,
    SessionSummary,
    cascade_wind_down,
    counted,
    dumps_line,
    signal_watcher,
    signal_wind_down,
)


def _human_ready(console: Console, ready: Mapping[str, Any], *, verbose: bool) -> None:
    console.err(f"murmur: url {ready['url']}")
    if verbose:
        console.err(f"workdir: {ready['workdir']}")


REASON_LINES = 5
"""At most this many lines of a failed deciding task's reason reach the terminal."""
REASON_LINE_CHARS = 240
"""A longer line is wrapped (at spaces where it has them) onto indented continuation lines."""
REASON_LINE_MAX = 1200
"""A line is cut only past this many characters (a refusal's sentence is far shorter, so the
grant it names is never cut off)."""


def reason_text(reason: str) -> str:
    """``reason: <first line>`` plus up to four indented lines, bounded (human mode only).

    Args:
        reason (str): the deciding task's failure text (also in ``out/result.txt``).

    Returns:
        str: at most :data:`REASON_LINES` lines of the reason, each wrapped at
        :data:`REASON_LINE_CHARS` characters (cut with ``…`` only past
        :data:`REASON_LINE_MAX`); a final ``  …`` line when lines were left out.
    """
    import textwrap

    lines = reason.strip("\n").splitlines() or [""]
    out: list[str] = []
    for i, ln in enumerate(lines[:REASON_LINES]):
        if len(ln) > REASON_LINE_MAX:
            ln = ln[: REASON_LINE_MAX - 1] + "…"
        parts = textwrap.wrap(ln, REASON_LINE_CHARS, break_on_hyphens=False) or [""]
        lead = "reason: " if i == 0 else "  "
        out += [lead + parts[0], *(("    " if i else "  ") + p for p in parts[1:])]
    if len(lines) > REASON_LINES:
        out.append("  …")
    return "\n".join(out)


def run_prepared(
    setup: SessionSetup,
    *,
    json_mode: bool,
    verbose: bool = False,
    console: Console | None = None,
    early: EarlySignals | None = None,
    when_ready: Callable[[], None] | None = None,
) -> int:
    """Run a prepared session in ``trio.run`` and print its outcome; returns the exit status.

    Output: ``--json`` → exactly one readiness line on stdout, nothing else there. Human mode
    → ``session:``/``records:``/``murmur: url`` on stderr, the final ``status:`` line on
    stderr, a failed deciding task's reason (bounded, :func:`reason_text`) on stderr, and a
    launch task's answer on stdout. Either mode: the closing diagnostic
    (``E-RUN-040``, ``E-RUN-053`` …) on stderr. Lines that cannot be written go to
    ``logs/bootstrap.log``. ``when_ready`` is called once the readiness line is out (``mur
    run`` resumes the cyclic garbage collector there).
    """
    con = console or Console()
    con.attach_log(setup.records.bootstrap_log)
    if not json_mode:
        con.err(f"session: {setup.session_id}")
        con.err(f"records: {setup.records.root}")

    def on_ready(ready: dict[str, Any]) -> None:
        if json_mode:
            con.out(dumps_line(ready))
        else:
            _human_ready(con, ready, verbose=verbose)
        if when_ready is not None:
            when_ready()

    async def main() -> SessionSummary:
        with trio.open_signal_receiver(*SESSION_SIGNALS, CASCADE_SIGNAL) as receiver:
            already = len(early.received) if early else 0
            watcher = signal_watcher(counted(receiver, early), already=already, exit_fn=setup.exit_fn)
            session = Session(attrs.evolve(setup, watchers=[watcher, *setup.watchers]))  # the first watcher
            if already:
                assert early is not None
                session.wind_down(signal_wind_down(early.received[0]))
            elif early is not None and early.cascade:
                session.wind_down(cascade_wind_down())
            return await session.run(on_ready)

    # every process this session starts is contained; whatever is left when it ends is killed
    units = containment.here(setup.session_id)
    units.adopt_escapees()
    try:
        summary = trio.run(main)
    finally:
        units.close()
    if not json_mode:
        if setup.task_text is not None and summary.answer is not None:
            con.out(summary.answer.rstrip("\n"))
        con.err(f"status: {summary.status}")
        if summary.reason:
            con.err(reason_text(summary.reason))
    if summary.diagnostic is not None:
        con.err(summary.diagnostic.render())
    return summary.exit_code
