"""The value rules of ``murmur.yaml`` (pure: located tree in, faults out).

Type errors and unknown keys are the converter's business (:mod:`murmur.manifest.load`);
this module checks what a well-typed value may be. Each check looks only at values of the
right type, so one mistake is reported once. Specification: ``spec/manifest.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from murmur.manifest.endpoint import endpoint_problem
from murmur.manifest.faults import Fault, FieldPath
from murmur.manifest.netallow import allow_entry_problem
from murmur.manifest.refs import REF_FIELDS, has_reference
from murmur.manifest.yamltext import YMap, YSeq, YStr, as_bool, as_int

NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?")
"""A capsule name: lowercase letters, digits and ``-``, no ``-`` at either end, at most 100."""

VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
"""A version: a letter or digit, then letters, digits, ``.``, ``_``, ``+``, ``-`` (≤ 64)."""

RESERVED_VERSIONS = frozenset({"latest", "stable", "edge"})
"""Version words that never name an artifact."""

RESERVED_TOOL_NAMES = frozenset({
    "share-file", "fetch-peer-file", "delegate-task", "submit-plan", "switch-driver",
    "call-member", "end-without-answer", "session-status",
})
"""Names of runtime-provided tools; an artifact may not take one (E-CAP-013)."""

ARTIFACT_RUNTIMES = ("tool", "driver", "hook", "skill")
"""Values of ``artifacts[].runtime`` (``wasm`` and ``native`` are refused)."""

DOOR_SCOPES = frozenset({
    "SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "ListTasks",
    "SubscribeToTask", "GetExtendedAgentCard", "murmur.WatchSession", "murmur.StopSession",
    "resources/files",
})
"""Door methods a declared credential may be scoped to."""

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DURATION_RE = re.compile(r"([0-9]+)([smhd]?)")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int | None:
    """Seconds for ``N``, ``Ns``, ``Nm``, ``Nh``, ``Nd`` (N a whole number), else None."""
    m = _DURATION_RE.fullmatch(text.strip())
    if m is None:
        return None
    return int(m.group(1)) * _DURATION_UNITS[m.group(2)]


def is_capsule_name(text: str) -> bool:
    """True when ``text`` is a valid capsule name (see :data:`NAME_RE`)."""
    return NAME_RE.fullmatch(text) is not None


def is_scoped_name(text: str) -> bool:
    """True for ``<scope>/<name>`` where both parts are capsule names."""
    scope, sep, name = text.partition("/")
    return bool(sep) and is_capsule_name(scope) and is_capsule_name(name)


def _get(root: YMap, *keys: str) -> object:
    node: object = root
    for key in keys:
        if not isinstance(node, YMap):
            return None
        node = node.get(key)
    return node


def _later(mapping: YMap, a: str, b: str) -> str:
    """Whichever of two keys was written later (the second one is the mistake)."""
    pa, pb = mapping.key_pos.get(a, (None, None)), mapping.key_pos.get(b, (None, None))
    return b if (pb[0] or 0, pb[1] or 0) >= (pa[0] or 0, pa[1] or 0) else a


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, YStr) else None


def _items(root: YMap, *keys: str) -> Iterator[tuple[int, str]]:
    seq = _get(root, *keys)
    if isinstance(seq, YSeq):
        for i, item in enumerate(seq):
            if isinstance(item, YStr):
                yield i, str(item)


def relative_path_problem(text: str) -> str | None:
    """Why ``text`` is not a relative path that stays inside its root, or None."""
    if not text or "\x00" in text:
        return "is empty or holds a NUL character"
    if text.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", text):
        return "is absolute"
    depth = 0
    for part in re.split(r"[/\\]", text):
        if part == "..":
            depth -= 1
            if depth < 0:
                return "escapes its directory with `..`"
        elif part not in ("", "."):
            depth += 1
    return None


def check_rules(root: YMap) -> list[Fault]:
    """Every value-rule fault in a manifest's located tree (order not significant)."""
    faults: list[Fault] = []
    for check in (_identity, _artifacts, _gateways, _capabilities, _inference, _workload,
                  _lifecycle, _authentication, _network, _trace, _observability):
        faults += check(root)
    return faults


