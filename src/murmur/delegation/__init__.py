"""Delegation: a capsule spawns a child capsule under mur-roost, watches it, hears its outcome.

Specification: ``spec/delegation.md``.

Modules::

    spawner       MURMUR_SPAWNER: the handle a child reports to (E-RUN-020)          pure
    environment   the child's environment, built from nothing                      pure
    watch_policy  the child watch: its bound; what the launcher reports, and when  pure
    book          the delegating session's delegations; its door's completion rule
    completion    completion.json (one reporter) and the completion post
    approval      the approval on a child's stdin
    launcher      POST /spawn → directory → `mur run` → readiness → task → watch
    child_process the child's process: its command, start, readiness line, terminate
    delivery      the task's SendMessage and the answer's GetTask (murmur.a2a)
    reporting     exactly one report per delegation, from the launcher's side
    release       a launch that falls short gives its mur-roost slot back at once
    runtime       registration, hooks and services of one session
    contributor   the session contributor (called for every `mur run`)

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (every ``mur run`` reads the spawner variables; only a session that delegates or was
delegated loads the rest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.delegation.completion import read_completion
    from murmur.delegation.contributor import contribute
    from murmur.delegation.parent import resolve_global
    from murmur.delegation.runtime import DelegationRuntime
    from murmur.delegation.spawner import SPAWNER_ENV, SPAWNER_LIFELINE_ENV, parse_spawner

__all__ = [
    "SPAWNER_ENV",
    "SPAWNER_LIFELINE_ENV",
    "DelegationRuntime",
    "contribute",
    "parse_spawner",
    "read_completion",
    "resolve_global",
]

__getattr__ = lazy.face(__name__, {
    "contributor": ["contribute"],
    "completion": ["read_completion"],
    "parent": ["resolve_global"],
    "runtime": ["DelegationRuntime"],
    "spawner": ["SPAWNER_ENV", "SPAWNER_LIFELINE_ENV", "parse_spawner"],
})
