"""The key policy of ``murmur.yaml``: what this runtime does with every key upstream defines.

Each upstream key gets one of three answers (:class:`Answer`):

* **honoured** — the key is part of :mod:`murmur.manifest.model` and acts here;
* **inert** — a recognised upstream key this runtime does not act on: it is accepted, dropped
  before structuring, and reported as ``W-SEC-019`` naming the key and why it has no effect;
* **refused** — a recognised upstream key whose silent absence would be unsafe or misleading
  (a component the capsule would lack, a containment it cannot give): ``E-MAN-005`` saying it
  is an upstream feature this runtime does not support and what to do instead.

A key upstream never had is left to the converter, which reports ``E-MAN-003`` with a
did-you-mean hint. :data:`KEYS` is the whole table; ``spec/manifest.md`` ("Upstream keys")
mirrors it row for row and a test keeps the two identical. Paths are dotted, ``[]`` marks a
list item (``artifacts[].gateway``). Pure: located tree in, faults and warnings out.
"""

from __future__ import annotations

import enum

import attrs

from murmur.manifest.faults import Fault, FieldPath
from murmur.manifest.yamltext import YMap, YSeq, YStr


class Answer(enum.Enum):
    """What the runtime does with a key."""

    HONOURED = "honoured"
    INERT = "inert"
    REFUSED = "refused"


@attrs.frozen
class KeyRule:
    """One row of the key table.

    Attributes:
        path (str): the dotted key path (``[]`` for list items).
        answer (Answer): honoured, inert or refused.
        why (str): honoured: what it does here; inert: why it has no effect (one clause);
            refused: why this runtime cannot give it.
        instead (str | None): refused only: what to do instead.
        free (bool): honoured only: the value is free-form (its keys are not looked up).
    """

    path: str
    answer: Answer
    why: str
    instead: str | None = None
    free: bool = False


_H, _I, _R = Answer.HONOURED, Answer.INERT, Answer.REFUSED

_ARTIFACT_MANIFEST = "it belongs in an artifact's own manifest (one with `runtime: tool`, `driver`, `hook` or `skill`), not in a capsule's"
_CAPSULE_INSTEAD = "add the artifact's `runtime:` to make this an artifact manifest, or move the key to the artifact's murmur.yaml"

