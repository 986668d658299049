"""Which protocol speaks to a ``transport: process`` command (pure; spec/agent.md).

Upstream's rule: the command's base name ``codex`` → Codex, any other command → Claude Code.
``inference.protocol`` (this runtime's own key) names one explicitly; ``stdio`` is the plain
task-on-stdin, answer-on-stdout protocol (:mod:`murmur.agent.transports.stdio`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from murmur.agent.harness.protocol import HarnessProtocol

__all__ = ["CLAUDE_CODE", "CODEX", "INSTALL_HINTS", "STDIO", "protocol_for", "protocol_name"]

CLAUDE_CODE, CODEX, STDIO = "claude-code", "codex", "stdio"

INSTALL_HINTS = {
    CLAUDE_CODE: "install Claude Code (`npm install -g @anthropic-ai/claude-code`), or fix inference.command",
    CODEX: "install Codex (`npm install -g @openai/codex`), or fix inference.command",
    STDIO: "install it, or fix inference.command",
}
"""The ``E-RUN-006`` hint when the command is not on ``PATH``, by protocol."""

_MODULES = {CLAUDE_CODE: "murmur.agent.harness.claude", CODEX: "murmur.agent.harness.codex"}


def protocol_name(command: Sequence[str], explicit: str | None) -> str:
    """``claude-code`` | ``codex`` | ``stdio`` for a command argv and ``inference.protocol``."""
    if explicit:
        return explicit
    return CODEX if os.path.basename(command[0]) == "codex" else CLAUDE_CODE


def protocol_for(name: str) -> HarnessProtocol:
    """The protocol object of ``claude-code`` or ``codex`` (its module's ``PROTOCOL``).

    Raises:
        LookupError: ``stdio`` or an unknown name (no harness protocol).
    """
    module = _MODULES.get(name)
    if module is None:
        raise LookupError(f"no harness protocol named {name}")
    found: HarnessProtocol = importlib.import_module(module).PROTOCOL
    return found
