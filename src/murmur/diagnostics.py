"""Coded diagnostics: the contract for every refusal murmur makes.

A :class:`Diagnostic` is a frozen value: code, message, optional hint and optional source
location. :func:`Diagnostic.render` gives the text the CLI prints to stderr::

    error[E-MAN-001]: `version` is required
      --> capsule/murmur.yaml:1:1
      hint: add `version: 0.1.0`

Warnings render as ``warning[W-XXX-NNN]: message``. The catalogue :data:`CATALOGUE` maps every
code this project can produce to its one-line meaning (mirrored in ``spec/diagnostics.md``;
a test keeps the two in step).
"""

from __future__ import annotations

import enum

import attrs


class Severity(enum.Enum):
    """Whether a diagnostic refuses (error) or only informs (warning)."""

    ERROR = "error"
    WARNING = "warning"


@attrs.frozen
class Location:
    """Where in a file a diagnostic points. ``line`` and ``col`` are 1-based."""

    path: str
    line: int | None = None
    col: int | None = None

    def render(self) -> str:
        """``path[:line[:col]]``."""
        out = self.path
        if self.line is not None:
            out += f":{self.line}"
            if self.col is not None:
                out += f":{self.col}"
        return out


@attrs.frozen
class Diagnostic:
    """One coded finding.

    Attributes:
        code (str): a code from :data:`CATALOGUE`, e.g. ``"E-MAN-001"``.
        message (str): one sentence naming what is wrong (never a secret value).
        hint (str | None): what to change.
        location (Location | None): where, when it comes from a file.
    """

    code: str
    message: str
    hint: str | None = None
    location: Location | None = None

    def __attrs_post_init__(self) -> None:
        if self.code not in CATALOGUE:
            raise ValueError(f"unknown diagnostic code {self.code!r}")

    @property
    def severity(self) -> Severity:
        """Warning for ``W-`` codes, error otherwise."""
        return Severity.WARNING if self.code.startswith("W-") else Severity.ERROR

    def render(self) -> str:
        """The multi-line text printed to stderr (no trailing newline)."""
        lines = [f"{self.severity.value}[{self.code}]: {self.message}"]
        if self.location is not None:
            lines.append(f"  --> {self.location.render()}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready mapping (for ``--json`` outputs)."""
        out: dict[str, object] = {
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
        }
        if self.hint:
            out["hint"] = self.hint
        if self.location is not None:
            out["path"] = self.location.path
            if self.location.line is not None:
                out["line"] = self.location.line
            if self.location.col is not None:
                out["col"] = self.location.col
        return out


def error(
    code: str,
    message: str,
    *,
    hint: str | None = None,
    path: str | None = None,
    line: int | None = None,
    col: int | None = None,
) -> Diagnostic:
    """Build a :class:`Diagnostic`, with a location when ``path`` is given.

    A refusal (``E-``) with no ``hint`` gets its code's :data:`FALLBACK_HINTS` entry, so every
    refusal says what to change.
    """
    loc = Location(path, line, col) if path is not None else None
    if hint is None and code.startswith("E-"):
        hint = FALLBACK_HINTS.get(code)
    return Diagnostic(code, message, hint, loc)


# Process exit statuses (documented in spec/diagnostics.md; 125 and 126, a capsule link's,
# are murmur.links.protocol's).
EXIT_OK = 0
EXIT_REFUSED = 1  # a coded refusal or a deciding task that did not complete
EXIT_USAGE = 2  # command-line misuse
EXIT_INTERNAL = 70  # an internal error (a bug); the message names the log file
EXIT_SIGTERM = 143  # forced exit after SIGTERM (second signal or the 20 s guard)

CATALOGUE: dict[str, str] = {
    # --- manifest -------------------------------------------------------------------
    "E-MAN-001": "a required manifest field is missing",
    "E-MAN-002": "the manifest is not valid YAML (or not a mapping)",
    "E-MAN-003": "a manifest value has the wrong type or a value the runtime rejects",
    "E-MAN-004": "the manifest file cannot be read",
    "E-MAN-005": "the manifest uses an upstream murmur feature this runtime does not support",
    # --- capabilities ---------------------------------------------------------------
    "E-CAP-001": "a network.allow (or peer_fetch.allow) entry cannot be parsed",
    "E-CAP-002": "filesystem.scope is absolute or escapes the workdir",
    "E-CAP-003": "the containment class (the manifest's floor, raised by `--containment` or the parent's class) is not one this host can back; the message names what the host lacks",
    "E-SBX-001": "the kernel refused the session's sandbox (its Landlock ruleset, seccomp filter or namespaces) although the host probe said it could back the class",
    "E-CAP-009": "a state.store name is not a single safe path segment",
    "E-CAP-011": "a --context id or context.record_store is not a single safe path segment",
    "E-CAP-013": "an artifact uses the reserved name of a runtime-provided tool",
    "E-CAP-015": "a child's env.allow entry is not held by its parent",
    # --- registry -------------------------------------------------------------------
    "E-REG-001": "no installed artifact matches the requested name and version",
    "E-REG-002": "an artifact's content does not match its recorded sha256",
    "E-REG-004": "a reserved version word (latest, stable, edge) was used as a version",
    "E-REG-005": "a resolved version or hash disagrees with murmur.lock",
    "E-REG-007": "an artifact name is not scoped (`<scope>/<name>`)",
    "E-REG-008": "murmur.lock cannot be read or parsed",
    # --- components ------------------------------------------------------------------
    "W-BLD-002": "capsule.wasm shadows another root .wasm an artifact packs",
    "E-CMP-001": "a component uses a murmur interface at a version this host does not serve",
    "E-CMP-002": "a file is not a WebAssembly component, or lacks its world's export",
    "E-CMP-004": "a component imports a murmur interface its world does not offer",
    # --- build / archives -----------------------------------------------------------
    "E-BLD-001": "the capsule name is not valid for an artifact",
    "E-BLD-002": "a file the capsule needs is missing from its source directory",
    "E-BLD-003": "an archive entry has an unsafe path (.., absolute, drive letter, NUL), or a wasm artifact packs no single component",
    "E-BLD-004": "an archive holds a duplicate entry name",
    "E-BLD-005": "an archive holds a symlink, or the destination already holds one",
    "E-BLD-006": "an archive is too large or compresses suspiciously well (a bomb)",
    "E-BLD-007": "a file is not a readable .mur.zip archive",
    "E-BLD-008": "an archive holds no murmur.yaml at its root",
    # --- new ------------------------------------------------------------------------
    "E-NEW-002": "the name given to `mur new` is not a valid capsule name",
    "E-NEW-003": "the path `mur new` would write already exists",
    # --- I/O ------------------------------------------------------------------------
    "E-IO-001": "a file or directory was not found",
    "E-IO-002": "permission denied",
    "E-IO-003": "an input/output error",
    # --- command line ---------------------------------------------------------------
    "E-CLI-001": "command-line options conflict, or one needs another that is missing",
    "E-CLI-002": "an unrecognised option or argument, or an option value that cannot be used",
    # --- mur demo -------------------------------------------------------------------
    "E-DMO-001": "the `mur demo --home` directory holds something other than an earlier demo",
    "E-DMO-002": "a process the demo needs (mur-roost, the check desk) did not come up",
    # --- mur-roost -----------------------------------------------------------------
    "E-RST-001": "a mur-roost flag is missing its value or has a value that is not valid",
    "E-RST-002": "mur-roost could not listen on its port",
    # --- roster admission -----------------------------------------------------------
    "E-ROS-001": "roster.yaml is missing, unreadable, of the wrong shape, or names a capsule badly",
    "E-ROS-002": "the roster has no entry member, or more than one",
    "E-ROS-003": "a member name is declared more than once",
    "E-ROS-004": "a reachability rule names something that is not a member",
    "E-ROS-005": "a member in a rule's `to` does not accept peer tasks",
    "E-ROS-006": "a member declares no network.authentication while the roster has edges",
    "E-ROS-007": "a member's capsule is not installed or its packed manifest is unreadable",
    "E-ROS-008": "a reachability rule lists the entry member in `to`",
    # --- run ------------------------------------------------------------------------
    "E-RUN-001": "the session failed at launch, or a component crashed or reached one of its limits (named)",
    "E-RUN-005": "no inference driver is configured",
    "E-RUN-006": "the inference driver or agent command is missing",
    "E-RUN-007": "the agent loop failed, or the trace or records could not be written",
    "E-RUN-008": "the capsule artifact is not installed",
    "E-RUN-009": "the system prompt file cannot be read",
    "E-RUN-010": "network.internal_port is already in use",
    "E-RUN-011": "MURMUR_CONTAINMENT names no containment class",
    "E-RUN-015": "--resume and --context were both given",
    "E-RUN-016": "the session --resume names ran no task with a context id",
    "E-RUN-017": "the context --resume resolved to has no conversation record",
    "E-RUN-018": "--resume-mode compact needs a hook bound to on-compaction",
    "E-RUN-019": "a session that can delegate could not register with mur-roost",
    "E-RUN-020": "MURMUR_SPAWNER or MURMUR_SPAWNER_LIFELINE is not a readable spawner handle",
    "E-RUN-022": "the session or formation named runs nothing here",
    "E-RUN-024": "the session or formation could not be ended",
    "E-RUN-027": "the inference provider rejected the credential",
    "E-RUN-036": "the agent CLI no longer holds the conversation its harness session map names",
    "E-RUN-037": "--resume-mode compact does not apply to transport: process",
    "E-RUN-039": "--forget-session (or its header) applies only to transport: process",
    "E-RUN-028": "the running records directory cannot be read",
    "E-RUN-040": "the session ran but its deciding task did not complete",
    "E-RUN-044": "MURMUR_FORMATION_ID is not frm_ followed by 32 lowercase hex digits",
    "E-RUN-045": "a formation peer did not come up; nothing was launched",
    "E-RUN-046": "a formation channel, lifeline or environment fault (or --roster inside a formation)",
    "E-RUN-047": "a member's installed artifact changed since admission",
    "E-RUN-053": "the formation --deadline was reached",
    "E-RUN-054": "a --deadline value cannot be parsed",
    # --- plans ----------------------------------------------------------------------
    "E-PLN-001": "the plan file cannot be read (none named, missing, unreadable, or outside the capsule)",
    "E-PLN-002": "the plan is not valid YAML or has the wrong shape (unknown key, wrong type or value)",
    "E-PLN-003": "a plan step id is missing, malformed, or declared twice",
    "E-PLN-004": "a plan step has no action, or more than one",
    "E-PLN-005": "a plan step depends on an unknown step or itself, or the steps form a cycle",
    "E-PLN-006": "a shell step's binary is not a bare name in capabilities.shell.allow",
    "E-PLN-007": "a capsule step names a capsule outside capabilities.spawn.allow, or no exact version",
    "E-PLN-008": "a plan template or `if` cannot be parsed, or reads a step it does not depend on",
    "E-PLN-009": "a write step's path is absolute or leaves the workdir",
    # --- warnings -------------------------------------------------------------------
    "W-SEC-001": "no kernel sandbox is enforced on this host; containment is advisory",
    "W-SEC-004": "a literal secret sits in a manifest key that should hold a ${VAR} reference",
    "W-SEC-007": "a component's network.allow narrowing names a host the capsule's ceiling does not cover (dropped)",
    "W-SEC-019": "an upstream manifest key was accepted but has no effect in this runtime",
    "W-SEC-020": "the capsule can delegate but its lifecycle cannot receive a completion",
    "W-SEC-024": "an env.allow name looks like a credential",
    "W-RUN-007": "the session carries MURMUR_FORMATION_ID but no lifeline",
    "W-RUN-008": "a member may call others but its network.allow reaches no member door",
    "W-RUN-009": "a running record cannot be read and was skipped",
    "W-ROS-001": "more members may call a member than its lifecycle holds at once",
    "W-MAN-001": "mur_version names a murmur version other than the one running",
    # --- conversations (spec/conversations.md) ---------------------------------------
    "E-CNV-001": "the session --resume names is not found, or the name fits several",
    "E-CNV-002": "--forget-session needs --context and does not combine with --resume",
    "E-CNV-003": "--roster and --resume were both given: a formation is launched again, never resumed",
    # --- the process tree (spec/tree.md) -----------------------------------------------
    "E-TRE-001": "MURMUR_LINEAGE is unreadable, or disagrees with MURMUR_SPAWNER",
    "E-TRE-002": "a --spawn or MURMUR_SPAWN value cannot be read",
    "E-TRE-003": "the id given to `mur stop` names no node of the tree, or more than one",
    "E-TRE-004": "MURMUR_TREE_CAPS (the tree caps a delegating runtime hands down) cannot be read",
    "W-TRE-001": "a spawn-set narrowing names a capsule outside the manifest (or the parent's set)",
    # --- reading traces (spec/trace.md) ------------------------------------------------
    "E-TRC-001": "the address given to `mur trace` or `mur watch` names no session or formation recorded here",
    "E-TRC-002": "the address given to `mur trace` or `mur watch` names more than one session or formation",
    "E-TRC-003": "a trace file cannot be read, or is not there",
    "E-TRC-004": "a file given as a trace holds no trace records",
    "E-TRC-005": "no session has been recorded here (or too few for `mur trace diff`)",
    "E-TRC-006": "a formation was given where a session's own trace is needed",
    "E-TRC-007": "the directory given to `mur trace report` is missing or holds no trace",
    "E-TRC-008": "`observability.otel_endpoint` is not an http(s) URL",
    "E-TRC-009": "the page `mur trace view --html` writes cannot be written",
    "E-TRC-010": "`mur trace diff` was given the same session twice (or one session against the newest, itself)",
    "E-TRC-011": "`mur watch` with no address found no running session to follow",
    # --- the inference gateway (spec/gateway.md) ---------------------------------------
    "E-GWY-001": "a call or a registration reached the inference gateway from a process that is not in its tree",
    "E-GWY-002": "the calling session's network.allow does not cover the endpoint it asked the gateway for",
    "E-GWY-003": "a gateway request's path names no upstream endpoint",
    "E-GWY-004": "a token budget on the calling session's path to the root is spent",
    "E-GWY-005": "a session's registration with the gateway cannot be read",
    "E-GWY-006": "the gateway could not reach the upstream endpoint",
    "E-GWY-007": "a request to the gateway is not well-formed HTTP/1.1, or its head or body is too large",
    "E-GWY-008": "the gateway failed while handling a request",
}

RESERVED: dict[str, str] = {
    "E-CAP-015": "a child's env.allow beyond its parent's is refused at spawn by mur-roost's referee "
    "(the env.allow axis of the 403); the contract's `mur doctor` check that would print this code is not built",
    "E-RUN-008": "`mur run --capsule` of a capsule that is not installed is the registry's E-REG-001",
    "W-SEC-001": "no kernel sandbox is built, so every run is advisory by design; `mur doctor`'s "
    "teardown line and `--containment`'s help say so instead of a warning on every run",
    "W-SEC-024": "env.allow only governs what a parent may pass to a delegated child here (there are no "
    "WASM components reading variables by name); the credential-shaped-name check is not built",
}
"""Catalogued codes nothing emits yet, each with why (spec/diagnostics.md marks them reserved).

Every other code is emitted somewhere in ``src/`` and asserted by a test (``tests/test_diagnostics.py``
scans both)."""

FALLBACK_HINTS: dict[str, str] = {
    "E-MAN-001": "add the field to murmur.yaml (spec/manifest.md lists every field); `mur new NAME` writes a complete example",
    "E-MAN-002": "fix the YAML at that line; murmur.yaml is one mapping (`mur new NAME` writes a valid one)",
    "E-MAN-003": "give the field a value of the type spec/manifest.md names; `mur doctor` checks the manifest again",
    "E-MAN-004": "check the path and that the file is a readable regular file named murmur.yaml",
    "E-MAN-005": "remove the key, or run the capsule on upstream murmur; spec/manifest.md lists what this runtime supports",
    "E-CAP-001": "write the entry as host, host:port or http(s)://host[:port], with no path or query",
    "E-CAP-002": "make filesystem.scope a relative path inside the workdir (no leading / and no ..)",
    "E-CAP-003": "lower capabilities.containment, or run on a host that gives what is missing (`mur doctor` says which)",
    "E-CAP-009": "name the store with one plain path segment: letters, digits, '-' or '_', no '/' and no leading dot",
    "E-CAP-013": "rename the artifact: that name belongs to a tool the runtime provides",
    "E-REG-001": "install it (`mur install -g DIR`), or list what is installed with `mur list`",
    "E-REG-002": "the stored file was changed: install the capsule again (`mur install -g DIR`)",
    "E-REG-004": "give an exact version such as 0.1.0",
    "E-REG-005": "update murmur.lock (install the version the lock names, or remove the stale entry)",
    "E-REG-007": "name the artifact as <scope>/<name>, e.g. local/hello",
    "E-REG-008": "fix murmur.lock's JSON, or remove it and install again",
    "E-BLD-001": "use a capsule name of lowercase letters, digits and '-', starting with a letter",
    "E-BLD-002": "add the file to the capsule directory, or drop it from the manifest",
    "E-BLD-003": "rebuild the archive with `mur build`; it never writes such paths",
    "E-BLD-004": "rebuild the archive with `mur build`; each entry appears once",
    "E-BLD-005": "replace the symlink with the file it points to, or remove what is at the destination",
    "E-BLD-006": "rebuild the archive with `mur build` from its source; an archive over the limits is refused",
    "E-BLD-007": "name a .mur.zip that `mur build` wrote (or a capsule directory)",
    "E-BLD-008": "rebuild with `mur build` from a directory holding murmur.yaml",
    "E-NEW-002": "use lowercase letters, digits and '-', starting with a letter (e.g. `mur new my-capsule`)",
    "E-NEW-003": "choose another name, or remove what is there first",
    "E-IO-001": "check the path; create what is missing first",
    "E-IO-002": "make the path writable (or readable) for this user, or choose another",
    "E-IO-003": "check the disk (space, read-only mounts) and the path, then run again",
    "E-CLI-001": "run the command with --help to see which options go together",
    "E-CLI-002": "run the command with --help to see its options and their values",
    "E-DMO-001": "name a new or empty directory with --home (or one an earlier `mur demo --home` used)",
    "E-DMO-002": "run `mur doctor`, then the demo again with --keep to keep its logs for a look",
    "E-RST-001": "run `mur-roost --help` for the flags and their values",
    "E-RST-002": "choose another --port (0 lets the system pick a free one)",
    "E-ROS-001": "fix roster.yaml as the message says; `mur doctor --roster DIR` checks it again",
    "E-ROS-002": "mark exactly one member `entry: true`",
    "E-ROS-003": "give each member a name of its own",
    "E-ROS-004": "name only members declared under `members` in the rule",
    "E-ROS-005": "give that member a capsule that accepts peer tasks, or drop it from the rule's `to`",
    "E-ROS-006": "declare network.authentication on every member's capsule, or remove the edges",
    "E-ROS-007": "install the member's capsule (`mur install -g DIR`) at the version the roster names",
    "E-ROS-008": "take the entry member out of the rule's `to`: nothing calls the entry",
    "E-RUN-001": "see the message; `mur doctor` checks the capsule and this host before a run",
    "E-RUN-005": "configure the capsule's inference driver (spec/agent.md)",
    "E-RUN-006": "install the driver or agent command the manifest names, or fix its path",
    "E-RUN-007": "see the session's logs; for a trace or records fault, check the disk holding MURMUR_HOME",
    "E-RUN-009": "check inference.system_prompt's path (relative to the capsule directory)",
    "E-RUN-010": "choose another network.internal_port, or stop what listens on it",
    "E-RUN-011": "set MURMUR_CONTAINMENT to auto or groups, or unset it",
    "E-RUN-019": "start mur-roost and point MURMUR_ROOST_URL at it (spec/roost.md)",
    "E-RUN-020": "start the session the way its parent does; these variables are the runtime's own",
    "E-RUN-022": "list what runs with `mur ps` (or `mur ps --tree`)",
    "E-RUN-024": "list what runs with `mur ps`; a process of another user cannot be stopped",
    "E-RUN-027": "check the key the manifest's inference.api_key reference names",
    "E-RUN-028": "check that MURMUR_HOME/running is a readable directory",
    "E-RUN-040": "see the session's result.txt and trace.jsonl for how the task ended",
    "E-RUN-044": "unset MURMUR_FORMATION_ID; it is the launcher's to set",
    "E-RUN-045": "run `mur doctor --roster DIR`, then look at the member's records for why it did not come up",
    "E-RUN-046": "launch the roster from a shell that is not a formation member",
    "E-RUN-047": "launch the formation again: admission re-reads every member's artifact",
    "E-RUN-053": "give a later --deadline, or none",
    "E-RUN-054": "give an RFC 3339 time with a zone (2026-12-01T17:30:00Z) or a duration (15m, 2h)",
    "E-PLN-001": "name the plan in the manifest's `plan:` and keep the file inside the capsule directory",
    "E-PLN-002": "fix the plan as the message says (spec/plan.md lists the keys)",
    "E-PLN-003": "give each step a unique id of letters, digits, '-' or '_'",
    "E-PLN-004": "give each step exactly one action (shell, template, write, member, capsule)",
    "E-PLN-005": "make each `after` name an earlier step, and break the cycle",
    "E-PLN-006": "add the binary's bare name to capabilities.shell.allow",
    "E-PLN-007": "add the capsule to capabilities.spawn.allow and give its exact version",
    "E-PLN-008": "fix the template; a step may read only steps it runs after",
    "E-PLN-009": "give a relative path inside the workdir",
    "E-TRE-001": "start the session the way its parent does; MURMUR_LINEAGE is the runtime's own",
    "E-TRE-002": "give capsule names separated by commas (`--spawn a,b`), or `--no-spawn`",
    "E-TRE-003": "give the id as `mur ps --tree` prints it (a unique prefix of 4 or more characters works)",
    "E-SBX-001": "run `mur doctor` to see what this host backs now, and lower the class (or --containment) to that",
    "E-CAP-011": "use one plain path segment: letters, digits, '-', '_' or '.', no '/' and no leading dot",
    "E-RUN-015": "give --resume (it carries its context) or --context, not both",
    "E-RUN-016": "resume a session that ran a threaded task (`mur ps` and the records name them), or start with --context ID",
    "E-RUN-017": "start the conversation again with --context ID, or resume a session whose record was kept",
    "E-RUN-018": "use --resume-mode full, or bind a hook artifact to on-compaction",
    "E-RUN-036": "run with --forget-session to start the agent CLI's conversation afresh",
    "E-RUN-037": "use --resume-mode full for an agent CLI capsule",
    "E-RUN-039": "leave out --forget-session: only an agent CLI (transport: process) keeps a session of its own",
    "E-CNV-001": "give more of the id (a unique suffix of 4 or more characters), @N, or the records path",
    "E-CNV-002": "give --context ID with --forget-session, and leave out --resume",
    "E-CMP-001": "rebuild the component against the interface versions `mur doctor` lists as served here",
    "E-CMP-002": "build the file as a component of its world (e.g. with `wasm-tools component new`), exporting what spec/components.md names",
    "E-CMP-004": "rebuild the component against its own world's interfaces (spec/components.md lists what each world offers)",
    "E-TRC-001": "list what is recorded with `mur ps --tree --all`, or give a trace.jsonl path",
    "E-TRC-002": "give more of the id (one of the candidates listed), or the session's trace.jsonl path",
    "E-TRC-003": "check the path: a session's trace is its records directory's trace.jsonl",
    "E-TRC-004": "give a session's trace.jsonl (one JSON record per line, written by `mur run`)",
    "E-TRC-005": "run a session first (`mur run ...`); `mur trace diff` needs two",
    "E-TRC-006": "give one of the formation's sessions (`mur ps --tree` lists them), or use --tree",
    "E-TRC-007": "name a directory holding trace.jsonl files (a records directory or its parent)",
    "E-TRC-008": "write it as http://host:port or https://host:port (the collector's OTLP/HTTP address)",
    "E-TRC-009": "give --html a path in a writable directory",
    "E-TRC-010": "give two different sessions: `mur trace diff @2 @1`",
    "E-TRC-011": "`mur watch @1` replays the newest session; `mur ps --tree` lists them",
    "E-TRE-004": "start the session the way its parent does; MURMUR_TREE_CAPS is the runtime's own",
    "E-GWY-001": "make model calls from a session of this tree (a process `mur run` started, or one under it); the gateway decides by process, never by a token",
    "E-GWY-002": "add the endpoint to the session's capabilities.network.allow (its parent must hold it too)",
    "E-GWY-003": "use the base URL the session was handed (MURMUR_GATEWAY_ENDPOINT + /up/<scheme>/<host:port>)",
    "E-GWY-004": "raise the budget (`mur run --budget-tokens N`, or the manifest's) of the session the message names, or start a new run",
    "E-GWY-005": 'send {"session": ID, "network_allow": [...], "budget_tokens": N or null} as JSON',
    "E-GWY-006": "check that the endpoint is up and that inference.endpoint names it correctly",
    "E-GWY-007": "send one HTTP/1.1 request with a head under 64 KiB and a body under 64 MiB",
    "E-GWY-008": "retry the call; if it fails again, report it with the gateway's log",
    "E-CNV-003": "launch the formation again with `mur run --roster DIR`; a member's own session may be resumed on its own",
}
"""What to change, for a refusal whose call gives no hint of its own (spec/diagnostics.md: a hint on every
refusal). :func:`error` uses it; a hint given at the call is always the more specific one.
``tests/test_diagnostics.py`` requires an entry for every catalogued ``E-`` code but the
reserved ones."""