KEYS: tuple[KeyRule, ...] = (
    # --- identity -------------------------------------------------------------------
    KeyRule("name", _H, "the capsule's name"),
    KeyRule("version", _H, "the capsule's version"),
    KeyRule("description", _H, "free text"),
    KeyRule("mur_version", _H, "a `mur` version other than the running one is a warning (W-MAN-001); the run continues"),
    KeyRule("requires_files", _H, "the files `mur build` packs besides murmur.yaml (and the files the manifest names)"),
    KeyRule("runtime", _H, "`capsule` in a capsule manifest; `tool`, `driver`, `hook` or `skill` mark an artifact manifest, which `mur build` and `mur install` take (spec/components.md) and `mur run` refuses (E-MAN-003)"),
    KeyRule("implementation", _R, _ARTIFACT_MANIFEST, _CAPSULE_INSTEAD),
    KeyRule("execution", _H, "wasm, native or static (case-insensitive); a capsule's packaging type"),
    KeyRule("input_schema", _R, _ARTIFACT_MANIFEST, _CAPSULE_INSTEAD),
    KeyRule("binding", _R, _ARTIFACT_MANIFEST, _CAPSULE_INSTEAD),
    KeyRule("execution_mode", _R, _ARTIFACT_MANIFEST, _CAPSULE_INSTEAD),
    KeyRule("commit_policy", _R, _ARTIFACT_MANIFEST, _CAPSULE_INSTEAD),
    # --- artifacts ------------------------------------------------------------------
    KeyRule("artifacts", _H, "the artifacts the capsule uses: tools, skills and WASM drivers run here (spec/components.md); hooks are refused"),
    KeyRule("artifacts[].name", _H, "the artifact's name"),
    KeyRule("artifacts[].version", _H, "the artifact's version"),
    KeyRule("artifacts[].runtime", _H, "tool, driver, hook or skill, installed with `mur install` (spec/components.md); `wasm`, `native` are refused"),
    KeyRule("artifacts[].source", _H, "a local source path (needs `local_source: true`)"),
    KeyRule("artifacts[].local_source", _H, "opts `source` in"),
    KeyRule("artifacts[].capabilities", _H, "the per-artifact grant"),
    KeyRule("artifacts[].capabilities.state", _H, "the store this artifact opens: the spawn envelope's state-store axis"),
    KeyRule("artifacts[].capabilities.state.store", _H, "the store's name (default: the capsule's name)"),
    KeyRule("artifacts[].capabilities.network", _H, "a tool's or driver's own network grant (spec/components.md)"),
    KeyRule("artifacts[].capabilities.network.allow", _H, "narrows the component's hosts below the capsule's ceiling; an entry the ceiling does not cover is dropped (W-SEC-007)"),
    KeyRule("artifacts[].capabilities.filesystem", _H, "a component's own directory grant"),
    KeyRule("artifacts[].capabilities.filesystem.scope", _H, "the part of the workdir mounted as the component's directory (created if missing)"),
    KeyRule("artifacts[].capabilities.shell", _I, "shell grants are capsule-wide (upstream ignores them per artifact too)"),
    KeyRule("artifacts[].capabilities.spawn", _I, "spawn grants are capsule-wide (upstream ignores them per artifact too)"),
    KeyRule("artifacts[].capabilities.env", _I, "env grants are capsule-wide (upstream ignores them per artifact too)"),
    KeyRule("artifacts[].capabilities.limits", _I, "WASM component limits; no component runs here"),
    KeyRule("artifacts[].capabilities.resources", _I, "resource limits are capsule-wide (upstream ignores them per artifact too)"),
    KeyRule("artifacts[].capabilities.containment", _I, "containment is capsule-wide (upstream ignores it per artifact too)"),
    KeyRule("artifacts[].gateway", _H, "on the inference driver entry: the provider endpoint and credential, when `inference` gives none"),
    KeyRule("artifacts[].gateway.endpoint", _H, "the provider URL (https, or http to loopback)"),
    KeyRule("artifacts[].gateway.api_key", _H, "`${VAR}` resolved only in the capsule's own process"),
    KeyRule("artifacts[].gateway.keyless", _H, "send no key (local servers)"),
    KeyRule("artifacts[].config", _I, "no artifact component reads a per-artifact config here; the built-in drivers read `inference.driver.config`"),
    KeyRule("artifacts[].prompt_payload", _H, "whether `inference.system_prompt_artifact` may name it (default: true for a skill)"),
    KeyRule("artifacts[].on_overflow", _I, "it tunes async hooks, which do not run here"),
    # --- capabilities ---------------------------------------------------------------
    KeyRule("capabilities", _H, "the capsule's grants"),
    KeyRule("capabilities.network", _H, "network grants"),
    KeyRule("capabilities.network.allow", _H, "the hosts the capsule may reach"),
    KeyRule("capabilities.network.unix_sockets", _H, "the unix-socket grant (an envelope axis)"),
    KeyRule("capabilities.peer_fetch", _H, "peer fetch grants"),
    KeyRule("capabilities.peer_fetch.allow", _H, "the peers whose files may be fetched"),
    KeyRule("capabilities.shell", _H, "the shell tools"),
    KeyRule("capabilities.shell.allow", _H, "one shell tool per binary"),
    KeyRule("capabilities.shell.baseline_env", _H, "variables kept for shell commands"),
    KeyRule("capabilities.shell.strip_env", _H, "variables stripped from shell commands"),
    KeyRule("capabilities.shell.interpreter_runtime", _I, "named host directories are not granted here; a granted binary gets only its own start closure"),
    KeyRule("capabilities.shell.staged_runtime", _I, "no extra runtime tree is bound into the sealed root here (only the fixed runtime trees)"),
    KeyRule("capabilities.spawn", _H, "delegation grants"),
    KeyRule("capabilities.spawn.allow", _H, "the capsules this capsule may delegate to"),
    KeyRule("capabilities.env", _H, "environment grants"),
    KeyRule("capabilities.env.allow", _H, "variables passed to shell commands and delegated children"),
    KeyRule("capabilities.filesystem", _H, "filesystem grants"),
    KeyRule("capabilities.filesystem.scope", _H, "the part of the workdir the capsule works in"),
    KeyRule("capabilities.filesystem.workdir_exec", _H, "the workdir-exec grant (an envelope axis)"),
    KeyRule("capabilities.filesystem.allow", _I, "path grants beyond the workdir are not given to components or commands here; the workdir (or `filesystem.scope`) is all they see"),
    KeyRule("capabilities.filesystem.read_only", _H, "paths under the workdir that scoped and sealed commands may read but not write (spec/containment.md)"),
    KeyRule("capabilities.state", _H, "the capsule-wide state block (an envelope axis)"),
    KeyRule("capabilities.state.store", _H, "the store's name"),
    KeyRule("capabilities.containment", _H, "the containment floor: commands run at least at this class, or the launch is refused naming what the host lacks (E-CAP-003)"),
    KeyRule("capabilities.limits", _I, "WASM component limits; no component runs here"),
    KeyRule("capabilities.resources", _H, "ceilings on each command under scoped and sealed (spec/containment.md, \"Limits\")"),
    KeyRule("capabilities.resources.max_processes", _H, "RLIMIT_NPROC of each command (a pids group where that does not bind)"),
    KeyRule("capabilities.resources.cpu_seconds", _H, "RLIMIT_CPU of each command"),
    KeyRule("capabilities.resources.memory_bytes", _H, "RLIMIT_AS of each command"),
    KeyRule("capabilities.resources.max_open_files", _H, "RLIMIT_NOFILE of each command"),
    KeyRule("capabilities.resources.cgroup_memory_bytes", _H, "memory.max of the command's unit where the cgroup has the memory controller"),
    KeyRule("capabilities.resources.cgroup_pids_max", _H, "pids.max of the session's pids group"),
    KeyRule("capabilities.resources.max_file_size_bytes", _I, "no RLIMIT_FSIZE is set here"),
    KeyRule("capabilities.resources.cgroup_cpu_percent", _I, "no cpu.max is written here"),
    KeyRule("capabilities.resources.cgroup_io_bytes_per_sec", _I, "no io.max is written here"),
    KeyRule("capabilities.resources.workdir_max_bytes", _I, "the workdir's size is not checked here"),
    # --- inference ------------------------------------------------------------------
    KeyRule("inference", _H, "makes the capsule an agent capsule"),
    KeyRule("inference.transport", _H, "http (a built-in driver) or process (an agent CLI)"),
    KeyRule("inference.endpoint", _H, "the provider URL"),
    KeyRule("inference.model", _H, "the model"),
    KeyRule("inference.api_key", _H, "`${VAR}` resolved only in the capsule's own process"),
    KeyRule("inference.driver", _H, "the driver"),
    KeyRule("inference.driver.artifact", _H, "murmur-driver-openai, murmur-driver-anthropic or murmur-driver-deepseek"),
    KeyRule("inference.driver.config", _H, "driver settings", free=True),
    KeyRule("inference.command", _H, "the agent CLI (process transport)"),
    KeyRule("inference.max_turns", _H, "inference calls per task"),
    KeyRule("inference.budget_tokens", _H, "the task's token ceiling (spend_ceiling_reached)"),
    KeyRule("inference.max_tokens", _H, "the per-turn output cap"),
    KeyRule("inference.system_prompt", _H, "the system prompt"),
    KeyRule("inference.system_prompt_file", _H, "the system prompt, from a packed file"),
    KeyRule("inference.system_prompt_artifact", _H, "a skill artifact read once at launch as the system prompt (and left out of the tools)"),
    KeyRule("inference.provider", _R, "the older spelling of `inference.driver` is not read here", "rename `provider:` to `driver:`"),
    KeyRule("inference.compaction", _H, "when an on-compaction hook runs mid-task (spec/conversations.md)"),
    KeyRule("inference.compaction.threshold", _H, "the fraction (0, 1] of context.max_tokens at which on-compaction fires (default 0.98)"),
    KeyRule("inference.compaction.model", _H, "handed to the compaction hook as compaction-event.model"),
    KeyRule("inference.compaction.system_prompt", _H, "handed to the compaction hook verbatim"),
    KeyRule("inference.compaction.system_prompt_file", _H, "the same, read from a file beside the manifest at launch"),
    KeyRule("inference.compaction.dump_summaries", _H, "each committed compaction appended to out/compaction-summaries.jsonl"),
    KeyRule("inference.max_task_reopens", _H, "times an on-task-end hook (`commit_policy: reopen-task`) may reopen one task (default 1; 0 disables); never past `max_turns`"),
    KeyRule("context", _H, "the conversation record (spec/conversations.md)"),
    KeyRule("context.record", _H, "on or off: whether the durable conversation record is written"),
    KeyRule("context.record_store", _H, "the record's directory name (default: the capsule's name; one path segment, else E-CAP-011)"),
    KeyRule("context.retain", _H, "how much of the record is kept"),
    KeyRule("context.retain.max_messages", _H, "at launch, the record `--context` names keeps its newest N messages"),
    KeyRule("context.retain.max_age", _H, "at launch, this capsule's records not written for that long are removed"),
    KeyRule("context.max_tokens", _H, "the session token budget: on-compaction fires past inference.compaction.threshold of it"),
    KeyRule("context.seed_budget", _I, "seed-context hooks do not run here"),
    KeyRule("context.seed_overflow_margin", _I, "seed-context hooks do not run here"),
    KeyRule("context.images", _I, "tool image attachments do not exist here"),
    # --- lifecycle, exports, network, trace, observability --------------------------
    KeyRule("lifecycle", _H, "how tasks are taken"),
    KeyRule("lifecycle.task_acceptance", _H, "none, single or queue"),
    KeyRule("lifecycle.after_task", _H, "exit or sleep"),
    KeyRule("lifecycle.queue_depth", _H, "tasks held waiting"),
    KeyRule("lifecycle.input_timeout_secs", _H, "bounds a task's wait in input-required; past it the task fails `input-timeout`"),
    KeyRule("lifecycle.conversation", _H, "stateless, or threaded: a task starts from its context's record"),
    KeyRule("lifecycle.delegation_deadline_secs", _H, "the bound on one delegation"),
    KeyRule("lifecycle.shell_grace_secs", _I, "shell commands are never detached into background work here; each runs to its end within the task"),
    KeyRule("lifecycle.deadline_notice_secs", _I, "no deadline notice is given to the agent here"),
    KeyRule("exports", _H, "what the door offers peers"),
    KeyRule("exports.peer_tasks", _H, "peer tasks"),
    KeyRule("exports.peer_tasks.accept", _H, "whether the door accepts peer tasks"),
    KeyRule("exports.files", _R, "the file plane is not served here, so a peer would find no files", "remove `exports.files`; return results in the task's answer"),
    KeyRule("exports.peer_files", _R, "the peer file plane is not served here, so a peer would find no files", "remove `exports.peer_files`; return results in the task's answer"),
    KeyRule("network", _H, "the door"),
    KeyRule("network.internal_port", _H, "the door binds exactly this loopback port; a busy port refuses the launch (E-RUN-010)"),
    KeyRule("network.authentication", _H, "the authenticated door"),
    KeyRule("network.authentication.scheme", _H, "bearer"),
    KeyRule("network.authentication.credentials", _H, "the door credentials and their scopes", free=True),
    KeyRule("trace", _H, "trace settings"),
    KeyRule("trace.retain", _H, "session retention"),
    KeyRule("trace.retain.max_sessions", _H, "sessions kept"),
    KeyRule("trace.retain.max_age", _H, "oldest session kept"),
    KeyRule("trace.capture", _I, "trace records here always hold the same fields (no content capture, no blobs)"),
    KeyRule("trace.include_tool_output", _I, "trace records here always hold the same fields (no raw tool output)"),
    KeyRule("observability", _H, "OpenTelemetry export (spec/trace.md \"OpenTelemetry export\")"),
    KeyRule("observability.otel_endpoint", _H, "spans of every session go to this OTLP/HTTP endpoint at its end; an export that fails never fails a task"),
    KeyRule("observability.eval", _I, "no eval scorers run here; trace.jsonl is the record"),
)
"""Every upstream key and this runtime's answer (``plan`` is this runtime's own key)."""

