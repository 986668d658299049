"""The tools an agent's model is offered, and the grants behind them.

A tool exists exactly when its grant exists:

============================  ==================================================================
tool                          grant
============================  ==================================================================
one per shell binary          ``capabilities.shell.allow`` lists it (input: ``{"args": [...]}``)
``delegate-task``             non-empty ``capabilities.spawn.allow`` and a delegation service
``call-member``               a reachability edge from this member (the session's callees)
``end-without-answer``        the same grant as ``call-member``
============================  ==================================================================

Runtime-provided tools are answered before the shell allowlist, so a binary cannot shadow
one. A call to any other name is refused with a sentence naming the grant that is missing
(:func:`missing_grant`). Everything here is pure: no I/O.

Design: spec/agent.md, "Tools".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

import attrs

from murmur.agent.fence import fence
from murmur.agent.transports import ToolSpec
from murmur.grants import grant_entry
from murmur.manifest import Manifest
from murmur.workload import TaskServices

__all__ = [
    "CALL_MEMBER",
    "DELEGATE_TASK",
    "END_WITHOUT_ANSWER",
    "RESERVED",
    "Inventory",
    "Tool",
    "build_inventory",
    "missing_grant",
    "shell_args",
    "shell_result_text",
    "string_fields",
]

DELEGATE_TASK = "delegate-task"
CALL_MEMBER = "call-member"
END_WITHOUT_ANSWER = "end-without-answer"
# Names only the runtime may provide (an artifact using one is refused with E-CAP-013).
RESERVED = (
    "share-file",
    "fetch-peer-file",
    DELEGATE_TASK,
    "submit-plan",
    "switch-driver",
    CALL_MEMBER,
    END_WITHOUT_ANSWER,
)

_WIRE_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_WIRE_MAX = 64


@attrs.frozen
class Tool:
    """One offered tool.

    Attributes:
        name (str): murmur's name: the binary, or the runtime tool's name.
        kind (str): ``shell`` | ``delegate-task`` | ``call-member`` | ``end-without-answer`` |
            ``component`` (an artifact tool, :mod:`murmur.agent.components`).
        spec (ToolSpec): what the model sees (``spec.name`` is the wire name).
    """

    name: str
    kind: str
    spec: ToolSpec


@attrs.frozen
class Inventory:
    """The tools of one task, in the order offered (runtime tools first, then binaries)."""

    tools: tuple[Tool, ...] = ()

    def by_wire_name(self, wire: str) -> Tool | None:
        """The tool the model called by ``wire`` name, or None."""
        for t in self.tools:
            if t.spec.name == wire:
                return t
        return None

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs sent to the provider."""
        return tuple(t.spec for t in self.tools)

    @property
    def names(self) -> tuple[str, ...]:
        """murmur names, for ``session_start.tools_declared``."""
        return tuple(t.name for t in self.tools)


def wire_name(name: str, taken: set[str]) -> str:
    """A provider-safe tool name for ``name`` (``[A-Za-z0-9_-]``, at most 64), unique in ``taken``."""
    base = _WIRE_UNSAFE.sub("_", name)[:_WIRE_MAX] or "tool"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        suffix = f"_{n}"
        candidate = base[: _WIRE_MAX - len(suffix)] + suffix
    taken.add(candidate)
    return candidate


def _schema(properties: dict[str, object], required: Sequence[str]) -> dict[str, object]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _shell_tool(binary: str, taken: set[str]) -> Tool:
    spec = ToolSpec(
        name=wire_name(binary, taken),
        description=(
            f"Run the program `{binary}` in the capsule's workdir and return its exit code, "
            "stdout and stderr. `args` are the arguments after the program name, one list "
            "element per argument; nothing is parsed by a shell (no pipes, globs or quotes)."
        ),
        input_schema=_schema(
            {
                "args": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": f"arguments passed to {binary}, e.g. [\"-l\", \"src\"]",
                }
            },
            ["args"],
        ),
    )
    return Tool(binary, "shell", spec)


def _delegate_tool(spawn_allow: Sequence[str], taken: set[str]) -> Tool:
    spec = ToolSpec(
        name=wire_name(DELEGATE_TASK, taken),
        description=(
            "Start a sub-capsule on a task of its own. Returns when the child has started "
            "(not when it finishes) with a delegation id; the child's outcome arrives later "
            "as a separate completion task carrying that id."
        ),
        input_schema=_schema(
            {
                "capsule": {"type": "string", "enum": list(spawn_allow)},
                "version": {"type": "string", "description": "the capsule's exact version"},
                "task": {"type": "string", "description": "everything the sub-capsule is told"},
            },
            ["capsule", "version", "task"],
        ),
    )
    return Tool(DELEGATE_TASK, DELEGATE_TASK, spec)


def _call_member_tool(callees: Sequence[str], taken: set[str]) -> Tool:
    spec = ToolSpec(
        name=wire_name(CALL_MEMBER, taken),
        description=(
            "Give another member of this formation a task, stated in full. Returns as soon "
            "as the member holds the task; when you end your turn, this task waits for every "
            "member's answer and continues once with all of them."
        ),
        input_schema=_schema(
            {
                "member": {"type": "string", "enum": list(callees)},
                "task": {"type": "string", "description": "the whole task for the member"},
            },
            ["member", "task"],
        ),
    )
    return Tool(CALL_MEMBER, CALL_MEMBER, spec)


