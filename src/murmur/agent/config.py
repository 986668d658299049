"""An agent capsule's ``inference`` block, checked and resolved once at launch.

:func:`agent_config` turns the manifest's ``inference`` block into an :class:`AgentConfig`,
or refuses the launch with a coded diagnostic (``spec/agent.md`` "The ``inference`` block"):

* ``E-RUN-005`` — ``transport: http`` with no ``driver.artifact``;
* ``E-RUN-006`` — a driver artifact murmur does not provide, or a ``transport: process``
  command not found on ``PATH`` (the hint says how to install the protocol's CLI);
* ``E-RUN-009`` — ``system_prompt_file`` unreadable;
* ``E-MAN-003`` — no ``inference`` block, a bad endpoint, no model, both prompt keys, or a
  key reference (``${VAR}``) naming a variable that is unset or blank in the capsule's
  environment (refused at launch, before the door opens).

The endpoint and key come from ``inference.endpoint`` / ``inference.api_key`` or, when those
are absent, from the driver entry's ``artifacts[].gateway`` (newer upstream). The provider key
is **not** resolved here: only its reference is kept (its presence is checked), and it is read
from the environment at inference time (:func:`murmur.agent.transports.http.resolve_api_key`).
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

import attrs

from murmur.agent.harness.choose import INSTALL_HINTS, STDIO, protocol_name
from murmur.agent.transports import anthropic, openai
from murmur.agent.transports.http import check_endpoint, key_variable
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import Manifest, Transport
from murmur.userfile import UserFileError, read_user_text

MAX_SYSTEM_PROMPT_BYTES = 1 << 20
"""A larger ``inference.system_prompt_file`` is refused (``E-RUN-009``)."""

__all__ = ["DRIVERS", "AgentConfig", "agent_config", "driver_kind"]

DEEPSEEK_ARTIFACT = "murmur-driver-deepseek"
"""Upstream's DeepSeek driver posts OpenAI Chat Completions to ``<endpoint>/chat/completions``
with a bearer key, as the OpenAI driver here does (spec/agent.md "Drivers")."""

# Built-in drivers by upstream artifact name.
DRIVERS = {openai.ARTIFACT: "openai", anthropic.ARTIFACT: "anthropic", DEEPSEEK_ARTIFACT: "openai"}


@attrs.frozen
class AgentConfig:
    """What the agent loop needs from the manifest.

    Attributes:
        transport (str): ``http`` | ``process``.
        driver (str | None): ``openai`` | ``anthropic`` | ``wasm`` (a declared driver
            artifact; http only).
        endpoint (str | None): the provider URL (http only).
        model (str | None): the model name.
        api_key_ref (str | None): ``inference.api_key`` as written (``${VAR}`` or literal).
        max_tokens (int): per-turn output cap.
        max_turns (int): inference calls per task.
        budget_tokens (int | None): the task's spending ceiling, input + output tokens over
            its turns as the provider reports them (None: none).
        system_prompt (str | None): the resolved system prompt text.
        system_prompt_source (str): ``none`` | ``inline`` | ``file`` | ``override``.
        driver_config (Mapping[str, object]): ``driver.config`` (empty when absent).
        command (tuple[str, ...]): the agent CLI argv (process only).
        protocol (str | None): ``claude-code`` | ``codex`` | ``stdio`` (process only).
    """

    transport: str
    driver: str | None
    endpoint: str | None
    model: str | None
    api_key_ref: str | None = attrs.field(repr=False)
    max_tokens: int
    max_turns: int
    system_prompt: str | None
    system_prompt_source: str
    driver_config: Mapping[str, object] = attrs.field(factory=dict)
    command: tuple[str, ...] = ()
    budget_tokens: int | None = None
    protocol: str | None = None

    @property
    def key_name(self) -> str | None:
        """The environment variable the key comes from, or None (no key / a literal)."""
        return key_variable(self.api_key_ref)


def driver_kind(artifact: str) -> str | None:
    """``openai`` / ``anthropic`` for a built-in driver artifact name (bare or scoped)."""
    return DRIVERS.get(artifact.rsplit("/", 1)[-1])


def _refuse(code: str, message: str, hint: str | None = None) -> DiagnosticError:
    return DiagnosticError(error(code, message, hint=hint))


def _system_prompt(
    manifest: Manifest, capsule_root: Path, override: str | None
) -> tuple[str | None, str]:
    inf = manifest.inference
    assert inf is not None
    if inf.system_prompt is not None and inf.system_prompt_file is not None:
        raise _refuse(
            "E-MAN-003",
            "inference declares both system_prompt and system_prompt_file",
            "keep one of them",
        )
    if override is not None:
        return override, "override"
    if inf.system_prompt is not None:
        return inf.system_prompt.strip(), "inline"
    if inf.system_prompt_file is not None:
        path = capsule_root / inf.system_prompt_file
        try:
            return read_user_text(path, limit=MAX_SYSTEM_PROMPT_BYTES), "file"
        except UserFileError as exc:
            raise _refuse(
                "E-RUN-009",
                f"the system prompt file {inf.system_prompt_file} cannot be read: {exc.reason}",
                "the path is relative to the capsule's directory",
            ) from None
    return None, "none"


def agent_config(
    manifest: Manifest,
    capsule_root: Path,
    *,
    environ: Mapping[str, str],
    system_prompt_override: str | None = None,
) -> AgentConfig:
    """Check and resolve the ``inference`` block of an agent capsule.

    Args:
        manifest (Manifest): a loaded manifest with an ``inference`` block.
        capsule_root (Path): the capsule's directory (``system_prompt_file`` is relative to it).
        environ (Mapping[str, str]): the session's environment (``PATH`` for a process command).
        system_prompt_override (str | None): ``mur run --system-prompt``.

    Returns:
        AgentConfig: the resolved settings.

    Raises:
        DiagnosticError: ``E-MAN-003``, ``E-RUN-005``, ``E-RUN-006`` or ``E-RUN-009``.
    """
    inf = manifest.inference
    if inf is None:
        raise _refuse("E-MAN-003", "an agent capsule needs an `inference` block")
    prompt, source = _system_prompt(manifest, capsule_root, system_prompt_override)
    base = AgentConfig(
        transport="http",
        driver=None,
        endpoint=None,
        model=inf.model,
        api_key_ref=inf.api_key,
        max_tokens=inf.max_tokens,
        max_turns=inf.max_turns,
        budget_tokens=inf.budget_tokens,
        system_prompt=prompt,
        system_prompt_source=source,
    )
    if inf.transport is Transport.PROCESS:
        return _process_config(manifest, environ, base)
    if inf.driver is None or not inf.driver.artifact:
        raise _refuse(
            "E-RUN-005",
            "no inference driver is configured",
            f"set inference.driver.artifact to {openai.ARTIFACT} or {anthropic.ARTIFACT}",
        )
    kind = driver_kind(inf.driver.artifact)
    declared = manifest.driver_entry
    if kind is None and declared is not None and declared.runtime == "driver":
        kind = "wasm"  # a WASM driver artifact (spec/components.md, "Drivers")
    if kind is None:
        raise _refuse(
            "E-RUN-006",
            f"the inference driver `{inf.driver.artifact}` is an upstream driver component, "
            "which this runtime does not run",
            f"use a built-in driver: {', '.join(DRIVERS)}",
        )
    entry = manifest.driver_entry
    gateway = entry.gateway if entry is not None else None
    endpoint = inf.endpoint or (gateway.endpoint if gateway is not None else None)
    if not endpoint:
        raise _refuse(
            "E-MAN-003",
            "inference.endpoint is required for transport http",
            "give `inference.endpoint`, or `gateway.endpoint` on the driver's artifacts entry",
        )
    problem = check_endpoint(endpoint)
    if problem is not None:
        raise _refuse("E-MAN-003", problem)
    if not inf.model:
        raise _refuse("E-MAN-003", "inference.model is required for transport http")
    key_ref, key_field = inf.api_key, "inference.api_key"
    if key_ref is None and gateway is not None and not gateway.keyless:
        key_ref, key_field = gateway.api_key, f"artifacts[{entry.name if entry else ''}].gateway.api_key"
    _check_key_reference(key_ref, key_field, environ)
    return attrs.evolve(
        base, driver=kind, endpoint=endpoint, api_key_ref=key_ref,
        driver_config=dict(inf.driver.config or {}),
    )


_GATEWAY_ENV = "MURMUR_GATEWAY_ENDPOINT"  # murmur.gateway.ENDPOINT_ENV (not imported: no HTTP stack here)


def _check_key_reference(raw: str | None, field: str, environ: Mapping[str, str]) -> None:
    """Refuse the launch when a ``${VAR}`` key reference names an unset or blank variable.

    Only presence is checked; the value is neither kept nor shown. A session under a tree's
    gateway (``MURMUR_GATEWAY_ENDPOINT`` handed to it: a descendant) need not hold it: the
    gateway attaches the tree's key for the same endpoint and reference (spec/gateway.md
    "Keys"). A root sets that variable only after this check, so a root is still refused.

    Raises:
        DiagnosticError: ``E-MAN-003`` naming the field and the variable.
    """
    var = key_variable(raw)
    if var is not None and not environ.get(var, "").strip() and not environ.get(_GATEWAY_ENV, "").strip():
        raise _refuse(
            "E-MAN-003",
            f"`{field}` references ${{{var}}}, which is not set in the capsule's environment",
            f"set {var} (in the environment or ./.env) before `mur run`",
        )


def _process_config(
    manifest: Manifest, environ: Mapping[str, str], base: AgentConfig
) -> AgentConfig:
    inf = manifest.inference
    assert inf is not None
    command = inf.command
    if not command or not command.strip():
        raise _refuse("E-MAN-003", "inference.command is required for transport process")
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise _refuse("E-MAN-003", f"inference.command cannot be split into words: {exc}") from exc
    binary = argv[0]
    if "/" in binary:
        raise _refuse(
            "E-MAN-003",
            f"inference.command names a path ({binary}); name a bare program found on PATH",
        )
    protocol = protocol_name(argv, inf.protocol)  # a valid name: the manifest rules checked it
    if shutil.which(binary, path=environ.get("PATH", "")) is None:
        raise _refuse(
            "E-RUN-006",
            f"the agent command {binary} is not on PATH",
            INSTALL_HINTS.get(protocol, INSTALL_HINTS[STDIO]),
        )
    if inf.endpoint:
        problem = check_endpoint(inf.endpoint)
        if problem is not None:
            raise _refuse("E-MAN-003", problem)
    _check_key_reference(inf.api_key, "inference.api_key", environ)
    return attrs.evolve(
        base, transport="process", command=argv, protocol=protocol, endpoint=inf.endpoint
    )