OWN_KEYS: tuple[KeyRule, ...] = (
    KeyRule("plan", _H, "the plan file the capsule runs (spec/plan.md); this runtime's own key"),
    KeyRule("inference.protocol", _H, "how the agent CLI is spoken to: claude-code, codex or stdio (default: codex when the command's base name is codex, else claude-code; spec/agent.md); this runtime's own key"),
)
"""Keys this runtime defines that upstream does not."""

VALUE_REFUSALS: dict[tuple[str, str], tuple[str, str]] = {
    ("artifacts[].runtime", "wasm"): (
        "a WASM component artifact does not run here",
        "remove the entry; offer a binary with `capabilities.shell.allow` instead",
    ),
    ("artifacts[].runtime", "native"): (
        "a native component artifact does not run here",
        "remove the entry; offer the binary with `capabilities.shell.allow` instead",
    ),
}
"""``(key, value)`` pairs refused with ``E-MAN-005``: the key acts here, that value does not."""

_BY_PATH: dict[str, KeyRule] = {r.path: r for r in (*KEYS, *OWN_KEYS)}


def rule_for(path: str) -> KeyRule | None:
    """The table row for a dotted key path, or None for a key upstream never had."""
    return _BY_PATH.get(path)


@attrs.frozen
class PolicyResult:
    """What :func:`apply_policy` found: refusals (``E-MAN-005``) and inert keys (``W-SEC-019``).

    Both carry field paths; the loader turns them into located diagnostics.
    """

    refusals: tuple[Fault, ...]
    inert: tuple[Fault, ...]


