"""``mur run --roster`` on the command line: admit, mint, prepare directories, launch, report, retain.

:func:`run_roster` is the whole launch for ``mur run``; the formation itself is
:class:`murmur.formation.FormationLaunch`. Specification: ``spec/formation.md`` "The launch,
step by step".
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import trio

from murmur import containment, ids, tracectx
from murmur.assembly.checks import refuse_unknown_containment
from murmur.cli._common import emit
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.formation import (
    FORMATION_SIGNALS,
    FormationKey,
    FormationLaunch,
    FormationLayout,
    HttpProbe,
    Marker,
    ProcessSpawner,
    RosterOptions,
    Timers,
    admit_file,
    artifact_check,
    build_launch_plan,
    marker_warning_line,
    mur_command,
    not_launched,
    prepare_dirs,
    resolve_roster_path,
    retention_pass,
    warm_starter,
)
from murmur.manifest import Manifest
from murmur.session import EarlySignals, counted, on_trio_clock, parse_deadline, rfc3339


def refuse_inside_formation(environ: Mapping[str, str]) -> None:
    """``E-RUN-046`` when this process is already a formation member (spec/formation.md "Command line").

    Raises:
        DiagnosticError: ``MURMUR_FORMATION_ID`` is set, or ``MURMUR_FORMATION_PEERS`` is.
    """
    if environ.get("MURMUR_FORMATION_ID", "").strip():
        raise DiagnosticError(
            error(
                "E-RUN-046",
                "`mur run --roster` cannot run inside a formation: this process carries "
                "MURMUR_FORMATION_ID, so it is a formation member",
                hint="launch the roster from a shell that is not a formation member",
            )
        )
    if "MURMUR_FORMATION_PEERS" in environ:
        raise DiagnosticError(
            error(
                "E-RUN-046",
                "MURMUR_FORMATION_PEERS is set in mur run's own environment; it is "
                "runtime-owned and handed only to a member's components",
                hint="unset MURMUR_FORMATION_PEERS",
            )
        )



def _early_signal(early: object | None) -> int | None:
    """The first signal ``mur run``'s early handlers caught before Trio ran, if any."""
    received = getattr(early, "received", None)
    if not received:
        return None
    try:
        return int(signal.Signals[str(received[0])])
    except KeyError:
        return int(signal.SIGTERM)


async def _launch_main(
    roster_arg: str | None,
    options: RosterOptions,
    deadline_unix: float | None,
    timers: Timers,
    early: object | None = None,
) -> int:
    """Admit, mint, prepare directories, launch, report, retain (inside ``trio.run``)."""
    # install the signal receiver before anything slow: a signal during admission is not lost
    with trio.open_signal_receiver(*FORMATION_SIGNALS) as signals:
        caught = _early_signal(early)
        if caught is not None:  # signalled before anything started: start nothing
            return 128 + caught
        cwd = Path.cwd()
        roster_path = resolve_roster_path(roster_arg, cwd=cwd)
        admitted = admit_file(roster_path)
        for warning in admitted.warnings:
            emit(warning, prefix="[mur run] ")
        project_dir = (admitted.project_dir or roster_path.resolve().parent).resolve()

        # step 2: one formation id and one signing key, in this process's memory only
        formation_id = ids.new_id("frm")
        key = FormationKey.generate()
        # every member (and all it starts) lives in a unit of this formation's; a janitor
        # outside them is started with the first member and outlives a SIGKILLed launcher
        units = containment.here(formation_id)
        units.adopt_escapees()

        layout = FormationLayout(project_dir, formation_id)
        peer_names = [m.name for m in admitted.peers]
        prepared = prepare_dirs(layout, Marker.of_this_launcher(project_dir), peer_names)
        if prepared.marker_warning is not None:
            print(marker_warning_line(prepared.marker_warning), file=sys.stderr, flush=True)
        entry = admitted.entry
        retain = entry.manifest.trace.retain if entry.manifest.trace else None
        if prepared.refusals:
            emit(
                not_launched(
                    [
                        (r.member, admitted.member(r.member).coordinate, r.reason)
                        for r in prepared.refusals
                    ],
                    [],
                )
            )
            retention_pass(project_dir, formation_id, retain)
            return 1

        # the tree's inference gateway, when a member calls models or a budget is given
        # (spec/gateway.md); its URL reaches every member through the launch environment
        gateway = _formation_gateway(admitted, formation_id, layout,
                                     tree_budget(admitted.budget_tokens, options.budget_tokens))
        base_env: Mapping[str, str] = os.environ if gateway is None else {**os.environ, **gateway[2]}
        base_env = _with_tree_caps(base_env, admitted, options)
        # the warm starter (started with the launcher) goes in a unit of the formation's
        spawner = ProcessSpawner(starter=warm_starter(os.environ))
        deadline_text = rfc3339(deadline_unix) if deadline_unix is not None else None
        plan = build_launch_plan(
            admitted,
            formation_id=formation_id,
            key=key,
            project_dir=project_dir,
            peer_dirs=prepared.peer_dirs,
            options=options,
            mur=mur_command(),
            base_env=base_env,
            cwd=str(cwd),
            deadline=deadline_text,
        )
        verify = {
            m.name: check
            for m in admitted.members
            if (check := artifact_check(m.archive, m.sha256)) is not None
        }
        trio_deadline = (
            on_trio_clock(deadline_unix, now_unix=time.time(), now_trio=trio.current_time())
            if deadline_unix is not None
            else None
        )
        async with HttpProbe() as probe, spawner.owning(), trio.open_nursery() as serving:
            if gateway is not None:
                from murmur.gateway import run_gateway

                await serving.start(partial(run_gateway, gateway[0], sock=gateway[1]))
            launch = FormationLaunch(
                plan,
                spawner=spawner,
                probe=probe,
                timers=timers,
                deadline=trio_deadline,
                verify=verify,
                json_mode=options.json,
            )
            started_ms = int(time.time() * 1000)
            result = await launch.run(counted(signals, early if isinstance(early, EarlySignals) else None))
            serving.cancel_scope.cancel()
        if gateway is not None:
            gateway[1].close()
        del key  # step 7: the signing key is dropped with the formation
        _export_formation(entry.manifest, layout, started_ms, result.exit_status)
        for d in result.diagnostics:
            emit(d)
        retention_pass(project_dir, formation_id, retain)
        return result.exit_status