def _identity(root: YMap) -> list[Fault]:
    out = requires_files_faults(root)
    runtime = _text(root.get("runtime"))
    if runtime is not None and runtime != "capsule":
        artifact = runtime in ("tool", "driver", "hook", "skill")
        out.append(Fault(
            "E-MAN-003",
            f"`runtime: {runtime}` " + ("marks an artifact manifest, which is built and installed, not run"
                                        if artifact else "is not a capsule's runtime"),
            hint=("`mur install` the artifact directory and name it in a capsule's `artifacts:`"
                  if artifact else "a capsule manifest says `runtime: capsule` or leaves it out"),
            path=("runtime",)))
    execution = _text(root.get("execution"))
    if execution is not None and execution.lower() not in ("wasm", "native", "static"):
        out.append(Fault("E-MAN-003", f"`execution: {execution}` must be one of: wasm, native, static",
                         hint="use one of: wasm, native, static", path=("execution",)))
    name = _text(root.get("name"))
    if name is not None and not is_capsule_name(name):
        out.append(Fault(
            "E-BLD-001", f"`{name}` is not a valid capsule name",
            hint="use lowercase letters, digits and `-` (not at either end), at most 100 characters",
            path=("name",)))
    version = _text(root.get("version"))
    if version is not None:
        if version.strip().lower() in RESERVED_VERSIONS:
            out.append(Fault(
                "E-REG-004", f"`{version}` is a reserved word, not a version",
                hint="give an exact version such as `0.1.0`", path=("version",)))
        elif not VERSION_RE.fullmatch(version):
            out.append(Fault(
                "E-MAN-003", f"`{version}` is not a valid version",
                hint="use letters, digits, `.`, `_`, `+` and `-`, starting with a letter or digit",
                path=("version",)))
    return out


def _artifacts(root: YMap) -> list[Fault]:
    out: list[Fault] = []
    seq = root.get("artifacts")
    if not isinstance(seq, YSeq):
        return out
    for i, item in enumerate(seq):
        if not isinstance(item, YMap):
            continue
        name = _text(item.get("name"))
        if name is not None and name in RESERVED_TOOL_NAMES:
            out.append(Fault(
                "E-CAP-013", f"artifact name `{name}` is reserved for a runtime-provided tool",
                hint="rename the artifact", path=("artifacts", i, "name")))
        elif name is not None and not name.strip():
            out.append(Fault("E-MAN-003", "an artifact name is blank",
                             path=("artifacts", i, "name")))
        runtime = _text(item.get("runtime")) or "tool"
        if runtime not in ARTIFACT_RUNTIMES and runtime not in ("wasm", "native"):  # those: policy
            out.append(Fault(
                "E-MAN-003", f"artifact runtime `{runtime}` is not supported",
                hint=f"use one of: {', '.join(ARTIFACT_RUNTIMES)}",
                path=("artifacts", i, "runtime")))
        has_source = isinstance(item.get("source"), YStr)
        if "version" not in item and not has_source and name is not None:
            out.append(Fault(
                "E-MAN-001", f"artifact `{name}` needs a `version` (only a `source` entry may omit it)",
                hint="add `version:`", path=("artifacts", i), at_key=True))
        if has_source:
            local = as_bool(item.get("local_source"))
            if local is None:
                local = runtime == "skill"
            if not local:
                out.append(Fault(
                    "E-MAN-003", "`source` needs `local_source: true`",
                    hint="add `local_source: true` or remove `source`",
                    path=("artifacts", i, "source")))
    return out


