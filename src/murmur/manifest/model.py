"""The attrs model of ``murmur.yaml`` (spec/manifest.md, "Fields").

Every class is frozen. Absent blocks are ``None`` where absence means something different
from an empty block (e.g. ``shell`` absent = no shell tool at all); list fields default to
empty tuples. Validation lives in :mod:`murmur.manifest.load`, not here: these types only
describe a manifest that already passed it.
"""

from __future__ import annotations

import enum

import attrs


class Containment(enum.Enum):
    """Containment classes, ordered: advisory < scoped < sealed."""

    ADVISORY = "advisory"
    SCOPED = "scoped"
    SEALED = "sealed"

    @property
    def rank(self) -> int:
        """0, 1, 2 for advisory, scoped, sealed."""
        return ["advisory", "scoped", "sealed"].index(self.value)


class TaskAcceptance(enum.Enum):
    NONE = "none"
    SINGLE = "single"
    QUEUE = "queue"


class AfterTask(enum.Enum):
    EXIT = "exit"
    SLEEP = "sleep"


class Transport(enum.Enum):
    HTTP = "http"
    PROCESS = "process"


class Conversation(enum.Enum):
    """``lifecycle.conversation``: ``stateless`` (every task starts empty) or ``threaded``
    (a task starts from its context's durable record; spec/conversations.md)."""

    STATELESS = "stateless"
    THREADED = "threaded"


class RecordMode(enum.Enum):
    """``context.record``: whether the conversation record is written (spec/conversations.md)."""

    ON = "on"
    OFF = "off"


@attrs.frozen
class ContextRetain:
    """``context.retain``: ``max_messages`` (>= 1) kept in the record ``--context`` names,
    ``max_age`` (seconds) after which this capsule's records are removed."""

    max_messages: int | None = None
    max_age: int | None = None


@attrs.frozen
class ContextBlock:
    """``context`` (the keys that act here): the durable conversation record.

    ``record_store`` is one path segment (checked at launch, ``E-CAP-011``); None means the
    capsule's name.
    """

    record: RecordMode = RecordMode.ON
    record_store: str | None = None
    retain: ContextRetain | None = None
    max_tokens: int | None = None  # the session token budget compaction is measured against


@attrs.frozen
class ArtifactState:
    """``artifacts[].capabilities.state``: the store this artifact opens (default: the capsule's name)."""

    store: str | None = None


@attrs.frozen
class ArtifactNetwork:
    """``artifacts[].capabilities.network.allow``: narrows a tool's or driver's hosts below the
    capsule's ceiling (``()`` is a real narrowing to nothing; None: the ceiling)."""

    allow: tuple[str, ...] | None = None


@attrs.frozen
class ArtifactFilesystem:
    """``artifacts[].capabilities.filesystem.scope``: the part of the workdir mounted as the
    component's ``"."`` (None: the whole workdir; a hook: nothing)."""

    scope: str | None = None


@attrs.frozen
class ArtifactCaps:
    """``artifacts[].capabilities``: the per-artifact grant: ``state`` (the spawn envelope's
    state-store axis), and for components ``network`` and ``filesystem`` (spec/components.md);
    the other upstream sub-keys are accepted with a ``W-SEC-019`` warning."""

    state: ArtifactState | None = None
    network: ArtifactNetwork | None = None
    filesystem: ArtifactFilesystem | None = None


@attrs.frozen
class Gateway:
    """``artifacts[].gateway`` on the inference driver entry (newer upstream): where the
    provider is and which credential reaches it. ``api_key`` keeps its ``${VAR}`` text and
    resolves only in the capsule's own process; ``keyless`` says no key is sent."""

    endpoint: str | None = None
    api_key: str | None = None
    keyless: bool = False


