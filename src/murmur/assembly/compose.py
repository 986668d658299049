"""The composition root of ``mur run`` for one capsule: options → stores → workload →
contributors → a :class:`~murmur.session.session.SessionSetup` ready to run.

:func:`prepare` resolves the capsule (``./murmur.yaml``, ``--manifest``, or an installed
``--capsule``/``--capsule-version``), reads ``--task``, parses ``--deadline``, makes the records
directory, picks the workload, builds the setup, and hands its own contributions (the
conversation's start records, the workload's session hooks, the tree's gateway) to the session
contributors (:mod:`murmur.assembly.contributors`), which merge them with theirs once. Nothing runs yet; the
command line (:mod:`murmur.cli.run_session`) runs it. Specification: spec/session.md.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from murmur import timing
from murmur.assembly import contributors, gatewaying
from murmur.assembly import conversations as convo
from murmur.assembly.capsule import resolve_capsule
from murmur.assembly.checks import (
    check_containment,
    check_internal_port,
    check_workdir_parent,
    mur_version_warning,
    refuse_unknown_containment,
)
from murmur.assembly.hooks import session_hooks
from murmur.assembly.options import RunOptions, read_task, session_environ, usage_error
from murmur.assembly.workload_choice import load_workload, workload_kind
from murmur.diagnostics import error
from murmur.errors import DiagnosticError, UsageError
from murmur.ids import new_id
from murmur.manifest import AfterTask, TaskAcceptance
from murmur.paths import oserror_hint
from murmur.routing import started_profile
from murmur.session import (
    Policy,
    SessionSetup,
    create_records,
    parse_deadline,
    parse_idle_timeout,
    records_dir_for,
    records_root,
)
from murmur.tree import narrowings


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
    cwd = (cwd or Path.cwd()).resolve()
    started = time.time() if now is None else now
    refuse_unknown_containment(os.environ if environ is None else environ)
    env = session_environ(opts, os.environ if environ is None else environ, cwd)
    deadline = parse_deadline(opts.deadline, now=started) if opts.deadline is not None else None
    if deadline is not None and deadline <= started and not env.get("MURMUR_FORMATION_ID"):
        # a member inherits the formation's moment and winds down at once; a user is told
        raise UsageError(error("E-RUN-054", f"--deadline {opts.deadline} is already past",
                               hint="give a later moment, or a duration such as 15m"))
    convo.check_flags(opts.context, opts.resume, opts.forget_session)
    if opts.spawn is not None and opts.no_spawn:
        raise usage_error("--spawn and --no-spawn contradict each other; give one of them")
    narrowed = narrowings(spawn_flag=opts.spawn, no_spawn=opts.no_spawn, environ=env)
    if opts.max_tree_total is not None or opts.max_same_capsule_chain is not None:
        from murmur.tree import CAPS_ENV, parse_caps, tighten

        env[CAPS_ENV] = tighten(parse_caps(env), total=opts.max_tree_total,
                                same_chain=opts.max_same_capsule_chain).to_env()
    manifest, root, _where = resolve_capsule(opts, env, cwd)
    klass = check_containment(manifest, opts.containment, env)
    version_warning = mur_version_warning(manifest)
    if version_warning is not None:
        print(version_warning.render(), file=sys.stderr, flush=True)
    task_text = read_task(opts.task, cwd) if opts.task is not None else None
    workdir = (Path(opts.workdir) if opts.workdir else cwd).expanduser()
    workdir = (workdir if workdir.is_absolute() else cwd / workdir).resolve()
    check_workdir_parent(workdir)
    workload = load_workload(manifest, root, env, system_prompt_override=opts.system_prompt)
    bootstrap: dict[str, Path] = {}
    staged = convo.stage(
        manifest, context=opts.context, resume=opts.resume, resume_mode=opts.resume_mode,
        forget=opts.forget_session, workdir_records=records_dir_for(workdir, "x").parent,
        records_root=records_root(), cwd=cwd,
        report=convo.make_reporter(lambda: bootstrap.get("log")),
        compaction_hook=bool(getattr(workload, "has_compaction_hook", False)),
    )
    bind = check_internal_port(manifest)
    made = make_workdir(workdir)
    session_id = new_id("ses")
    where = records_dir_for(workdir, session_id)
    try:
        records = create_records(where)
    except OSError as exc:
        raise DiagnosticError(
            error("E-IO-003", f"the records directory {where} cannot be made: {exc.strerror or exc}",
                  hint=oserror_hint(exc, where))
        ) from None
    bootstrap["log"] = records.bootstrap_log
    if made:
        print(f"murmur: made the workdir {workdir} (it did not exist)", file=sys.stderr, flush=True)
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
        containment=klass,
        launch_context_id=staged.context_id,
        delegation_bound_secs=timing.delegation_bound(manifest.lifecycle.delegation_deadline_secs, env),
    )
    setup.running_fields.update(started_profile(root, None if opts.capsule else Path(_where)))
    own = [
        # the tree's inference gateway first, so the command environment names it
        # (spec/gateway.md)
        gatewaying.contribute(setup, env, budget_tokens=opts.budget_tokens),
        convo.apply(setup, workload, staged),
        session_hooks(setup, workload),
    ]
    contributors.contribute(setup, env, own)
    return setup


def make_workdir(workdir: Path) -> bool:
    """Make ``workdir`` (mode 0700) when it does not exist; True when it was made.

    Raises:
        DiagnosticError: ``E-IO-003`` when it exists and is not a directory, or cannot be made.
    """
    if workdir.is_dir():
        return False
    try:
        workdir.mkdir(mode=0o700)
    except FileExistsError as exc:
        if workdir.is_dir():  # made meanwhile by someone else
            return False
        raise DiagnosticError(error(
            "E-IO-003", f"the workdir {workdir} exists and is not a directory", path=str(workdir),
            hint=oserror_hint(exc, workdir))) from None
    except OSError as exc:
        raise DiagnosticError(error(
            "E-IO-003", f"the workdir {workdir} cannot be made: {exc.strerror or exc}",
            path=str(workdir), hint=oserror_hint(exc, workdir))) from None
    return True