def _gateways(root: YMap) -> list[Fault]:
    """``artifacts[].gateway``: only on the inference driver's entry; a valid endpoint;
    ``keyless`` and ``api_key`` exclude each other."""
    out: list[Fault] = []
    seq = root.get("artifacts")
    if not isinstance(seq, YSeq):
        return out
    driver = _text(_get(root, "inference", "driver", "artifact"))
    for i, item in enumerate(seq):
        gw = item.get("gateway") if isinstance(item, YMap) else None
        if not isinstance(gw, YMap):
            continue
        where: FieldPath = ("artifacts", i, "gateway")
        if _text(item.get("runtime")) != "driver" or _text(item.get("name")) != driver:
            out.append(Fault(
                "E-MAN-003", "a `gateway` belongs on the artifact entry of the inference driver",
                hint="put it on the `runtime: driver` entry that `inference.driver.artifact` names",
                path=where, at_key=True))
        endpoint = _text(gw.get("endpoint"))
        if endpoint is not None and not has_reference(endpoint):
            problem = endpoint_problem(endpoint)
            if problem is not None:
                out.append(Fault("E-MAN-003", f"gateway.endpoint {problem}",
                                 hint="e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`",
                                 path=(*where, "endpoint")))
        if as_bool(gw.get("keyless")) and "api_key" in gw:
            out.append(Fault("E-MAN-003", "a gateway is either `keyless` or has an `api_key`, not both",
                             hint="remove one of them", path=(*where, "keyless"), at_key=True))
        for key in ("endpoint", "api_key"):
            if key in gw and _text(_get(root, "inference", key)) is not None:
                out.append(Fault(
                    "E-MAN-003", f"`inference.{key}` and the driver's `gateway.{key}` both give the {key}",
                    hint=f"keep one of them (newer upstream uses `gateway.{key}`)",
                    path=(*where, key), at_key=True))
    return out


def _network(root: YMap) -> list[Fault]:
    port = as_int(_get(root, "network", "internal_port"))
    if port is not None and not 1 <= port <= 65535:
        return [Fault("E-MAN-003", f"`network.internal_port` {port} is not a port (1-65535)",
                      hint="give a free port such as 14159, or omit the key to let the OS pick",
                      path=("network", "internal_port"))]
    return []


def requires_files_faults(root: YMap) -> list[Fault]:
    """``requires_files`` entries must be relative paths that stay in the capsule directory."""
    out = []
    for i, entry in _items(root, "requires_files"):
        problem = relative_path_problem(entry)
        if problem is not None:
            out.append(Fault("E-MAN-003", f"requires_files entry `{entry}` {problem}",
                             hint="name a file relative to the directory holding murmur.yaml",
                             path=("requires_files", i)))
    return out


def _allow_entries(root: YMap, block: str) -> list[Fault]:
    out = []
    for i, entry in _items(root, "capabilities", block, "allow"):
        problem = allow_entry_problem(entry)
        if problem is not None:
            out.append(Fault(
                "E-CAP-001", f"{block}.allow entry `{entry}` {problem}",
                hint="write `https://host[:port]`, a bare `host`, or `host:port`",
                path=("capabilities", block, "allow", i)))
    return out


def _link_shadows(root: YMap) -> list[Fault]:
    """A spawn.allow name whose capsule link would shadow a shell.allow binary (spec/links.md)."""
    binaries = {b for _i, b in _items(root, "capabilities", "shell", "allow")}
    out = []
    for i, target in _items(root, "capabilities", "spawn", "allow"):
        command = target.rsplit("/", 1)[-1]
        if command in binaries:
            out.append(Fault(
                "E-MAN-003",
                f"`{command}` is in both capabilities.spawn.allow and capabilities.shell.allow: "
                f"its capsule link would shadow the binary",
                hint=f"remove `{command}` from one of the two lists (a capsule link is a command "
                     f"named like the capsule, first on PATH; spec/links.md)",
                path=("capabilities", "spawn", "allow", i)))
    return out