def tree_budget(roster: int | None, flag: int | None) -> int | None:
    """The formation's tree budget: the roster's ``budget_tokens`` and ``--budget-tokens``, the
    smaller when both are given (a flag only tightens; spec/roster.md "Tree budget")."""
    given = [v for v in (roster, flag) if v is not None]
    return min(given) if given else None


def _with_tree_caps(base: Mapping[str, str], admitted: Any, options: RosterOptions) -> Mapping[str, str]:
    """``base`` with ``MURMUR_TREE_CAPS`` for every member when the roster's keys or the flags
    set a tree cap: the smallest of the environment's, the roster's and the flag's wins, and
    the formation (``frm_``) is the tree's root, so its members take from one total
    (spec/roster.md "Tree caps", spec/tree.md "Caps")."""
    from murmur.tree import CAPS_ENV, parse_caps, tighten

    wanted = (admitted.max_tree_total, admitted.max_same_capsule_chain, options.max_tree_total,
              options.max_same_capsule_chain)
    if all(v is None for v in wanted):
        return base
    caps = tighten(parse_caps(base), total=admitted.max_tree_total, same_chain=admitted.max_same_capsule_chain)
    caps = tighten(caps, total=options.max_tree_total, same_chain=options.max_same_capsule_chain)
    return {**base, CAPS_ENV: caps.to_env()}


def _formation_gateway(
    admitted: Any, formation_id: str, layout: FormationLayout, budget: int | None
) -> tuple[Any, socket.socket, dict[str, str]] | None:
    """(the gateway, its bound socket, the variables members get), or None when no member can
    call models (no ``inference`` block, no ``spawn.allow``) and no budget is given, or
    ``MURMUR_GATEWAY=off`` without a budget. The launcher is the tree's root node; its records go
    to ``gateway.jsonl`` in the formation's directory (JSON lines, keys by reference only)."""
    from murmur.assembly.gatewaying import tree_calls_models, wanted

    if not wanted(budget, tree_calls_models([m.manifest for m in admitted.members]), os.environ):
        return None
    from murmur.gateway import ENDPOINT_ENV, Gateway, write_spend
    from murmur.gateway.root import root_tree

    tree, keys = root_tree(formation_id, [m.manifest for m in admitted.members], os.environ, budget)
    log = layout.formation_dir / "gateway.jsonl"

    def emit(record: dict[str, object]) -> None:
        try:
            log.parent.mkdir(parents=True, exist_ok=True)  # a formation without peers has none yet
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"formation_id": formation_id, **record}) + "\n")
        except OSError:
            pass  # the records are a view; a call is never refused for them

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    write_spend(formation_id, tree.nodes.values())  # the formation is the tree's root (spec/tree.md)
    gateway = Gateway(tree, keys, emit, on_spend=partial(write_spend, formation_id))
    return gateway, sock, {ENDPOINT_ENV: f"http://127.0.0.1:{sock.getsockname()[1]}"}


