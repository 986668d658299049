"""Formations: rosters, admission, formation tokens, channels, the launcher and its members.

Specification: ``spec/formation.md`` (the launcher, ``mur stop``, the member side),
``spec/roster.md`` (the schema and admission), ``spec/formation-tokens.md`` (``mft1.`` tokens
and channel lines).

Modules (``pure``: no I/O)::

    roster       roster.yaml: schema, loader, positions (check 1)
    admission    checks 2-8 against installed artifacts: AdmittedRoster or refused whole
    tokens       mft1. Ed25519 formation tokens, one per reachability edge
    channel      formation channel lines: encode, decode                          pure
    envnames     the variables that place a mur run in a formation                pure
    launchplan   each member's command line, environment and channel              pure
    outcome      the launcher's exit status and closing refusals                  pure
    scaffold     mur new --roster: a two-member roster admission accepts (writes files)
    dirs         peers' work directories and the marker saying whose they are
    artifacts    the artifact re-hash just before a member starts (E-RUN-047)
    launcher     mur run --roster: launch a formation, end it cancel-correctly
    supervise    one member: start it, judge its readiness, stop it
    process      a member as a real process: pipes, process group, relays
    readiness    is a peer ready: its readiness line, its door answering as itself
    procinfo     whether a process runs, and when it started
    retention    removing old formation directories (trace.retain)
    stop         mur stop: a formation (through its launcher) or one session
    membership   the member side: what the environment and channel say of its place
    firstline    the launch-time read of the channel's first line
    member       the session contributor for a member (join, lifeline, install)
    verifier     the door side: recognising mft1. formation tokens
    call_policy  call-member's rules: busy schedule, deadline, answer cap         pure
    offers       what a callee's door answered an offer or a poll                 pure
    reach        whether network.allow reaches another member's door              pure
    addresses    callees' door URLs as they arrive on the channel
    calls        call-member, the engine (over addresses and murmur.a2a)

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (a plain ``mur run`` asks :func:`names_formation` and loads nothing else of the
formation side).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.formation.launch.artifacts import artifact_check
    from murmur.formation.launch.dirs import (
        FormationLayout,
        Marker,
        marker_warning_line,
        prepare_dirs,
    )
    from murmur.formation.launch.ending import not_launched
    from murmur.formation.launch.launcher import FORMATION_SIGNALS, FormationLaunch
    from murmur.formation.launch.launchplan import RosterOptions, build_launch_plan, formation_span
    from murmur.formation.launch.process import ProcessSpawner, mur_command, warm_starter
    from murmur.formation.launch.readiness import HttpProbe
    from murmur.formation.launch.retention import retention_pass
    from murmur.formation.launch.stop import resolve_session, stop_formation, stop_named
    from murmur.formation.launch.supervise import Timers
    from murmur.formation.member.member import contribute
    from murmur.formation.roster.admission import AdmittedRoster, admit_file
    from murmur.formation.roster.roster_scaffold import write_roster_scaffold
    from murmur.formation.roster.schema import (
        ROSTER_FILENAME,
        ReachabilityKind,
        resolve_roster_path,
    )
    from murmur.formation.wire.edge_tokens import FormationKey
    from murmur.formation.wire.envnames import names_formation

__all__ = [
    "FORMATION_SIGNALS",
    "ROSTER_FILENAME",
    "AdmittedRoster",
    "FormationKey",
    "FormationLaunch",
    "FormationLayout",
    "HttpProbe",
    "Marker",
    "ProcessSpawner",
    "ReachabilityKind",
    "RosterOptions",
    "Timers",
    "admit_file",
    "artifact_check",
    "build_launch_plan",
    "contribute",
    "formation_span",
    "marker_warning_line",
    "mur_command",
    "names_formation",
    "not_launched",
    "prepare_dirs",
    "resolve_roster_path",
    "resolve_session",
    "retention_pass",
    "stop_formation",
    "stop_named",
    "warm_starter",
    "write_roster_scaffold",
]

__getattr__ = lazy.face(__name__, {
    "roster.admission": ["AdmittedRoster", "admit_file"],
    "launch.artifacts": ["artifact_check"],
    "launch.dirs": ["FormationLayout", "Marker", "marker_warning_line", "prepare_dirs"],
    "wire.envnames": ["names_formation"],
    "launch.launcher": ["FORMATION_SIGNALS", "FormationLaunch"],
    "launch.launchplan": ["RosterOptions", "build_launch_plan", "formation_span"],
    "member.member": ["contribute"],
    "launch.ending": ["not_launched"],
    "launch.process": ["ProcessSpawner", "mur_command", "warm_starter"],
    "launch.readiness": ["HttpProbe"],
    "launch.retention": ["retention_pass"],
    "roster.schema": ["ROSTER_FILENAME", "ReachabilityKind", "resolve_roster_path"],
    "roster.roster_scaffold": ["write_roster_scaffold"],
    "launch.stop": ["resolve_session", "stop_formation", "stop_named"],
    "launch.supervise": ["Timers"],
    "wire.edge_tokens": ["FormationKey"],
})
