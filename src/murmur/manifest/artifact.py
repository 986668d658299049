"""Artifact manifests: the ``murmur.yaml`` a tool, driver, hook or skill ships in its ``.mur.zip``.

An artifact manifest is told apart from a capsule manifest by its top-level ``runtime:``
(``tool | driver | hook | skill``); ``runtime: capsule`` (optionally with ``execution:
static``) is a capsule manifest that says so. Keys (spec/components.md, "Artifact
manifests")::

    name, version            required; the name rule is E-BLD-001
    runtime                  tool | driver | hook | skill (any text: upstream packs the rest as wasm)
    implementation           native makes a tool native (anything else: wasm)
    execution                wasm | native | static, case-insensitive; derived when absent
    description              free text
    requires_files           list; default ["skill.md"] for skills, [] otherwise
    input_schema             a JSON-Schema mapping, or the same as a JSON string
    binding, execution_mode, commit_policy   hook contract fields (checked together)
    capabilities, config     accepted and inert (only the capsule operator grants)

Pure: text in, an :class:`ArtifactManifest` or a :class:`~murmur.errors.DiagnosticError`
(every fault at once, ``path:line:col``) out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import attrs

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.manifest.rules import NAME_RE, RESERVED_VERSIONS, VERSION_RE
from murmur.manifest.yamltext import YMap, YSeq, YStr, parse_located, position, to_plain

ARTIFACT_RUNTIMES = ("tool", "driver", "hook", "skill")
"""Top-level ``runtime:`` values that mark an artifact manifest."""

EXECUTIONS = ("wasm", "native", "static")

HOOK_BINDINGS = ("on-stage", "on-session-start", "on-task-start", "on-inference", "on-tool-call",
                 "on-shell", "on-compaction", "on-task-end", "on-session-end")
COMMIT_POLICIES = ("none", "write-manifests", "replace-context", "reopen-task")
_BINDING_COMMITS = {"on-stage": "write-manifests", "on-compaction": "replace-context",
                    "on-task-end": "reopen-task"}
"""The one arm a binding may commit besides ``none`` (bindings not listed commit nothing)."""

_FaultFn = Callable[..., None]
_ChoiceFn = Callable[..., "str | None"]

EMPTY_SCHEMA: dict[str, object] = {"type": "object", "properties": {}}
"""The tool parameters given when an artifact declares no ``input_schema``."""

_KNOWN = frozenset({"name", "version", "runtime", "implementation", "execution", "description",
                    "requires_files", "input_schema", "binding", "execution_mode",
                    "commit_policy", "capabilities", "config", "mur_version"})
_INERT = {"capabilities": "only the capsule operator grants; an artifact's own capabilities are inert",
          "config": "an artifact's config comes from the capsule's artifacts[] entry"}


@attrs.frozen
class HookContract:
    """A hook's contract: ``binding`` (None = every event), ``execution_mode``, ``commit_policy``."""

    binding: str | None = None
    execution_mode: str = "blocking"
    commit_policy: str = "none"


@attrs.frozen
class ArtifactManifest:
    """A validated artifact manifest.

    Attributes:
        execution (str): ``wasm``, ``native`` or ``static`` (declared, else derived).
        requires_files (tuple[str, ...]): in declared order (defaults applied).
        input_schema (dict | None): the tool's parameters schema as parsed JSON.
        hook (HookContract | None): set for ``runtime: hook``.
    """

    name: str
    version: str
    runtime: str
    execution: str
    implementation: str | None = None
    description: str | None = None
    requires_files: tuple[str, ...] = ()
    input_schema: dict[str, object] | None = None
    hook: HookContract | None = None

    @property
    def role(self) -> str:
        """The world it is hosted in: ``tool``, ``driver``, ``hook`` (a ``skill`` is not
        hosted; older spellings such as ``wasm`` and ``native`` are tools)."""
        return self.runtime if self.runtime in ARTIFACT_RUNTIMES else "tool"

    @property
    def parameters(self) -> dict[str, object]:
        """The tool parameters a model is shown (``input_schema`` or :data:`EMPTY_SCHEMA`)."""
        return dict(self.input_schema) if self.input_schema is not None else dict(EMPTY_SCHEMA)