def refusal(rule_path: str, path: FieldPath, why: str, instead: str | None) -> Fault:
    """The ``E-MAN-005`` fault for an upstream feature this runtime does not support."""
    return Fault("E-MAN-005", f"`{rule_path}` is an upstream murmur feature this runtime does not support: {why}",
                 hint=instead, path=path, at_key=True)


def _inert(rule: KeyRule, path: FieldPath) -> Fault:
    return Fault("W-SEC-019", f"`{rule.path}` has no effect here: {rule.why}", path=path, at_key=True)


def _drop(node: YMap, key: str) -> None:
    """Remove ``key`` (already answered) so the converter does not report it again.

    Its position stays in ``key_pos``, so diagnostics still point at it.
    """
    node.pop(key, None)
    node.empty_keys = tuple(k for k in node.empty_keys if k != key)


def apply_policy(root: YMap) -> PolicyResult:
    """Walk a manifest's located tree; drop inert keys (in place) and collect the answers.

    Only keys below honoured, non-free keys are looked up; a key not in the table is left
    for the converter (an unknown key, with a did-you-mean hint).
    """
    refusals: list[Fault] = []
    inert: list[Fault] = []

    def walk(node: object, dotted: str, path: FieldPath) -> None:
        if isinstance(node, YSeq):
            for i, item in enumerate(node):
                walk(item, dotted + "[]", (*path, i))
            return
        if not isinstance(node, YMap):
            return
        for key in [*node.key_pos]:
            full = f"{dotted}.{key}" if dotted else key
            rule = rule_for(full)
            kpath = (*path, key)
            if rule is None:
                continue
            if rule.answer is Answer.INERT:
                inert.append(_inert(rule, kpath))
                _drop(node, key)
            elif rule.answer is Answer.REFUSED:
                refusals.append(refusal(full, kpath, rule.why, rule.instead))
                _drop(node, key)
            else:
                value = node.get(key)
                if isinstance(value, YStr) and (full, str(value)) in VALUE_REFUSALS:
                    why, instead = VALUE_REFUSALS[(full, str(value))]
                    refusals.append(Fault(
                        "E-MAN-005",
                        f"`{full}: {value}` is an upstream murmur feature this runtime does not support: {why}",
                        hint=instead, path=kpath))
                    _drop(node, key)
                elif not rule.free:
                    walk(value, full, kpath)

    walk(root, "", ())
    return PolicyResult(tuple(refusals), tuple(inert))