def _capabilities(root: YMap) -> list[Fault]:
    out = _allow_entries(root, "network") + _allow_entries(root, "peer_fetch")
    caps = _get(root, "capabilities")
    if not isinstance(caps, YMap):
        return out
    for block, known in (("peer_fetch", {"allow"}), ("shell", {"allow", "baseline_env", "strip_env"})):
        body = caps.get(block)
        if isinstance(body, YMap) and set(body) <= known:  # an unknown key is likely the typo
            allow = body.get("allow")
            if allow is None or (isinstance(allow, YSeq) and not allow):
                where: FieldPath = ("capabilities", block, "allow") if allow is not None else (
                    "capabilities", block)
                out.append(Fault(
                    "E-MAN-003", f"`capabilities.{block}` is present but allows nothing",
                    hint=f"list at least one entry under `{block}.allow`, or remove the block",
                    path=where, at_key=allow is None))
    for i, binary in _items(root, "capabilities", "shell", "allow"):
        if not binary.strip() or any(c in binary for c in "/\\\x00") or binary != binary.strip() \
                or any(c.isspace() for c in binary) or binary in (".", ".."):
            out.append(Fault(
                "E-MAN-003", f"shell.allow entry `{binary}` is not a bare binary name",
                hint="name the binary as found on PATH, e.g. `git`, not a path",
                path=("capabilities", "shell", "allow", i)))
    for key in ("baseline_env", "strip_env"):
        for i, glob in _items(root, "capabilities", "shell", key):
            if not glob.strip() or "=" in glob or "\x00" in glob:
                out.append(Fault(
                    "E-MAN-003", f"shell.{key} entry `{glob}` is not a variable-name pattern",
                    hint="write a name or glob such as `PATH` or `LC_*`",
                    path=("capabilities", "shell", key, i)))
    for i, target in _items(root, "capabilities", "spawn", "allow"):
        if not (is_capsule_name(target) or is_scoped_name(target)):
            out.append(Fault(
                "E-MAN-003", f"spawn.allow entry `{target}` is not a capsule name",
                hint="name a capsule such as `worker` or `local/worker`",
                path=("capabilities", "spawn", "allow", i)))
    out += _link_shadows(root)
    for i, var in _items(root, "capabilities", "env", "allow"):
        if not _ENV_NAME_RE.fullmatch(var):
            out.append(Fault(
                "E-MAN-003", f"env.allow entry `{var}` is not an environment variable name",
                hint="use letters, digits and `_`, not starting with a digit",
                path=("capabilities", "env", "allow", i)))
    scope = _text(_get(root, "capabilities", "filesystem", "scope"))
    if scope is not None:
        problem = relative_path_problem(scope)
        if problem is not None:
            out.append(Fault(
                "E-CAP-002", f"filesystem.scope `{scope}` {problem}",
                hint="give a path relative to the workdir; `.` is the whole workdir",
                path=("capabilities", "filesystem", "scope")))
    for i, entry in _items(root, "capabilities", "filesystem", "read_only"):
        problem = relative_path_problem(entry)
        if problem is not None:
            out.append(Fault(
                "E-CAP-002", f"filesystem.read_only entry `{entry}` {problem}",
                hint="give a path relative to the workdir scope",
                path=("capabilities", "filesystem", "read_only", i)))
    resources = _get(root, "capabilities", "resources")
    if isinstance(resources, YMap):
        for key in resources:
            value = as_int(resources.get(key))
            if value is not None and value <= 0:
                out.append(Fault(
                    "E-MAN-003", f"capabilities.resources.{key} must be greater than zero",
                    hint="give a positive figure, or remove the key (no ceiling)",
                    path=("capabilities", "resources", key)))
    store = _text(_get(root, "capabilities", "state", "store"))
    if store is not None and (
        not store or any(c in store for c in "/\\\x00") or store in (".", "..")
        or store.startswith(".") or store != store.strip()
    ):
        out.append(Fault(
            "E-CAP-009", f"state.store `{store}` is not a single safe path segment",
            hint="use one name without `/`, not starting with `.`",
            path=("capabilities", "state", "store")))
    return out


_HTTP_ONLY = ("driver", "max_tokens")
_PROCESS_ONLY = ("command", "protocol")
PROTOCOLS = ("claude-code", "codex", "stdio")


