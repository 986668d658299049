"""The delegated child's environment, built from nothing.

Specification: ``spec/delegation.md`` "Launching a child" (step 4).

A child starts from a cleared environment. Its parent's runtime puts in exactly:

=============================  ==========================================================
``PATH``, ``HOME``             always, from the parent's own values
``MURMUR_HOME``                when the parent holds it (this project's extension: the
                               child must read the same artifact store and records root
                               as its parent; it relocates, it grants nothing)
any other name                 it appears in both the child's and the parent's
                               ``capabilities.env.allow`` and the parent holds it
``MURMUR_CONTAINMENT``         when the parent holds it (forces the process-group class,
                               spec/session.md "Containment"; it narrows, it grants nothing)
``OTEL_EXPORTER_OTLP_ENDPOINT`` when the parent holds them: where the runtime exports the
``…_TRACES_ENDPOINT``          child's spans (spec/trace.md); the child's capsule is given
                               no network by them (never ``…_HEADERS``, which may hold a token)
``MURMUR_CONTAINMENT_UNIT``    the unit the child was started in (added by the launcher)
``MURMUR_ROOST_URL``           always, the daemon the parent asked
``MURMUR_SPAWNER``             the spawner handle (compact JSON)
``MURMUR_SPAWNER_LIFELINE``    the decimal fd of the child's spawner lifeline
``MURMUR_LINEAGE``             the child's lineage (spec/tree.md), set by the launcher after
                               this function; ``MURMUR_SPAWN`` is never forwarded (the
                               parent's set travels inside the lineage)
``TRACEPARENT``                the delegating work's span (spec/trace.md "Trace ids"): the
                               child joins its parent's trace
=============================  ==========================================================

The runtime's names are applied last, so a child listing one of them under
``capabilities.env.allow`` cannot displace the runtime's value. Pure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from murmur import tracectx
from murmur.delegation.spawner import SPAWNER_ENV, SPAWNER_LIFELINE_ENV
from murmur.roost import ROOST_URL_ENV

PASSTHROUGH = (
    "MURMUR_HOME", "MURMUR_CONTAINMENT", "MURMUR_SANDBOX_HOST",  # a child runs on its parent's host
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)
TREE_NAMES = ("MURMUR_LINEAGE", "MURMUR_SPAWN")  # runtime-owned (spec/tree.md): never forwarded by env.allow
RUNTIME_NAMES = (
    "PATH", "HOME", ROOST_URL_ENV, SPAWNER_ENV, SPAWNER_LIFELINE_ENV, tracectx.ENV, *PASSTHROUGH, *TREE_NAMES
)


def child_environment(
    parent_env: Mapping[str, str],
    *,
    parent_allow: Sequence[str],
    child_allow: Sequence[str],
    roost_url: str,
    spawner: str,
    lifeline_fd: int,
    home_fallback: str | None = None,
) -> dict[str, str]:
    """The whole environment of a delegated child.

    Args:
        parent_env (Mapping[str, str]): the parent's process environment at launch.
        parent_allow (Sequence[str]): the parent's ``capabilities.env.allow``.
        child_allow (Sequence[str]): the child's ``capabilities.env.allow``.
        roost_url (str): ``MURMUR_ROOST_URL`` (the daemon the parent asked).
        spawner (str): the encoded spawner handle.
        lifeline_fd (int): the child's lifeline read end, as numbered in the child.
        home_fallback (str | None): ``HOME`` when the parent holds none.

    Returns:
        dict[str, str]: the child's environment, nothing else.
    """
    env: dict[str, str] = {}
    parent_names = set(parent_allow)
    for name in child_allow:
        if name in parent_names and name not in RUNTIME_NAMES and name in parent_env:
            env[name] = parent_env[name]
    for name in PASSTHROUGH:
        value = parent_env.get(name, "")
        if value.strip():
            env[name] = value
    env["PATH"] = parent_env.get("PATH") or os.defpath
    home = parent_env.get("HOME") or home_fallback
    if home:
        env["HOME"] = home
    env[ROOST_URL_ENV] = roost_url
    env[SPAWNER_ENV] = spawner
    env[SPAWNER_LIFELINE_ENV] = str(lifeline_fd)
    env[tracectx.ENV] = tracectx.outgoing()
    return env