def derive_execution(runtime: str, implementation: str | None) -> str:
    """Upstream's derivation when ``execution`` is absent: skill → static, native tool →
    native, everything else → wasm."""
    if runtime == "skill":
        return "static"
    if runtime == "tool" and implementation == "native":
        return "native"
    return "wasm"


def top_runtime(root: object) -> str | None:
    """The top-level ``runtime:`` text of a located manifest tree (None when absent)."""
    if isinstance(root, YMap):
        value = root.get("runtime")
        if isinstance(value, YStr):
            return str(value)
    return None


def is_artifact_text(text: str, *, path: str) -> bool:
    """True when ``text`` parses as a mapping with a ``runtime:`` other than ``capsule``
    (upstream's build reads any such manifest as an artifact's; ``wasm`` and ``native`` are
    older role spellings it packs as ``wasm``)."""
    try:
        root = parse_located(text, path=path)
    except DiagnosticError:
        return False
    runtime = top_runtime(root)
    return runtime is not None and runtime != "capsule"


def parse_artifact_manifest(text: str, *, path: str,
                            warnings: list[Diagnostic] | None = None) -> ArtifactManifest:
    """Validate an artifact manifest's text.

    Raises:
        DiagnosticError: every fault: ``E-MAN-002`` (not a mapping), ``E-MAN-001`` (a
        missing name/version/runtime), ``E-BLD-001`` (a bad name), ``E-REG-004`` (a
        reserved version), ``E-MAN-003`` (a wrong value or type, an unknown key, a bad
        ``input_schema``, a hook contract whose ``commit_policy`` its ``binding`` cannot
        honour, or ``async`` with a committing policy).
    """
    root = parse_located(text, path=path)
    faults: list[Diagnostic] = []

    def fault(code: str, message: str, node: object, hint: str | None = None) -> None:
        line, col = position(node)
        faults.append(error(code, message, hint=hint, path=path, line=line, col=col))

    if not isinstance(root, YMap):
        raise DiagnosticError(error("E-MAN-002", "a manifest must be a mapping of keys",
                                    path=path, hint="start with `name:`, `version:` and `runtime:`"))

    def text_of(key: str, *, required: bool = False) -> str | None:
        value = root.get(key)
        if value is None:
            if required:
                line, col = root.key_pos.get(key, (root.line, root.col))
                faults.append(error("E-MAN-001", f"`{key}` is required in an artifact manifest",
                                    path=path, line=line, col=col, hint=f"add `{key}:`"))
            return None
        if not isinstance(value, YStr):
            fault("E-MAN-003", f"`{key}` must be text", value)
            return None
        return str(value)

    def choice(key: str, allowed: tuple[str, ...], *, fold: bool = False) -> str | None:
        value = text_of(key)
        if value is None:
            return None
        folded = value.lower() if fold else value
        if folded not in allowed:
            fault("E-MAN-003", f"`{key}: {value}` must be one of: {', '.join(allowed)}", root.get(key),
                  hint=f"use one of: {', '.join(allowed)}")
            return None
        return folded

    for key in root.key_pos:
        why = _INERT.get(key) if key in _KNOWN else "it is not an artifact manifest key (upstream's build ignores it too)"
        if why is not None and warnings is not None:
            line, col = root.key_pos[key]
            warnings.append(error("W-SEC-019", f"`{key}` has no effect here: {why}",
                                  path=path, line=line, col=col))

    name = text_of("name", required=True)
    if name is not None and NAME_RE.fullmatch(name) is None:
        fault("E-BLD-001", f"artifact name `{name}` is not valid", root.get("name"),
              hint="use lowercase letters, digits and inner `-`, at most 100 characters")
    version = text_of("version", required=True)
    if version is not None:
        if version.strip().lower() in RESERVED_VERSIONS:
            fault("E-REG-004", f"version `{version}` is reserved", root.get("version"),
                  hint="give an exact version such as `0.1.0`")
        elif VERSION_RE.fullmatch(version) is None:
            fault("E-MAN-003", f"version `{version}` is not a valid version", root.get("version"))
    runtime = text_of("runtime", required=True)
    implementation = text_of("implementation")
    execution = choice("execution", EXECUTIONS, fold=True)
    description = text_of("description")
    requires = _requires_files(root, fault)
    schema = _input_schema(root, fault)
    hook = _hook_contract(root, runtime, fault, choice) if runtime else None
    if faults:
        raise DiagnosticError(faults)
    assert name is not None and version is not None and runtime is not None
    if requires is None:
        requires = ("skill.md",) if runtime == "skill" else ()
    return ArtifactManifest(
        name=name, version=version, runtime=runtime,
        execution=execution or derive_execution(runtime, implementation),
        implementation=implementation, description=description,
        requires_files=requires, input_schema=schema, hook=hook)