def _inference(root: YMap) -> list[Fault]:
    inf = root.get("inference")
    if not isinstance(inf, YMap):
        return []
    out: list[Fault] = []
    if "system_prompt" in inf and "system_prompt_file" in inf:
        later = _later(inf, "system_prompt", "system_prompt_file")
        out.append(Fault(
            "E-MAN-003", "give at most one of `system_prompt` and `system_prompt_file`",
            hint="remove one of them", path=("inference", later), at_key=True))
    prompt_file = _text(inf.get("system_prompt_file"))
    if prompt_file is not None and relative_path_problem(prompt_file):
        out.append(Fault(
            "E-MAN-003", f"system_prompt_file `{prompt_file}` {relative_path_problem(prompt_file)}",
            hint="give a path relative to the capsule directory",
            path=("inference", "system_prompt_file")))
    transport = _text(inf.get("transport")) or "http"
    wrong = _PROCESS_ONLY if transport == "http" else _HTTP_ONLY if transport == "process" else ()
    for key in wrong:
        if key in inf:
            out.append(Fault(
                "E-MAN-003", f"`inference.{key}` does not apply to transport `{transport}`",
                hint=f"remove `{key}` or change `transport`", path=("inference", key),
                at_key=True))
    if transport == "process" and "command" not in inf:
        out.append(Fault(
            "E-MAN-001", "`inference.command` is required for transport `process`",
            hint="add `command:` naming the agent CLI", path=("inference",), at_key=True))
    command = _text(inf.get("command"))
    if command is not None and not command.strip():
        out.append(Fault("E-MAN-003", "`inference.command` is blank",
                         path=("inference", "command")))
    protocol = _text(inf.get("protocol"))
    if protocol is not None and protocol not in PROTOCOLS:
        out.append(Fault("E-MAN-003", f"`inference.protocol` `{protocol}` is not one of {', '.join(PROTOCOLS)}",
                         hint="omit it to choose from the command (codex → codex, else claude-code)",
                         path=("inference", "protocol")))
    endpoint = _text(inf.get("endpoint"))
    if endpoint is not None and not (
        "inference.endpoint" in REF_FIELDS and has_reference(endpoint)
    ):
        problem = endpoint_problem(endpoint)
        if problem is not None:
            out.append(Fault(
                "E-MAN-003", f"inference.endpoint {problem}",
                hint="e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`",
                path=("inference", "endpoint")))
    for key in ("max_turns", "max_tokens", "budget_tokens"):
        n = as_int(inf.get(key))
        if n is not None and n <= 0:
            out.append(Fault("E-MAN-003", f"`inference.{key}` must be at least 1",
                             path=("inference", key)))
    comp = inf.get("compaction")
    if isinstance(comp, YMap):
        out += _compaction(comp)
    return out


def _compaction(comp: YMap) -> list[Fault]:
    out = []
    raw = comp.get("threshold")
    try:
        value = float(_text(raw) or "") if raw is not None else None
    except ValueError:
        value = -1.0
    if value is not None and not 0 < value <= 1:
        out.append(Fault("E-MAN-003", "`inference.compaction.threshold` must be a number in (0, 1]",
                         path=("inference", "compaction", "threshold")))
    if "system_prompt" in comp and "system_prompt_file" in comp:
        out.append(Fault("E-MAN-003", "`inference.compaction.system_prompt` and `system_prompt_file` are exclusive",
                         hint="keep one of them", path=("inference", "compaction", "system_prompt_file"), at_key=True))
    return out


def _workload(root: YMap) -> list[Fault]:
    out = []
    plan = _text(root.get("plan"))
    if plan is not None and relative_path_problem(plan):
        out.append(Fault(
            "E-MAN-003", f"plan `{plan}` {relative_path_problem(plan)}",
            hint="give the plan file's path relative to the capsule directory, e.g. `plan.yaml`",
            path=("plan",)))
    if "plan" in root and "inference" in root:
        later = _later(root, "plan", "inference")
        out.append(Fault(
            "E-MAN-003", "a capsule runs either a `plan` or an `inference` agent, not both",
            hint="remove one of them", path=(later,), at_key=True))
    return out