@attrs.frozen
class ArtifactRef:
    """One ``artifacts[]`` entry: a tool, driver, hook or skill the capsule uses."""

    name: str
    version: str | None = None
    runtime: str = "tool"  # tool | driver | hook | skill
    source: str | None = None
    local_source: bool | None = None
    capabilities: ArtifactCaps | None = None
    gateway: Gateway | None = None
    prompt_payload: bool | None = None  # None: true for a skill


@attrs.frozen
class NetworkCaps:
    """``capabilities.network``: ``allow`` entries (URL, bare host, host:port)."""

    allow: tuple[str, ...] = ()
    unix_sockets: bool = False


@attrs.frozen
class PeerFetchCaps:
    allow: tuple[str, ...] = ()


@attrs.frozen
class ShellCaps:
    """``capabilities.shell``: bare binary names and environment globs kept for them."""

    allow: tuple[str, ...] = ()
    baseline_env: tuple[str, ...] = ()
    strip_env: tuple[str, ...] = ()


@attrs.frozen
class SpawnCaps:
    """``capabilities.spawn.allow``: capsule names this capsule may delegate to."""

    allow: tuple[str, ...] = ()


@attrs.frozen
class EnvCaps:
    """``capabilities.env.allow``: environment variable names passed through."""

    allow: tuple[str, ...] = ()


@attrs.frozen
class FilesystemCaps:
    """``capabilities.filesystem``: the workdir part, its exec grant, and read-only paths in it."""

    scope: str = "."
    workdir_exec: bool = False
    read_only: tuple[str, ...] = ()


@attrs.frozen
class ResourceCaps:
    """``capabilities.resources``: per-command ceilings (spec/containment.md, "Limits"); None = unset."""

    max_processes: int | None = None
    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    max_open_files: int | None = None
    cgroup_memory_bytes: int | None = None
    cgroup_pids_max: int | None = None


@attrs.frozen
class StateCaps:
    store: str | None = None


@attrs.frozen
class Capabilities:
    """The whole ``capabilities`` block. ``None`` sub-blocks were absent."""

    network: NetworkCaps | None = None
    peer_fetch: PeerFetchCaps | None = None
    shell: ShellCaps | None = None
    spawn: SpawnCaps | None = None
    env: EnvCaps | None = None
    filesystem: FilesystemCaps | None = None
    state: StateCaps | None = None
    containment: Containment | None = None
    resources: ResourceCaps | None = None


@attrs.frozen
class DriverRef:
    artifact: str
    config: dict[str, object] | None = None


@attrs.frozen
class Compaction:
    """``inference.compaction``: ``threshold`` (0, 1] of ``context.max_tokens`` at which
    ``on-compaction`` fires; ``model`` / ``system_prompt`` (or ``_file``) handed to the hook;
    ``dump_summaries`` appends each committed compaction to ``out/compaction-summaries.jsonl``."""

    threshold: float = 0.98
    model: str | None = None
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    dump_summaries: bool = False


@attrs.frozen
class Inference:
    """``inference``. ``api_key`` keeps its ``${VAR}`` text; it resolves only where inference runs.

    ``budget_tokens`` is the task's spending ceiling: input + output tokens summed over its
    turns, as the provider reports them (None: no ceiling; see ``spec/agent.md``).
    """

    transport: Transport = Transport.HTTP
    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = None
    driver: DriverRef | None = None
    command: str | None = None
    protocol: str | None = None  # process only: stdio | claude-code | codex (None: from command)
    max_turns: int = 10
    max_tokens: int = 8192
    budget_tokens: int | None = None
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    system_prompt_artifact: str | None = None  # a skill read once as the system prompt
    max_task_reopens: int = 1  # times an on-task-end hook may reopen one task (0: never)
    compaction: Compaction | None = None


@attrs.frozen
class Lifecycle:
    """``lifecycle`` with the documented defaults (single + exit, depth 1, 600 s).

    ``input_timeout_secs`` (seconds, None = wait forever) bounds how long a task may sit in
    ``input-required``; ``conversation`` says whether tasks of one context share history.
    """

    task_acceptance: TaskAcceptance = TaskAcceptance.SINGLE
    queue_depth: int = 1
    after_task: AfterTask = AfterTask.EXIT
    delegation_deadline_secs: int = 600
    input_timeout_secs: int | None = None
    conversation: Conversation = Conversation.STATELESS


