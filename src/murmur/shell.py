"""Shell execution shared by plans and agent loops (spec/plan.md, "Shell execution").

One command = one containment unit (started by :func:`murmur.procs.run_process`, the one place
where a process starts). :func:`run_shell` runs an argv (never a shell string) whose
first element is a bare binary name listed in ``capabilities.shell.allow``, resolved on the
``PATH`` of the environment it is given, in the given working directory, with exactly that
environment. The command starts in a session (and process group) of its own; when it ends,
or when the calling task is cancelled, the whole group gets ``SIGKILL`` so no grandchild
outlives its command. Output is captured up to a cap per stream (the rest is drained and
counted, never kept) and the exit code and duration are kept.

:func:`baseline_env` builds the reduced environment shell commands get.

Errors::

    MurmurError
    └── ShellRefused     the command was not started (not allowed, not found, cannot start)
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from murmur import procs, timing, tracectx
from murmur.errors import MurmurError
from murmur.grants import denied_reason, grant_entry
from murmur.manifest import Manifest

__all__ = [
    "DEFAULT_PATH",
    "ShellRefused",
    "ShellResult",
    "baseline_env",
    "check_allowed",
    "run_shell",
]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` given to shell commands when the parent environment has none."""


class ShellRefused(MurmurError):
    """A shell command was refused before it started.

    Attributes:
        binary (str): the binary named by ``argv[0]`` (may be empty).
        reason (str): one sentence saying why.
        grant (str | None): the manifest grant that would allow it, e.g.
            ``capabilities.shell.allow: [echo, grep]`` (the existing grants plus this binary);
            ``None`` when no grant helps (the binary is
            not on ``PATH``, the name is not bare, the working directory is missing).
    """

    def __init__(self, binary: str, reason: str, *, grant: str | None = None) -> None:
        self.binary = binary
        self.reason = reason
        self.grant = grant
        text = reason if grant is None else f"{reason}; add the grant `{grant}`"
        super().__init__(text)


