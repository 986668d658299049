"""``mur run`` for one capsule: from command-line options to a finished session.

:func:`prepare` resolves the capsule (``./murmur.yaml``, ``--manifest``, or an installed
``--capsule``/``--capsule-version``), reads ``--task``, parses ``--deadline``, makes the records
directory, picks the workload, builds the :class:`SessionSetup`, and lets the session
contributors (formation membership, delegated children) add their watchers and hooks.
:func:`run_prepared` runs it under ``trio.run`` with the signal policy and the console rules,
and returns the exit status (outside ``trio.run``, trio-stack P6).
"""

from __future__ import annotations

import errno
import importlib
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from murmur import __version__
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError, UsageError
from murmur.ids import new_id
from murmur.manifest.model import AfterTask, Containment, Manifest, TaskAcceptance
from murmur.session.console import Console
from murmur.session.lifecycle import Policy, parse_idle_timeout
from murmur.session.records import create_records, records_dir_for
from murmur.session.session import SessionSetup, SessionSummary, dumps_line
from murmur.session.signals import EarlySignals
from murmur.userfile import UserFileError, read_user_text

# Modules that may extend every session (each exposes ``contribute(setup, environ)``).
CONTRIBUTORS: tuple[str, ...] = ("murmur.formation.member", "murmur.tree.contrib", "murmur.delegation.child")


def _delegation_wanted(setup: SessionSetup, environ: Mapping[str, str]) -> bool:
    """Whether the delegation side can have anything to do: the run was delegated (either
    spawner variable is present) or its manifest may delegate."""
    from murmur.delegation.spawner import SPAWNER_ENV, SPAWNER_LIFELINE_ENV

    return SPAWNER_ENV in environ or SPAWNER_LIFELINE_ENV in environ or bool(setup.manifest.spawn_allow)


def _formation_wanted(setup: SessionSetup, environ: Mapping[str, str]) -> bool:
    from murmur.formation.envnames import names_formation

    return names_formation(environ)


CONTRIBUTOR_GATES: dict[str, Callable[[SessionSetup, Mapping[str, str]], bool]] = {
    "murmur.formation.member": _formation_wanted,
    "murmur.delegation.child": _delegation_wanted,
}
"""Cheap checks run before a contributor is imported: when one says no, the contributor
would have done nothing, so the module (and the transports, roost client and cryptography it
imports) is not loaded (issue 19). A contributor without a gate is always imported."""


@attrs.frozen
class RunOptions:
    """``mur run`` options for a single capsule (see ``mur run --help``)."""

    manifest: str | None = None
    capsule: str | None = None
    capsule_version: str | None = None
    project_dir: str | None = None
    task: str | None = None
    json: bool = False
    workdir: str | None = None
    task_acceptance: str | None = None
    after_task: str | None = None
    deadline: str | None = None
    verbose: bool = False
    no_env_file: bool = False
    containment: str | None = None
    system_prompt: str | None = None
    spawn: str | None = None
    no_spawn: bool = False


MAX_TASK_FILE_BYTES = 16 * 1024 * 1024
"""A ``--task`` file larger than this is refused (``E-IO-003``), as the door refuses a larger body."""
MAX_ENV_FILE_BYTES = 1 << 20
"""A larger ``./.env`` is ignored, as an unreadable one is."""


def _usage(message: str, hint: str | None = None) -> UsageError:
    return UsageError(error("E-CLI-001", message, hint=hint))


