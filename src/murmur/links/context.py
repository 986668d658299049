"""The ``mur context`` text an agent reads (pure; spec/links.md "mur context").

At most about 60 lines: the capsule's name, its effective spawn set with each capsule's
description, how to call a link and read its exit status, how to run several at once, the
bounds, and when not to delegate. Outside a session :func:`general_text` gives the form.
How a workload reads it (``TaskContext.links_context``, :func:`context_for_prompt`,
:func:`harness_env`) lives with the workload port, :mod:`murmur.workload`, so the agent
tier reaches it without importing this one; the names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from murmur.workload import (
    CONTEXT_ENV,
    context_file_for,
    context_for_prompt,
    harness_env,
    with_context,
)

__all__ = ["CONTEXT_ENV", "CONTEXT_FILE", "ContextFacts", "context_file_for", "context_for_prompt",
           "context_text", "general_text", "harness_env", "with_context"]

CONTEXT_FILE = "context.md"
"""The file in the links directory holding this session's ``mur context`` text."""


@attrs.frozen
class ContextFacts:
    """What the text says about one session."""

    name: str
    spawn: Sequence[tuple[str, str]]  # (capsule name, description or "")
    depth: int
    watch_secs: int
    connections: int
    tree_total: int | None = None  # --max-tree-total (None: unbounded)
    same_chain: int | None = None  # --max-same-capsule-chain (None: off)


_HOW = """\
How to delegate: run the capsule's name like any command, from any shell or program:
  NAME "the task text"            the task is the arguments joined by spaces
  echo "the task" | NAME          or standard input when there are no arguments
  NAME --capsule-version V TASK   choose a version when several are installed
  NAME --json TASK                print the child's completion record instead
The child's answer is printed on stdout; one status line goes to stderr.
Exit status:
  0    ok: the answer is on stdout
  1    the child's task failed, or the child crashed
  2    usage: an unknown option, no task, or a request over 1 MiB; nothing was started
  124  the child watch bound ended the child (terminated)
  125  refused by mur-roost (depth, concurrency, envelope) or could not start;
       stderr has the referee's sentence saying what to change
  126  the name is outside this session's spawn set, or the caller is not inside the session
  130  the link was interrupted; the child and everything it started were ended
Several at once: `a "x" > a.out & b "y" > b.out & wait` starts two delegations;
mur-roost bounds how many children one session holds live at once."""

_WHEN_NOT = """\
When not to delegate: for a task you can do with one command, when the answer is needed
in less time than a child takes to start (seconds), or to retry a refusal unchanged."""


def context_text(facts: ContextFacts) -> str:
    """The text for one session (ends with a newline)."""
    lines = [f"You are running inside the capsule `{facts.name}` (murmur).", ""]
    if facts.spawn:
        lines.append("Capsules you may delegate to (each is a command on your PATH):")
        for name, description in facts.spawn:
            lines.append(f"  {name}" + (f" — {description}" if description else ""))
    else:
        lines.append("This session may delegate to no capsule (its spawn set is empty).")
    lines += ["", _HOW, "",
              f"Bounds: this session is at depth {facts.depth} of its tree (mur-roost's --max-depth refuses deeper);",
              f"a child that runs longer than {facts.watch_secs}s is ended (124); at most "
              f"{facts.connections} link requests may be open at once.",
              f"This tree may ask for {facts.tree_total if facts.tree_total is not None else 'any number of'} "
              f"delegations in all (refused ones count); a capsule may delegate to itself "
              f"{f'at most {facts.same_chain} times in a row' if facts.same_chain is not None else 'without a chain cap'}.",
              "`mur ps --tree` shows this session's children.", "", _WHEN_NOT]
    return "\n".join(lines) + "\n"


def general_text() -> str:
    """The text outside any session: the general form."""
    return ("`mur context` inside a capsule session prints the capsule's name, the capsules it may\n"
            "delegate to, and how to call them. Outside a session there is nothing to delegate to.\n\n"
            + _HOW + "\n\n" + _WHEN_NOT + "\n")

