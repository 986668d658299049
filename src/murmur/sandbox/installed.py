"""The sandbox of this process's session (one per process, like :func:`murmur.containment.here`).

A session installs its compiled sandbox when it starts (:func:`install`) and removes it when it
ends (:func:`uninstall`, which closes its fds); every start asks :func:`current`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from murmur.sandbox.compiled import Sandbox

__all__ = ["current", "install", "uninstall"]

_current: list[Sandbox] = []


def install(sandbox: Sandbox) -> None:
    """Make ``sandbox`` this process's (replacing and closing an earlier one)."""
    uninstall()
    _current.append(sandbox)


def current() -> Sandbox | None:
    """This process's sandbox, or None (advisory: nothing applied)."""
    return _current[-1] if _current else None


def uninstall() -> None:
    """Remove and close this process's sandbox (nothing to do when there is none)."""
    while _current:
        _current.pop().close()
