"""Claude Code's PreToolUse hook: an ungranted command is told its route (spec/agent.md
"Claude Code protocol", spec/routing.md "When a capsule is refused a binary").

The settings file the Claude Code protocol writes (``murmur/settings.json`` under the CLI's
``HOME``) names this module as a ``command`` hook on the ``Bash`` tool::

    <python> -I -m murmur.agent.harness.pretool <HOME>/murmur/pretool.json

For every Bash call Claude Code pipes the call to it (JSON: ``tool_name``, ``tool_input``
with ``command``). The hook finds the programs the command names (:func:`programs`: the
first word of every simple command, past ``VAR=value`` assignments; shell builtins are no
programs), and for the first one outside the grants (:func:`first_denied`; the same
``fnmatch`` entries the ``Bash(prog:*)`` rules are made of) asks the process transport over
the task's deny socket (``murmur/deny.sock``, 0600, reached by a relative path after a
``chdir``, so its path length never matters) for the message, and prints Claude Code's
decision: ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
"deny", "permissionDecisionReason": MESSAGE}}``. Claude Code shows the reason to the model.
MESSAGE is what the built-in loop's shell tool gets for the binary: the session's
``services.denied_binary(name)`` (the ready routes, best first) or, without one, the plain
refusal (:func:`murmur.grants.denied_binary`); the same plain refusal when the socket does not
answer within :data:`ASK_BOUND` seconds.

The hook only ever denies. A command whose programs are all granted, one it cannot parse, and
any other tool get no output and exit 0, so Claude Code's own permission rules (``--allowedTools
Bash(prog:*)`` under ``--permission-mode dontAsk``) still decide: the hook never widens them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import socket
import sys
from collections.abc import Sequence
from typing import Any

SCRIPT_MODULE = "murmur.agent.harness.pretool"
CONFIG_FILE = "murmur/pretool.json"
SOCKET_FILE = "murmur/deny.sock"
ASK_BOUND = 10.0
"""Seconds the hook waits for the transport's answer before using the plain refusal."""
MESSAGE_LIMIT = 64 << 10
"""Bytes of a message read from the socket (a longer one is cut)."""

_SEPARATORS = frozenset({"|", "||", "&", "&&", ";", ";;", "(", ")", "|&", "\n"})
_BUILTINS = frozenset({
    "cd", "pwd", "export", "unset", "set", "true", "false", ":", "test", "[", "echo", "printf",
    "read", "exit", "return", "shift", "wait", "type", "command", "builtin", "local", "declare",
    "alias", "unalias", "source", ".", "eval", "exec", "trap", "umask", "ulimit", "jobs", "fg", "bg",
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in",
    "function", "{", "}", "!", "time",
})
"""Words in a command's first position that start no program of their own."""


def programs(command: str) -> list[str] | None:
    """The programs ``command`` runs, in order (pure); None when it does not parse.

    ``cd src && FOO=1 cargo build | tee log`` → ``["cargo", "tee"]``. A path names its base
    name (``/usr/bin/cargo`` → ``cargo``).
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return None
    out: list[str] = []
    first = True
    for word in words:
        if word in _SEPARATORS or set(word) <= set(";&|()"):
            first = True
            continue
        if not first:
            continue
        if "=" in word and not word.startswith("=") and word.split("=", 1)[0].isidentifier():
            continue  # an assignment before the program
        first = False
        if word in _BUILTINS:
            first = word in ("time", "!", "then", "else", "do", "if", "while", "until", "{", "exec", "command")
            continue
        out.append(os.path.basename(word) or word)
    return out


def first_denied(command: str, allow: Sequence[str]) -> str | None:
    """The first program of ``command`` outside ``allow`` (``fnmatch`` entries), or None (pure)."""
    for prog in programs(command) or ():
        if not any(fnmatch.fnmatchcase(prog, entry) for entry in allow):
            return prog
    return None


def decision(message: str) -> dict[str, Any]:
    """Claude Code's PreToolUse deny decision carrying ``message`` (pure)."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": message}}


def hook_settings(python: str, config: str) -> dict[str, Any]:
    """The ``hooks`` entry of Claude Code's settings: this module on every Bash call (pure)."""
    command = " ".join(shlex.quote(w) for w in (python, "-I", "-m", SCRIPT_MODULE, config))
    return {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": command,
                                                          "timeout": int(ASK_BOUND) + 5}]}]}


def config_bytes(capsule: str, allow: Sequence[str]) -> bytes:
    """``murmur/pretool.json``: the capsule's name and the programs its Bash tool may run."""
    return json.dumps({"capsule": capsule, "allow": list(allow)}).encode("utf-8")


def ask(socket_path: str, binary: str) -> str | None:
    """The transport's message for ``binary`` over the deny socket (None: it did not answer)."""
    directory, name = os.path.split(socket_path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(ASK_BOUND)
    here = os.getcwd()
    try:
        os.chdir(directory or ".")
        try:
            s.connect(name)
        finally:
            os.chdir(here)
        s.sendall(binary.encode("utf-8") + b"\n")
        s.shutdown(socket.SHUT_WR)
        data = b""
        while len(data) < MESSAGE_LIMIT:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        s.close()
    text = data.decode("utf-8", "replace").strip()
    return text or None


def main(argv: Sequence[str]) -> int:
    """The hook: read the call on stdin, print a deny decision or nothing; exit 0."""
    try:
        call = json.loads(sys.stdin.buffer.read(1 << 20) or b"{}")
        with open(argv[0], encoding="utf-8") as fh:
            conf = json.load(fh)
    except (OSError, ValueError, IndexError):
        return 0  # no decision: Claude Code's own rules decide
    tool_input = call.get("tool_input") if isinstance(call, dict) else None
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str) or call.get("tool_name") != "Bash":
        return 0
    allow = [str(a) for a in conf.get("allow", [])]
    binary = first_denied(command, allow)
    if binary is None:
        return 0
    message = ask(os.path.join(os.path.dirname(argv[0]), os.path.basename(SOCKET_FILE)), binary)
    if message is None:
        from murmur.grants import denied_binary

        message = denied_binary(binary, str(conf.get("capsule") or "this capsule"), allow)
    sys.stdout.write(json.dumps(decision(message)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