def _requires_files(root: YMap, fault: _FaultFn) -> tuple[str, ...] | None:
    value = root.get("requires_files")
    if value is None:
        return () if "requires_files" in root.key_pos else None
    if not isinstance(value, YSeq) or not all(isinstance(v, YStr) for v in value):
        fault("E-MAN-003", "`requires_files` must be a list of relative paths", value)
        return ()
    return tuple(str(v) for v in value)


def _input_schema(root: YMap, fault: _FaultFn) -> dict[str, object] | None:
    value = root.get("input_schema")
    if value is None:
        return None
    if isinstance(value, YMap):
        plain = to_plain(value)
        assert isinstance(plain, dict)
        return plain
    if isinstance(value, YStr):
        try:
            parsed = json.loads(str(value))
        except json.JSONDecodeError as exc:
            fault("E-MAN-003", f"`input_schema` is not valid JSON ({exc.msg})", value,
                  "write a JSON object, or the schema as a YAML mapping")
            return None
        if isinstance(parsed, Mapping):
            return dict(parsed)
    fault("E-MAN-003", "`input_schema` must be a JSON-Schema object (a mapping or a JSON string)",
          value)
    return None


def _hook_contract(root: YMap, runtime: str, fault: _FaultFn, choice: _ChoiceFn) -> HookContract | None:
    present = [k for k in ("binding", "execution_mode", "commit_policy") if k in root.key_pos]
    if runtime != "hook":
        for key in present:
            fault("E-MAN-003", f"`{key}` is a hook contract field; this artifact is `runtime: {runtime}`",
                  root.get(key))
        return None
    binding = choice("binding", HOOK_BINDINGS)
    mode = choice("execution_mode", ("blocking", "async")) or "blocking"
    policy = choice("commit_policy", COMMIT_POLICIES) or "none"
    if binding is not None and policy != "none" and _BINDING_COMMITS.get(binding) != policy:
        honours = _BINDING_COMMITS.get(binding)
        fault("E-MAN-003",
              f"commit_policy '{policy}' is not valid for binding '{binding}'; binding '{binding}' "
              + (f"honors commit_policy '{honours}'" if honours else "commits nothing"),
              root.get("commit_policy"), "use `commit_policy: none` or the policy the binding honours")
    if binding == "on-stage" and mode == "async":
        fault("E-MAN-003", "an `on-stage` hook must be `execution_mode: blocking`",
              root.get("execution_mode"))
    elif mode == "async" and policy != "none":
        fault("E-MAN-003", "`execution_mode: async` requires `commit_policy: none`",
              root.get("execution_mode"), "an async hook's output is discarded; make it blocking")
    return HookContract(binding=binding, execution_mode=mode, commit_policy=policy)