def load_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a ``.env`` file (``export`` prefixes, quotes and ``#`` comments
    allowed); an absent or unreadable file gives nothing. Values are never printed."""
    out: dict[str, str] = {}
    try:
        text = read_user_text(path, limit=MAX_ENV_FILE_BYTES)
    except UserFileError:
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum() or key[0].isdigit():
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def refuse_unknown_containment(environ: Mapping[str, str]) -> None:
    """Refuse a ``MURMUR_CONTAINMENT`` that names no class (spec/session.md "Containment").

    Raises:
        UsageError: ``E-RUN-011`` (exit 2), before anything starts.
    """
    from murmur.containment.host import force_problem

    problem = force_problem(environ)
    if problem is not None:
        raise UsageError(error("E-RUN-011", problem,
                               hint="unset it to let the host decide, or set MURMUR_CONTAINMENT=groups"))


def session_environ(opts: RunOptions, environ: Mapping[str, str], cwd: Path) -> dict[str, str]:
    """The environment the session works with: the process's, plus ``./.env`` entries that
    it does not already set (unless ``--no-env-file``)."""
    env = dict(environ)
    if not opts.no_env_file:
        for k, v in load_env_file(cwd / ".env").items():
            env.setdefault(k, v)
    return env


def read_task(value: str, cwd: Path) -> str:
    """``--task``: an existing file's contents, else the text itself.

    Raises:
        DiagnosticError: ``E-IO-002``/``E-IO-003`` when the named file cannot be read.
    """
    path = Path(value) if os.path.isabs(value) else cwd / value
    try:
        is_file = len(value) < 4096 and "\n" not in value and path.is_file()
    except OSError:
        is_file = False
    if not is_file:
        return value
    try:
        return read_user_text(path, limit=MAX_TASK_FILE_BYTES)
    except UserFileError as exc:
        code = "E-IO-002" if exc.kind == "denied" else "E-IO-003"
        raise DiagnosticError(error(code, f"cannot read the task file {path}: {exc.reason}")) from None


def resolve_capsule(opts: RunOptions, env: Mapping[str, str], cwd: Path) -> tuple[Manifest, Path, str]:
    """The manifest, the capsule root, and a description of where it came from.

    Raises:
        UsageError: ``E-CLI-001`` for ``--capsule`` without ``--capsule-version`` (or the
            reverse) or beside ``--manifest``.
        DiagnosticError: the manifest or the installed capsule is refused.
    """
    if opts.capsule_version is not None and opts.capsule is None:
        raise _usage("--capsule-version needs --capsule", hint="give both, e.g. --capsule local/demo --capsule-version 0.1.0")
    if opts.capsule is not None:
        if opts.manifest is not None:
            raise _usage("--capsule and --manifest name two capsules; give one of them")
        if opts.capsule_version is None:
            raise _usage("--capsule needs --capsule-version", hint="give the exact version installed, e.g. 0.1.0")
        from murmur.registry import resolve

        project = Path(opts.project_dir).resolve() if opts.project_dir else cwd
        found = resolve(opts.capsule, opts.capsule_version, project_dir=project)
        return found.manifest, found.root, f"{found.ref}@{found.version} ({found.scope} store)"
    from murmur.manifest.load import load_manifest

    path = Path(opts.manifest) if opts.manifest else cwd / "murmur.yaml"
    if not path.is_absolute():
        path = cwd / path
    warnings: list[Diagnostic] = []
    manifest = load_manifest(path, env=env, warnings=warnings)
    for w in warnings:
        print(w.render(), file=sys.stderr, flush=True)
    root = path if path.is_dir() else path.parent
    return manifest, root.resolve(), str(path)


def mur_version_warning(manifest: Manifest, running: str = __version__) -> Diagnostic | None:
    """``W-MAN-001`` when ``mur_version`` names another murmur version (the run continues)."""
    wanted = manifest.mur_version
    if wanted is None or wanted.strip().removeprefix("v") == running:
        return None
    return error("W-MAN-001", f"the capsule asks for mur {wanted}, but this is mur {running}; running it anyway",
                 hint="set `mur_version` to the version you run, or remove it")


def check_internal_port(manifest: Manifest, host: str = "127.0.0.1") -> str:
    """The door's bind address: ``network.internal_port`` on loopback, else an OS-chosen port.

    The port is tried once here so a busy one refuses the launch before anything starts.

    Raises:
        DiagnosticError: ``E-RUN-010`` when the port is already in use (or cannot be bound).
    """
    port = manifest.internal_port
    if port is None:
        return f"{host}:0"
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((host, port))
    except OSError as exc:
        reason = "it is already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise DiagnosticError(error(
            "E-RUN-010", f"network.internal_port {port} cannot be bound on {host}: {reason}",
            hint="stop whatever holds the port, choose another `internal_port`, or remove the key")) from None
    finally:
        probe.close()
    return f"{host}:{port}"


def check_workdir_parent(workdir: Path) -> None:
    """Refuse a ``--workdir`` whose parent directory does not exist (nothing is created).

    Raises:
        DiagnosticError: ``E-IO-001``.
    """
    if not workdir.exists() and not workdir.parent.is_dir():
        raise DiagnosticError(error(
            "E-IO-001", f"the workdir's parent directory {workdir.parent} does not exist",
            hint="create it first, or give a --workdir inside an existing directory"))


def check_containment(manifest: Manifest, flag: str | None = None) -> None:
    """Refuse a containment floor above advisory (``E-CAP-003``); see :func:`_check_containment`."""
    _check_containment(manifest, flag)


def _check_containment(manifest: Manifest, flag: str | None) -> None:
    floor = manifest.capabilities.containment or Containment.ADVISORY
    if flag:
        asked = Containment(flag)
        floor = asked if asked.rank > floor.rank else floor
    if floor is not Containment.ADVISORY:
        raise DiagnosticError(
            error(
                "E-CAP-003",
                f"the containment floor is {floor.value}, but this host achieves advisory "
                "(murmur enforces no kernel sandbox)",
                hint="run the capsule with containment advisory, on a runtime that enforces the floor",
            )
        )


def prepare(
    opts: RunOptions,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    now: float | None = None,
) -> SessionSetup:
    """Everything up to starting the session; nothing is running yet.

    Args:
        opts (RunOptions): the command-line options.
        environ (Mapping[str, str] | None): the process environment (default ``os.environ``).
        cwd (Path | None): the current directory.
        now (float | None): Unix seconds ``--deadline`` durations count from.

    Raises:
        UsageError: bad combinations (``E-CLI-001``) or a bad ``--deadline`` (``E-RUN-054``).
        DiagnosticError: the capsule, task file, plan or workdir is refused.
    """
    from murmur.session.deadline import parse_deadline
    from murmur.session.workloads import load_workload, workload_kind
    from murmur.tree.lineage import narrowings

    cwd = (cwd or Path.cwd()).resolve()
    started = time.time() if now is None else now
    refuse_unknown_containment(os.environ if environ is None else environ)
    env = session_environ(opts, os.environ if environ is None else environ, cwd)
    deadline = parse_deadline(opts.deadline, now=started) if opts.deadline is not None else None
    if deadline is not None and deadline <= started and not env.get("MURMUR_FORMATION_ID"):
        # a member inherits the formation's moment and winds down at once; a user is told
        raise UsageError(error("E-RUN-054", f"--deadline {opts.deadline} is already past",
                               hint="give a later moment, or a duration such as 15m"))
    if opts.spawn is not None and opts.no_spawn:
        raise _usage("--spawn and --no-spawn contradict each other; give one of them")
    narrowed = narrowings(spawn_flag=opts.spawn, no_spawn=opts.no_spawn, environ=env)
    manifest, root, _where = resolve_capsule(opts, env, cwd)
    _check_containment(manifest, opts.containment)
    version_warning = mur_version_warning(manifest)
    if version_warning is not None:
        print(version_warning.render(), file=sys.stderr, flush=True)
    task_text = read_task(opts.task, cwd) if opts.task is not None else None
    workdir = (Path(opts.workdir) if opts.workdir else cwd).expanduser()
    workdir = (workdir if workdir.is_absolute() else cwd / workdir).resolve()
    check_workdir_parent(workdir)
    workload = load_workload(manifest, root, env, system_prompt_override=opts.system_prompt)
    bind = check_internal_port(manifest)
    try:
        workdir.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise DiagnosticError(error("E-IO-003", f"the workdir {workdir} cannot be made: {exc.strerror or exc}")) from None
    session_id = new_id("ses")
    try:
        records = create_records(records_dir_for(workdir, session_id))
    except OSError as exc:
        raise DiagnosticError(
            error("E-IO-003", f"the records directory cannot be made: {exc.strerror or exc}")
        ) from None
    policy = Policy.build(
        manifest.lifecycle,
        acceptance=TaskAcceptance(opts.task_acceptance) if opts.task_acceptance else None,
        after_task=AfterTask(opts.after_task) if opts.after_task else None,
        launch_task=task_text is not None,
        idle_timeout=parse_idle_timeout(env.get("MURMUR_A2A_TIMEOUT_SECS")),
    )
    setup = SessionSetup(
        manifest=manifest,
        capsule_root=root,
        workdir=workdir,
        session_id=session_id,
        records=records,
        policy=policy,
        workload=workload,
        task_text=task_text,
        deadline=deadline,
        parent_env=env,
        workload_kind=workload_kind(manifest),
        bind=bind,
        spawn_narrowings=narrowed,
    )
    from murmur.routing.profile import started_profile

    setup.running_fields.update(started_profile(root, None if opts.capsule else Path(_where)))
    contribute(setup, env)
    return setup


def contribute(setup: SessionSetup, environ: Mapping[str, str]) -> None:
    """Let every installed contributor module extend ``setup`` (absent modules are skipped).

    Raises:
        DiagnosticError: a contributor refuses the launch (e.g. ``E-RUN-046``, ``E-RUN-020``).
    """
    for name in CONTRIBUTORS:
        gate = CONTRIBUTOR_GATES.get(name)
        if gate is not None and not gate(setup, environ):
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue
            raise
        hook = getattr(module, "contribute", None)
        if hook is not None:
            hook(setup, environ)


def _human_ready(console: Console, ready: Mapping[str, Any], *, verbose: bool) -> None:
    console.err(f"murmur: url {ready['url']}")
    if verbose:
        console.err(f"workdir: {ready['workdir']}")


REASON_LINES = 5
"""At most this many lines of a failed deciding task's reason reach the terminal."""
REASON_LINE_CHARS = 240
"""Each shown line is cut to this many characters."""


