"""Formations: rosters, admission, formation tokens, channels, the launcher and its members.

Specification: ``spec/formation.md`` (the launcher, ``mur stop``, the member side),
``spec/roster.md`` (the schema and admission), ``spec/formation-tokens.md`` (``mft1.`` tokens
and channel lines).

Pure modules: :mod:`~murmur.formation.roster` (``roster.yaml`` schema, check 1),
:mod:`~murmur.formation.admission` (checks 2-8, ``W-ROS-001``, :class:`AdmittedRoster`),
:mod:`~murmur.formation.tokens` (``mft1`` Ed25519 tokens), :mod:`~murmur.formation.channel`
(formation channel lines), :mod:`~murmur.formation.scaffold` (``mur new --roster``),
:mod:`~murmur.formation.call_policy`, :mod:`~murmur.formation.offers` and
:mod:`~murmur.formation.reach` (``call-member``'s rules, answers and reach).

``call-member`` itself: :mod:`~murmur.formation.calls` (the engine) over
:mod:`~murmur.formation.addresses` (callees' door URLs) and :mod:`murmur.a2a`.

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (a plain ``mur run`` asks :func:`names_formation` and loads nothing else of the
formation side).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.formation.admission import AdmittedRoster, admit_file
    from murmur.formation.artifacts import artifact_check
    from murmur.formation.dirs import FormationLayout, Marker, marker_warning_line, prepare_dirs
    from murmur.formation.envnames import names_formation
    from murmur.formation.launcher import FORMATION_SIGNALS, FormationLaunch
    from murmur.formation.launchplan import RosterOptions, build_launch_plan
    from murmur.formation.member import contribute
    from murmur.formation.outcome import not_launched
    from murmur.formation.process import ProcessSpawner, mur_command, warm_starter
    from murmur.formation.readiness import HttpProbe
    from murmur.formation.retention import retention_pass
    from murmur.formation.roster import ROSTER_FILENAME, ReachabilityKind, resolve_roster_path
    from murmur.formation.scaffold import write_roster_scaffold
    from murmur.formation.stop import resolve_session, stop_formation, stop_named
    from murmur.formation.supervise import Timers
    from murmur.formation.tokens import FormationKey

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
    "admission": ["AdmittedRoster", "admit_file"],
    "artifacts": ["artifact_check"],
    "dirs": ["FormationLayout", "Marker", "marker_warning_line", "prepare_dirs"],
    "envnames": ["names_formation"],
    "launcher": ["FORMATION_SIGNALS", "FormationLaunch"],
    "launchplan": ["RosterOptions", "build_launch_plan"],
    "member": ["contribute"],
    "outcome": ["not_launched"],
    "process": ["ProcessSpawner", "mur_command", "warm_starter"],
    "readiness": ["HttpProbe"],
    "retention": ["retention_pass"],
    "roster": ["ROSTER_FILENAME", "ReachabilityKind", "resolve_roster_path"],
    "scaffold": ["write_roster_scaffold"],
    "stop": ["resolve_session", "stop_formation", "stop_named"],
    "supervise": ["Timers"],
    "tokens": ["FormationKey"],
})