def _export_formation(manifest: Manifest, layout: FormationLayout, started_ms: int, exit_status: int) -> None:
    """The formation's own span, when OpenTelemetry export is configured (the entry member's
    ``observability.otel_endpoint`` or ``OTEL_EXPORTER_OTLP_*ENDPOINT``; spec/trace.md): its
    members' session spans hang from it. A failure is one line in the formation's ``otel.log``."""
    configured = manifest.observability.otel_endpoint if manifest.observability else None
    if not (configured or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()):
        return
    from murmur.formation import formation_span
    from murmur.observe import otlp

    url = otlp.endpoint(configured, os.environ)
    if url is None:
        return
    span = formation_span(os.environ, layout.formation_id)
    joined = tracectx.from_env(os.environ)
    spec = otlp.formation_span(layout.formation_id, span.trace_id, joined.span_id if joined else None,
                               name=layout.project_dir.name, start_ms=started_ms, end_ms=int(time.time() * 1000),
                               exit_status=exit_status)
    otlp.export_logged([spec], url, service=layout.project_dir.name, version="", log=layout.formation_dir / "otel.log",
                       timeout=otlp.timeout(os.environ))


def roster_options(args: object) -> tuple[str | None, RosterOptions, str | None]:
    """Read ``mur run``'s parsed arguments for a ``--roster`` launch.

    Args:
        args: the ``argparse.Namespace`` of ``mur run`` (attributes ``roster``, ``task``,
            ``json``, ``verbose``, ``no_env_file``, ``containment``, ``deadline``).

    Returns:
        tuple: ``(roster argument or None for bare, options, deadline text or None)``.
    """
    roster = getattr(args, "roster", None)
    roster_arg = roster if isinstance(roster, str) and roster.strip() else None
    options = RosterOptions(
        task=getattr(args, "task", None),
        json=bool(getattr(args, "json", False)),
        verbose=bool(getattr(args, "verbose", False)),
        no_env_file=bool(getattr(args, "no_env_file", False)),
        containment=getattr(args, "containment", None),
        budget_tokens=getattr(args, "budget_tokens", None),
        max_tree_total=getattr(args, "max_tree_total", None),
        max_same_capsule_chain=getattr(args, "max_same_capsule_chain", None),
    )
    deadline = getattr(args, "deadline", None)
    return roster_arg, options, deadline if isinstance(deadline, str) else None


def run_roster(
    args: object, *, timers: Timers | None = None, early: object | None = None
) -> int:
    """``mur run --roster``: the whole launch; returns the launcher's exit status.

    The caller (``mur run``) has already refused ``--resume`` and every flag ``--roster``
    does not combine with (exit 2). The exit status is returned from outside ``trio.run``
    (so containment is closed after the loop has ended).

    Args:
        args: ``mur run``'s parsed arguments (see :func:`roster_options`).
        timers (Timers | None): the bounds (default: the documents').
        early: ``mur run``'s early signal handlers (an object with ``received``, a list of
            signal names caught before Trio ran); a signal there starts nothing.

    Returns:
        int: see :func:`murmur.formation.launch.ending.exit_status`; 1 for a refusal before launch (admission, directories).

    Raises:
        DiagnosticError: ``E-RUN-046`` inside a formation; admission refusals
            (``E-ROS-*``, ``E-REG-005``); ``E-RUN-054`` for a bad ``--deadline`` (exit 2).
    """
    started = time.time()
    roster_arg, options, deadline = roster_options(args)
    refuse_inside_formation(os.environ)
    refuse_unknown_containment(os.environ)
    deadline_unix = parse_deadline(deadline, now=started) if deadline is not None else None
    from murmur.starter import early as warm

    warm.prestart(os.environ)  # (cmd_run started it already, before the formation code's imports)
    try:
        status: int = trio.run(
            _launch_main, roster_arg, options, deadline_unix, timers or Timers(), early
        )
    finally:
        warm.discard_unused()
        containment.here().close()
    return status

