"""No terminal children: a link whose stdin or stdout is a terminal is refused (spec/links.md).

A delegated child gets no terminal (spec/links.md "No terminal children"), so a link run with a
terminal on standard input or output would hang on, or scribble over, the operator's screen.
The runtime reads what the kernel says the link's descriptors are (``/proc/<pid>/fd/0`` and
``/1`` of the peer ``SO_PEERCRED`` names), never what the caller claims.
"""

from __future__ import annotations

import os

TERMINAL_PREFIXES = ("/dev/pts/", "/dev/tty", "/dev/console")


def is_terminal_path(target: str) -> bool:
    """Whether a descriptor's ``/proc`` link target names a terminal device (pure)."""
    return target.startswith(TERMINAL_PREFIXES)


def terminal_on(pid: int) -> str | None:
    """``"stdin"`` or ``"stdout"`` when that descriptor of process ``pid`` is a terminal, else
    None (also when ``/proc`` cannot be read: the peer check already vouched for the caller)."""
    for fd, stream in ((0, "stdin"), (1, "stdout")):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if is_terminal_path(target):
            return stream
    return None


def tty_refusal(command: str) -> str:
    """The refusal sentence for a link with a terminal attached (spec/links.md "No terminal children")."""
    return (f"interactive delegated children are not supported yet: {command} has a terminal on stdin or "
            f"stdout; run it non-interactively with neither attached, e.g. `\\{command} ... </dev/null | cat`")