@attrs.frozen
class PeerTasks:
    accept: bool = False


@attrs.frozen
class Exports:
    peer_tasks: PeerTasks | None = None


@attrs.frozen
class DoorCredential:
    """One declared door credential: a name and the door methods it may call."""

    name: str
    scopes: tuple[str, ...] = ()


@attrs.frozen
class Authentication:
    scheme: str = "bearer"
    credentials: tuple[DoorCredential, ...] = ()


@attrs.frozen
class Network:
    """``network``: the door's ``authentication`` and its fixed ``internal_port`` (None:
    the OS picks a free port)."""

    authentication: Authentication | None = None
    internal_port: int | None = None


@attrs.frozen
class Retain:
    """``trace.retain``; ``max_age`` in seconds."""

    max_sessions: int | None = None
    max_age: int | None = None


@attrs.frozen
class Trace:
    retain: Retain | None = None


@attrs.frozen
class Observability:
    """``observability``: ``otel_endpoint`` the OTLP/HTTP base URL (spec/trace.md)."""

    otel_endpoint: str | None = None


@attrs.frozen
class Manifest:
    """A validated ``murmur.yaml``.

    ``plan`` is the path (relative to the capsule root) of a plan file packed with the
    capsule; its schema is ``spec/plan.md``.
    """

    name: str
    version: str
    description: str | None = None
    mur_version: str | None = None
    runtime: str | None = None  # only `capsule` loads (rules); artifact roles: murmur.manifest.artifact
    execution: str | None = None  # wasm | native | static (any case), as written
    requires_files: tuple[str, ...] | None = None
    artifacts: tuple[ArtifactRef, ...] = ()
    capabilities: Capabilities = attrs.field(factory=Capabilities)
    inference: Inference | None = None
    plan: str | None = None
    lifecycle: Lifecycle = attrs.field(factory=Lifecycle)
    exports: Exports | None = None
    context: ContextBlock | None = None
    network: Network | None = None
    trace: Trace | None = None
    observability: Observability | None = None

    @property
    def driver_entry(self) -> ArtifactRef | None:
        """The ``artifacts[]`` entry ``inference.driver.artifact`` names, if declared."""
        inf = self.inference
        if inf is None or inf.driver is None:
            return None
        return next((a for a in self.artifacts if a.name == inf.driver.artifact), None)

    @property
    def internal_port(self) -> int | None:
        """``network.internal_port`` (None when absent)."""
        return self.network.internal_port if self.network else None

    @property
    def spawn_allow(self) -> tuple[str, ...]:
        """``capabilities.spawn.allow`` (empty when absent)."""
        return self.capabilities.spawn.allow if self.capabilities.spawn else ()

    @property
    def shell_allow(self) -> tuple[str, ...]:
        """``capabilities.shell.allow`` (empty when absent)."""
        return self.capabilities.shell.allow if self.capabilities.shell else ()

    @property
    def env_allow(self) -> tuple[str, ...]:
        """``capabilities.env.allow`` (empty when absent)."""
        return self.capabilities.env.allow if self.capabilities.env else ()

    @property
    def network_allow(self) -> tuple[str, ...]:
        """``capabilities.network.allow`` (empty when absent)."""
        return self.capabilities.network.allow if self.capabilities.network else ()

    @property
    def accepts_peer_tasks(self) -> bool:
        """``exports.peer_tasks.accept`` (false when absent)."""
        return bool(self.exports and self.exports.peer_tasks and self.exports.peer_tasks.accept)

    @property
    def authentication(self) -> Authentication | None:
        """``network.authentication`` or None for a public door."""
        return self.network.authentication if self.network else None