@attrs.frozen
class ShellResult:
    """What one finished command did.

    Attributes:
        argv (tuple[str, ...]): the command as run (``argv[0]`` is the bare binary name).
        exit_code (int): the exit status; ``-N`` when the command died of signal ``N``.
        stdout (bytes): captured standard output, at most the cap.
        stderr (bytes): captured standard error, at most the cap.
        stdout_bytes (int): bytes the command wrote to stdout in total (>= ``len(stdout)``).
        stderr_bytes (int): bytes the command wrote to stderr in total.
        duration_ms (int): wall time from start to exit, milliseconds.
        sandbox (str | None): under scoped or sealed, one sentence naming what the sandbox
            refused and the grant (or ceiling) behind it (spec/containment.md); else None.
        denied (str | None): a binary the sandbox refused to ``exec`` (not in
            ``capabilities.shell.allow``), read from the command's stderr; else None.
    """

    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int
    duration_ms: int
    sandbox: str | None = None
    denied: str | None = None

    @property
    def binary(self) -> str:
        """The bare binary name (``argv[0]``)."""
        return self.argv[0]

    @property
    def command(self) -> str:
        """The argv as one shell-quoted line, for display and the trace (never executed)."""
        import shlex  # only when a command is shown: a plain start loads none

        return shlex.join(self.argv)

    @property
    def truncated(self) -> bool:
        """True when either stream produced more than was kept."""
        return self.stdout_bytes > len(self.stdout) or self.stderr_bytes > len(self.stderr)

    @property
    def stdout_text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr decoded as UTF-8 (invalid bytes replaced)."""
        return self.stderr.decode("utf-8", "replace")

    def trace_fields(self) -> dict[str, object]:
        """The payload of a ``shell`` trace record (spec/plan.md, "Trace").

        Returns:
            dict: ``binary``, ``command``, ``exit_code``, ``stdout_bytes``, ``stderr_bytes``,
            ``duration_ms``, and ``truncated: true`` only when output was cut. The caller
            adds ``task_id`` (and ``turn`` or ``step``).
        """
        out: dict[str, object] = {
            "binary": self.binary,
            "command": self.command,
            "exit_code": self.exit_code,
            "stdout_bytes": self.stdout_bytes,
            "stderr_bytes": self.stderr_bytes,
            "duration_ms": self.duration_ms,
        }
        if self.truncated:
            out["truncated"] = True
        if self.sandbox is not None:
            out["sandbox"] = self.sandbox
        if self.denied is not None:
            out["denied_binary"] = self.denied
        return out


def _grant(binary: str, allow: Sequence[str]) -> str:
    return grant_entry("capabilities.shell.allow", allow, binary)


def check_allowed(binary: str, allow: Sequence[str]) -> None:
    """Refuse a binary name that is not a bare name listed in ``allow``.

    Pure: reads nothing. Used at plan load and before every command.

    Args:
        binary (str): ``argv[0]`` as written.
        allow (Sequence[str]): ``capabilities.shell.allow``.

    Raises:
        ShellRefused: the name is empty, is a path, or is not listed (``grant`` names the
            entry to add when a grant would help).
    """
    if not binary:
        raise ShellRefused(binary, "a shell command needs a binary name as its first element")
    if "/" in binary or binary in (".", ".."):
        raise ShellRefused(
            binary,
            f"`{binary}` is a path; shell commands name a bare binary that is looked up on PATH",
        )
    if binary not in allow:
        raise ShellRefused(binary, denied_reason(binary), grant=_grant(binary, allow))


def resolve_binary(binary: str, env: Mapping[str, str]) -> str:
    """The absolute path of ``binary`` on the environment's ``PATH``.

    Args:
        binary (str): a bare name (already allowed).
        env (Mapping[str, str]): the command's environment; only ``PATH`` is read.

    Raises:
        ShellRefused: no executable of that name is on ``PATH`` (``grant`` is None).
    """
    path = env.get("PATH", "")
    found = shutil.which(binary, path=path) if path else None
    if found is None:
        raise ShellRefused(binary, f"`{binary}` is allowed but not found on PATH ({path or 'empty'})")
    return os.path.abspath(found)


def _check_exec_format(binary: str, executable: str) -> None:
    """Refuse a file the kernel would not execute (``ENOEXEC``) before it is started.

    The unit trampoline execs the command from ``/bin/sh``, which would run such a file
    as a shell script; starting it directly would fail with "Exec format error". Same answer
    either way: the command is not started.
    """
    try:
        with open(executable, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise ShellRefused(binary, f"`{binary}` could not be started: {exc.strerror or exc}") from exc
    if not head.startswith((b"\x7fELF", b"#!")):
        raise ShellRefused(binary, f"`{binary}` could not be started: not an executable format")


async def run_shell(
    argv: Sequence[str],
    *,
    allow: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    output_cap: int = timing.SHELL_OUTPUT_CAP,
    stdin: bytes | None = None,
    confinement: procs.Confinement | None = None,
    starter: procs.CommandStarter | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> ShellResult:
    """Run one allowlisted command in its own process group and capture what it did.

    The command runs with exactly ``env`` (build it with :func:`baseline_env`) and
    ``TRACEPARENT`` naming the calling work's span (:mod:`murmur.tracectx`), in ``cwd``,
    with stdin from ``stdin`` (``/dev/null`` when ``None``). When its main process exits,
    the rest of its group is killed so no background grandchild outlives it; when the
    calling task is cancelled, the whole group is killed with ``SIGKILL`` and the main
    process reaped before ``trio.Cancelled`` propagates. A non-zero exit is a result, not an
    error. Processes that leave the group themselves (``setsid``) are not tracked.

    Args:
        argv (Sequence[str]): the command; ``argv[0]`` is a bare binary name. No shell
            parsing happens: each element is one argument.
        allow (Sequence[str]): ``capabilities.shell.allow``.
        cwd (Path): working directory (the session's workdir).
        env (Mapping[str, str]): the complete environment; its ``PATH`` resolves ``argv[0]``.
        output_cap (int): bytes kept per stream (stdout, stderr); default
            :data:`murmur.timing.SHELL_OUTPUT_CAP`.
        stdin (bytes | None): bytes written to the command's stdin, then EOF.
        confinement (procs.Confinement | None): the sandbox's contribution, applied by
            :mod:`murmur.procs`; None: the session's sandbox (:func:`murmur.sandbox.installed`),
            advisory when the session has none.
        starter (procs.CommandStarter | None): the session's warm starter
            (``TaskServices.starter``): it clones the command straight into its unit
            (:func:`murmur.procs.open_process`); None: exec.
        task_status: for ``nursery.start``: reports the process id (= its group id).

    Returns:
        ShellResult: exit code, captured output (capped; totals counted), duration in ms.

    Raises:
        ShellRefused: the binary is not allowed, not found, or the process cannot start.
        trio.Cancelled: the caller was cancelled (the group is dead by then).
    """
    argv = tuple(str(a) for a in argv)
    binary = argv[0] if argv else ""
    check_allowed(binary, allow)
    executable = resolve_binary(binary, env)
    _check_exec_format(binary, executable)
    from murmur.sandbox.installed import current as session_sandbox

    box = session_sandbox() if confinement is None else None
    if box is not None:
        confinement = box.confinement()
    try:
        done = await procs.run_process(
            argv, env=tracectx.with_env(env), cwd=cwd, executable=executable, stdin=stdin, cap=output_cap,
            confinement=confinement, starter=starter, task_status=task_status,
        )
    except OSError as exc:
        if exc.filename == str(cwd):
            raise ShellRefused(binary, f"the working directory {cwd} cannot be entered") from exc
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == errno.ENOEXEC:
            reason = "not an executable format"
        raise ShellRefused(binary, f"`{binary}` could not be started: {reason}") from exc
    result = ShellResult(
        argv=argv,
        exit_code=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        stdout_bytes=done.stdout_bytes,
        stderr_bytes=done.stderr_bytes,
        duration_ms=done.duration_ms,
    )
    if box is not None and confinement is not None and result.exit_code != 0:
        result = _sandbox_verdict(result, box, allow, env.get("PATH", ""))
    return result


def _sandbox_verdict(result: ShellResult, box: Any, allow: Sequence[str], search_path: str) -> ShellResult:
    """What the sandbox refused a finished command, as :attr:`ShellResult.sandbox`/``denied``."""
    from murmur import sandbox

    policy = box.policy
    via_shim = sandbox.shim(result.stderr, policy.klass.value)
    if via_shim is not None:  # no grant of the manager would help: no denied-binary message
        return attrs.evolve(result, sandbox=via_shim)
    denied = sandbox.denied_exec(result.stderr, allow, search_path)
    note = sandbox.stopped_by(policy.limits, result.exit_code, result.stderr)
    if note is None and denied is None:
        note = sandbox.explain(result.stderr, policy.klass.value, policy.workdir, policy.read_only)
    if denied is not None:
        from murmur.grants import grant_entry

        entry = grant_entry("capabilities.shell.allow", allow, denied)
        note = (f"adding `{denied}` to capabilities.shell.allow would allow it (`{entry}`): the "
                f"{policy.klass.value} sandbox refused to run `{denied}`")
    return attrs.evolve(result, sandbox=note, denied=denied)


def _matches(name: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in globs)


def baseline_env(
    manifest: Manifest,
    parent_env: Mapping[str, str],
    *,
    records_dir: Path | None = None,
    home: Path | None = None,
    tmpdir: Path | None = None,
) -> dict[str, str]:
    """The reduced environment every shell command of a session gets (pure).

    Built from nothing, never by copying ``parent_env``:

    1. ``PATH`` from ``parent_env`` (:data:`DEFAULT_PATH` when absent);
       ``HOME`` = ``home`` or ``<records_dir>/home``; ``TMPDIR`` = ``tmpdir`` or
       ``<records_dir>/tmp`` (each omitted when neither is given).
    2. ``LANG``, ``LANGUAGE`` and ``LC_*`` present in ``parent_env``, and each name in
       ``capabilities.env.allow`` present there — minus names matching
       ``capabilities.shell.strip_env`` globs.
    3. Names present in ``parent_env`` matching ``capabilities.shell.baseline_env`` globs
       (kept even when a strip glob matches them).

    Names starting ``MURMUR_`` are runtime-owned and never passed by steps 2 and 3.

    Args:
        manifest (Manifest): the running capsule's manifest.
        parent_env (Mapping[str, str]): the session process's environment.
        records_dir (Path | None): the session's records directory.
        home (Path | None): ``HOME`` (overrides ``<records_dir>/home``).
        tmpdir (Path | None): ``TMPDIR`` (overrides ``<records_dir>/tmp``).

    Returns:
        dict[str, str]: the environment, ready for :func:`run_shell`.
    """
    shell = manifest.capabilities.shell
    keep_globs = shell.baseline_env if shell else ()
    strip_globs = shell.strip_env if shell else ()
    env: dict[str, str] = {}
    for name, value in parent_env.items():
        if name.startswith("MURMUR_") or name in ("PATH", "HOME", "TMPDIR"):
            continue
        wanted = name in ("LANG", "LANGUAGE") or name.startswith("LC_")
        wanted = wanted or name in manifest.env_allow
        if wanted and not _matches(name, strip_globs):
            env[name] = value
        if _matches(name, keep_globs):
            env[name] = value
    env["PATH"] = parent_env.get("PATH") or DEFAULT_PATH
    if home is None and records_dir is not None:
        home = records_dir / "home"
    if tmpdir is None and records_dir is not None:
        tmpdir = records_dir / "tmp"
    if home is not None:
        env["HOME"] = str(home)
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env