def _end_tool(taken: set[str]) -> Tool:
    spec = ToolSpec(
        name=wire_name(END_WITHOUT_ANSWER, taken),
        description=(
            "End this task without an answer, giving the reason (for a task you cannot or "
            "should not answer). Not available while member calls are outstanding."
        ),
        input_schema=_schema(
            {"reason": {"type": "string", "description": "why there is no answer"}},
            ["reason"],
        ),
    )
    return Tool(END_WITHOUT_ANSWER, END_WITHOUT_ANSWER, spec)


def _component_tool(name: str, description: str, parameters: dict[str, object], taken: set[str]) -> Tool:
    return Tool(name, "component", ToolSpec(name=wire_name(name, taken), description=description,
                                            input_schema=parameters))


def build_inventory(manifest: Manifest, services: TaskServices,
                    components: Sequence[tuple[str, str, dict[str, object]]] = ()) -> Inventory:
    """The tools offered for one task (pure).

    Args:
        manifest (Manifest): the capsule's manifest (``shell.allow``, ``spawn.allow``).
        services (TaskServices): the session's services; ``delegate`` / ``call_member`` are
            None where the grant does not exist, ``callees`` lists the reachable members.
        components: ``(name, description, input schema)`` of each artifact tool.

    Returns:
        Inventory: runtime tools whose grant exists, then one tool per allowlisted binary
        whose name is not a runtime tool's.
    """
    taken: set[str] = set()
    tools: list[Tool] = []
    spawn = services.spawn if services.spawn is not None else manifest.spawn_allow
    if spawn and services.delegate is not None:
        tools.append(_delegate_tool(spawn, taken))
    if services.callees and services.call_member is not None:
        tools.append(_call_member_tool(services.callees, taken))
        tools.append(_end_tool(taken))
    for binary in manifest.shell_allow:
        if binary in RESERVED:
            continue
        tools.append(_shell_tool(binary, taken))
    for name, description, parameters in components:  # artifact tools (spec/components.md)
        tools.append(_component_tool(name, description, parameters, taken))
    return Inventory(tuple(tools))


def missing_grant(name: str, shell_allow: Sequence[str] = ()) -> str:
    """The refusal for a call to ``name``, which is not in the task's inventory (pure).

    Args:
        name (str): the tool name the model used.
        shell_allow (Sequence[str]): the manifest's ``capabilities.shell.allow`` today; the
            suggested grant lists them plus ``name`` so following it drops nothing.

    Returns:
        str: one sentence naming the grant that would make the tool exist.
    """
    if name == DELEGATE_TASK:
        return (
            "delegate-task is refused: the grant is missing — it exists only when "
            "capabilities.spawn.allow names at least one capsule (and the session can delegate)"
        )
    if name in (CALL_MEMBER, END_WITHOUT_ANSWER):
        return (
            f"{name} is refused: the grant is missing — it exists only in a formation "
            "member whose roster reachability lets it call another member"
        )
    if name in RESERVED:
        return f"{name} is refused: this runtime does not provide it"
    return (
        f"`{name}` is refused: it is not a tool of this capsule; to run a program of that "
        f"name, add the grant `{grant_entry('capabilities.shell.allow', shell_allow, name)}`"
    )


def shell_args(arguments: Mapping[str, object] | None) -> list[str] | str:
    """Validate a shell tool's input: the argument list, or a refusal sentence (pure)."""
    if arguments is None:
        return "the tool input must be a JSON object like {\"args\": [\"-l\"]}"
    extra = set(arguments) - {"args"}
    if extra:
        return f"unknown input field(s): {', '.join(sorted(extra))}; the only field is `args`"
    args = arguments.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return "`args` must be a list of strings, one per argument"
    if any("\x00" in a for a in args):
        return "an argument contains a NUL byte"
    return list(args)


def string_fields(
    arguments: Mapping[str, object] | None, names: Sequence[str]
) -> dict[str, str] | str:
    """Validate a runtime tool's input of required string fields (pure).

    Returns:
        dict[str, str] | str: the fields, or a refusal sentence.
    """
    if arguments is None:
        return "the tool input must be a JSON object"
    out: dict[str, str] = {}
    for n in names:
        value = arguments.get(n)
        if not isinstance(value, str):
            return f"`{n}` is required and must be a string"
        out[n] = value
    return out


def shell_result_text(
    binary: str,
    exit_code: int,
    stdout: str,
    stderr: str,
    *,
    truncated: bool = False,
) -> str:
    """What the model reads after a shell command (pure).

    The program's output is untrusted: it is fenced under ``tool:<binary>``.
    """
    body = f"stdout:\n{stdout}"
    if stderr:
        body += f"\nstderr:\n{stderr}"
    note = "\n(output was cut at the capture limit)" if truncated else ""
    return f"`{binary}` exited with status {exit_code}{note}\n" + fence(body, f"tool:{binary}")


def json_text(data: Mapping[str, object]) -> str:
    """Compact, key-ordered JSON for a runtime tool's result data."""
    return json.dumps(dict(data), sort_keys=True, separators=(",", ":"), default=str)