def _lifecycle(root: YMap) -> list[Fault]:
    out = []
    depth = as_int(_get(root, "lifecycle", "queue_depth"))
    if depth is not None and depth < 0:
        out.append(Fault("E-MAN-003", "`lifecycle.queue_depth` cannot be negative",
                         path=("lifecycle", "queue_depth")))
    wait = as_int(_get(root, "lifecycle", "input_timeout_secs"))
    if wait is not None and wait <= 0:
        out.append(Fault("E-MAN-003", "`lifecycle.input_timeout_secs` must be at least 1",
                         hint="give whole seconds, or omit the key to wait without a bound",
                         path=("lifecycle", "input_timeout_secs")))
    deadline = as_int(_get(root, "lifecycle", "delegation_deadline_secs"))
    if deadline is not None and deadline <= 0:
        out.append(Fault("E-MAN-003", "`lifecycle.delegation_deadline_secs` must be at least 1",
                         hint="give whole seconds, e.g. `600`",
                         path=("lifecycle", "delegation_deadline_secs")))
    return out


def _authentication(root: YMap) -> list[Fault]:
    auth = _get(root, "network", "authentication")
    if not isinstance(auth, YMap):
        return []
    out: list[Fault] = []
    scheme = _text(auth.get("scheme"))
    if scheme is not None and scheme != "bearer":
        out.append(Fault("E-MAN-003", f"authentication scheme `{scheme}` is not supported",
                         hint="use `scheme: bearer`",
                         path=("network", "authentication", "scheme")))
    creds = auth.get("credentials")
    if isinstance(creds, YMap):
        for name in [*creds.keys(), *creds.empty_keys]:
            cpath: FieldPath = ("network", "authentication", "credentials", name)
            if not name.strip() or ":" in name or name == "operator":
                out.append(Fault(
                    "E-MAN-003", f"credential name `{name}` is not allowed",
                    hint="use a name without `:`; `operator` is the runtime's own",
                    path=cpath, at_key=True))
            for i, scope in _items(root, "network", "authentication", "credentials", name,
                                   "scopes"):
                if scope not in DOOR_SCOPES:
                    out.append(Fault(
                        "E-MAN-003", f"credential scope `{scope}` is not a door method",
                        hint=f"use some of: {', '.join(sorted(DOOR_SCOPES))}",
                        path=(*cpath, "scopes", i)))
    spawn = _get(root, "capabilities", "spawn", "allow")
    if isinstance(spawn, YSeq) and spawn:
        out.append(Fault(
            "E-MAN-003",
            "`network.authentication` cannot be declared beside a non-empty "
            "`capabilities.spawn.allow`",
            hint="a capsule with an authenticated door cannot delegate; remove one of them",
            path=("network", "authentication"), at_key=True))
    return out


def _trace(root: YMap) -> list[Fault]:
    trace = root.get("trace")
    if not isinstance(trace, YMap):
        return []
    out = []
    retain = trace.get("retain")
    if "retain" in trace.empty_keys or (isinstance(retain, YMap) and not retain):
        out.append(Fault(
            "E-MAN-003", "`trace.retain` is empty",
            hint="give `max_sessions`, `max_age`, or both; omit the block to keep everything",
            path=("trace", "retain"), at_key=True))
    if isinstance(retain, YMap):
        n = as_int(retain.get("max_sessions"))
        if n is not None and n < 1:
            out.append(Fault("E-MAN-003", "`trace.retain.max_sessions` must be at least 1",
                             path=("trace", "retain", "max_sessions")))
        age = _text(retain.get("max_age"))
        if age is not None and parse_duration(age) == 0:
            out.append(Fault("E-MAN-003", "`trace.retain.max_age` must be longer than 0",
                             path=("trace", "retain", "max_age")))
    return out


def _observability(root: YMap) -> list[Fault]:
    """``observability.otel_endpoint``: an ``http``/``https`` URL with a host (spec/trace.md)."""
    block = root.get("observability")
    url = _text(block.get("otel_endpoint")) if isinstance(block, YMap) else None
    if url is None:
        return []
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is not a number
        ok = False
    if ok:
        return []
    return [Fault("E-TRC-008", f"`observability.otel_endpoint` `{url}` is not an http(s) URL",
                  hint="give the collector's OTLP/HTTP base URL, e.g. `http://localhost:4318` (spans go to /v1/traces)",
                  path=("observability", "otel_endpoint"))]
