"""Assembling a ``mur run`` for one capsule: the composition root (spec/session.md).

Modules::

    options       RunOptions, ./.env, --task                          what a run starts from
    checks        refusals before anything starts (E-RUN-011, E-RUN-010, E-IO-001, E-CAP-003)
    capsule       the manifest: ./murmur.yaml, --manifest, or an installed --capsule
    workload_choice  the workload the manifest declares (a plan or the agent loop)
    contributors  the formation member, process-tree and delegated-child sides
    compose       options → stores → workload → contributors → SessionSetup

It sits above ``session/``, ``plan/``, ``agent/``, ``formation/``, ``delegation/``, ``tree/`` and
``registry/`` and below ``cli/``; nothing below it imports it. Its face is lazy
(:func:`murmur.lazy.face`): ``mur run --roster`` reads ``checks`` without importing ``compose``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.assembly.checks import (
        check_containment,
        check_internal_port,
        check_workdir_parent,
        mur_version_warning,
        refuse_unknown_containment,
    )
    from murmur.assembly.compose import prepare
    from murmur.assembly.options import RunOptions, load_env_file, read_task, session_environ
    from murmur.assembly.workload_choice import load_workload, workload_kind

__all__ = [
    "RunOptions",
    "check_containment",
    "check_internal_port",
    "check_workdir_parent",
    "load_env_file",
    "load_workload",
    "mur_version_warning",
    "prepare",
    "read_task",
    "refuse_unknown_containment",
    "session_environ",
    "workload_kind",
]

__getattr__ = lazy.face(__name__, {
    "checks": ["check_containment", "check_internal_port", "check_workdir_parent", "mur_version_warning",
               "refuse_unknown_containment"],
    "compose": ["prepare"],
    "options": ["RunOptions", "load_env_file", "read_task", "session_environ"],
    "workload_choice": ["load_workload", "workload_kind"],
})