def reason_text(reason: str) -> str:
    """``reason: <first line>`` plus up to four indented lines, bounded (human mode only).

    Args:
        reason (str): the deciding task's failure text (also in ``out/result.txt``).

    Returns:
        str: at most :data:`REASON_LINES` lines of at most :data:`REASON_LINE_CHARS` characters
        each (plus the prefix); a final ``  …`` line when anything was left out.
    """
    lines = reason.strip("\n").splitlines() or [""]
    shown = [ln if len(ln) <= REASON_LINE_CHARS else ln[: REASON_LINE_CHARS - 1] + "…"
             for ln in lines[:REASON_LINES]]
    out = [f"reason: {shown[0]}", *(f"  {ln}" for ln in shown[1:])]
    if len(lines) > REASON_LINES:
        out.append("  …")
    return "\n".join(out)


def run_prepared(
    setup: SessionSetup,
    *,
    json_mode: bool,
    verbose: bool = False,
    console: Console | None = None,
    early: EarlySignals | None = None,
) -> int:
    """Run a prepared session in ``trio.run`` and print its outcome; returns the exit status.

    Output: ``--json`` → exactly one readiness line on stdout, nothing else there. Human mode
    → ``session:``/``records:``/``murmur: url`` on stderr, the final ``status:`` line on
    stderr, a failed deciding task's reason (bounded, :func:`reason_text`) on stderr, and a
    launch task's answer on stdout. Either mode: the closing diagnostic
    (``E-RUN-040``, ``E-RUN-053`` …) on stderr. Lines that cannot be written go to
    ``logs/bootstrap.log``.
    """
    import trio

    from murmur import containment
    from murmur.session.session import Session
    from murmur.session.signals import CASCADE_SIGNAL, SESSION_SIGNALS, signal_watcher

    con = console or Console()
    con.attach_log(setup.records.bootstrap_log)
    if not json_mode:
        con.err(f"session: {setup.session_id}")
        con.err(f"records: {setup.records.root}")

    def on_ready(ready: dict[str, Any]) -> None:
        if json_mode:
            con.out(dumps_line(ready))
        else:
            _human_ready(con, ready, verbose=verbose)

    async def main() -> SessionSummary:
        with trio.open_signal_receiver(*SESSION_SIGNALS, CASCADE_SIGNAL) as receiver:
            already = len(early.received) if early else 0
            setup.watchers.insert(0, signal_watcher(receiver, already=already, exit_fn=setup.exit_fn))
            session = Session(setup)
            if already:
                from murmur.session.winddown import signal_wind_down

                assert early is not None
                session.wind_down(signal_wind_down(early.received[0]))
            elif early is not None and early.cascade:
                from murmur.session.winddown import cascade_wind_down

                session.wind_down(cascade_wind_down())
            return await session.run(on_ready)

    # every process this session starts is contained; whatever is left when it ends is killed
    units = containment.here(setup.session_id)
    units.adopt_escapees()
    try:
        summary = trio.run(main)
    finally:
        units.close()
    if not json_mode:
        if setup.task_text is not None and summary.answer is not None:
            con.out(summary.answer.rstrip("\n"))
        con.err(f"status: {summary.status}")
        if summary.reason:
            con.err(reason_text(summary.reason))
    if summary.diagnostic is not None:
        con.err(summary.diagnostic.render())
    return summary.exit_code
