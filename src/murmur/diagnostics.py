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
    """Build a :class:`Diagnostic`, with a location when ``path`` is given."""
    loc = Location(path, line, col) if path is not None else None
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
    "E-CAP-013": "an artifact uses the reserved name of a runtime-provided tool",
    "E-CAP-015": "a child's env.allow entry is not held by its parent",
    # --- registry -------------------------------------------------------------------
    "E-REG-001": "no installed artifact matches the requested name and version",
    "E-REG-002": "an artifact's content does not match its recorded sha256",
    "E-REG-004": "a reserved version word (latest, stable, edge) was used as a version",
    "E-REG-005": "a resolved version or hash disagrees with murmur.lock",
    "E-REG-007": "an artifact name is not scoped (`<scope>/<name>`)",
    "E-REG-008": "murmur.lock cannot be read or parsed",
    # --- build / archives -----------------------------------------------------------
    "E-BLD-001": "the capsule name is not valid for an artifact",
    "E-BLD-002": "a file the capsule needs is missing from its source directory",
    "E-BLD-003": "an archive entry has an unsafe path (.., absolute, drive letter, NUL)",
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
    "E-RUN-001": "the session failed at launch",
    "E-RUN-005": "no inference driver is configured",
    "E-RUN-006": "the inference driver or agent command is missing",
    "E-RUN-007": "the agent loop failed, or the trace or records could not be written",
    "E-RUN-008": "the capsule artifact is not installed",
    "E-RUN-009": "the system prompt file cannot be read",
    "E-RUN-010": "network.internal_port is already in use",
    "E-RUN-011": "MURMUR_CONTAINMENT names no containment class",
    "E-RUN-019": "a session that can delegate could not register with mur-roost",
    "E-RUN-020": "MURMUR_SPAWNER or MURMUR_SPAWNER_LIFELINE is not a readable spawner handle",
    "E-RUN-022": "the session or formation named runs nothing here",
    "E-RUN-024": "the session or formation could not be ended",
    "E-RUN-027": "the inference provider rejected the credential",
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
    "W-SEC-019": "an upstream manifest key was accepted but has no effect in this runtime",
    "W-SEC-020": "the capsule can delegate but its lifecycle cannot receive a completion",
    "W-SEC-024": "an env.allow name looks like a credential",
    "W-RUN-007": "the session carries MURMUR_FORMATION_ID but no lifeline",
    "W-RUN-008": "a member may call others but its network.allow reaches no member door",
    "W-RUN-009": "a running record cannot be read and was skipped",
    "W-ROS-001": "more members may call a member than its lifecycle holds at once",
    "W-MAN-001": "mur_version names a murmur version other than the one running",
    # --- the process tree (spec/tree.md) -----------------------------------------------
    "E-TRE-001": "MURMUR_LINEAGE is unreadable, or disagrees with MURMUR_SPAWNER",
    "E-TRE-002": "a --spawn or MURMUR_SPAWN value cannot be read",
    "E-TRE-003": "the id given to `mur stop` names no node of the tree, or more than one",
    "E-TRE-004": "MURMUR_TREE_CAPS (the tree caps a delegating runtime hands down) cannot be read",
    "W-TRE-001": "a spawn-set narrowing names a capsule outside the manifest (or the parent's set)",
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
