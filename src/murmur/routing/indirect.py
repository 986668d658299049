"""Indirect grants: under advisory containment a shell or interpreter grant runs anything
(spec/routing.md "Indirect grants"). Pure.

Advisory containment checks only the program a command names, before it starts
(spec/containment.md "advisory"), so a capsule granted ``sh`` runs ``ls`` as ``sh -c ls``.
Under scoped or sealed, ``murmur.sandbox`` limits Execute to the binaries ``shell.allow``
resolves to, and ``sh`` can run nothing else: only explicit holders can run the binary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from murmur.manifest import Containment
from murmur.routing.catalog import Capsule, Holder

# programs that run a program named in their arguments or their input
INTERPRETERS = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox", "env", "xargs",
    "python", "python3", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua", "tclsh",
    "awk", "gawk", "mawk", "make", "nohup", "timeout", "nice", "time", "sudo", "su",
})
_VERSIONED = re.compile(r"^(python|python3|perl|ruby|php|lua|node)[0-9.]*$")


def is_interpreter(binary: str) -> bool:
    """Whether a ``shell.allow`` entry can run any other program (``python3.11`` counts)."""
    name = binary.rsplit("/", 1)[-1]
    return name in INTERPRETERS or bool(_VERSIONED.match(name))


@attrs.frozen
class Indirect:
    """A capsule or member that does not list the binary yet can run it.

    Attributes:
        holder (Holder): the row (label, capsule, member).
        via (tuple[str, ...]): its ``shell.allow`` entries that run any program.
        why (str): the sentence that says so.
        exact (str): the edit that makes the grant exact.
    """

    holder: Holder
    via: tuple[str, ...]
    why: str
    exact: str


def containment_floor(capsule: Capsule) -> Containment:
    """The class a capsule declares (``capabilities.containment``; none = advisory)."""
    caps = capsule.manifest.capabilities
    return caps.containment if caps is not None and caps.containment is not None else Containment.ADVISORY


def indirect_holders(candidates: Sequence[Holder], binary: str) -> tuple[Indirect, ...]:
    """Rows of ``candidates`` that run ``binary`` only through a shell or interpreter grant,
    under advisory containment; capsules declaring scoped or sealed are never listed."""
    out: list[Indirect] = []
    for h in candidates:
        allow = h.capsule.manifest.shell_allow
        if binary in allow or containment_floor(h.capsule) is not Containment.ADVISORY:
            continue
        via = tuple(b for b in allow if is_interpreter(b))
        if not via:
            continue
        first = via[0]
        out.append(Indirect(
            h, via,
            why=(f"'{h.label}' runs under advisory containment, where only the program a command names is "
                 f"checked, so its `{first}` grant runs `{binary}` too (`{first} -c '{binary} …'`)"),
            exact=(f"set `capabilities.containment: scoped` in {h.capsule.name}'s murmur.yaml (Execute is then "
                   f"limited to capabilities.shell.allow), or drop {', '.join(f'`{v}`' for v in via)} from "
                   f"capabilities.shell.allow; reinstall and restart"),
        ))
    return tuple(out)


def is_codex(capsule: Capsule) -> bool:
    """Whether the capsule's agent speaks the Codex CLI (``inference.protocol: codex``, or no
    protocol and a command whose base name is ``codex``; spec/agent.md)."""
    inf = capsule.manifest.inference
    if inf is None:
        return False
    if inf.protocol is not None:
        return inf.protocol == "codex"
    command = inf.command or ""
    return bool(command) and command.split()[0].rsplit("/", 1)[-1] == "codex"


def codex_note(capsule: Capsule) -> str | None:
    """How a Codex capsule's shell grant is held (None for any other capsule): Codex runs
    commands itself and cannot be limited by program, so ``shell.allow`` binds it only through
    the containment class (scoped/sealed Execute) — not per program."""
    if not is_codex(capsule):
        return None
    klass = containment_floor(capsule)
    if klass is Containment.ADVISORY:
        return ("Codex runs its own commands and cannot be limited per program: under advisory containment its "
                "shell.allow is not enforced; set `capabilities.containment: scoped` to make the sandbox hold it")
    return (f"Codex runs its own commands and cannot be limited per program: its shell.allow is enforced by the "
            f"{klass.value} sandbox (Execute limited to these binaries), not per program")
