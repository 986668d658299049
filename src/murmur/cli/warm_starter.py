"""``python -m murmur.cli.warm_starter``: the warm starter process, with ``mur`` as what it forks.

Specification: ``spec/formation.md`` "The warm start path". The loop is
:func:`murmur.starter.server.main`; this module hands it ``mur``'s own ``main`` (what every
forked member or child runs) and :data:`PRELOAD` (what a ``mur run`` imports), so nothing
below the command line imports the command line.
"""

from __future__ import annotations

import sys

from murmur.cli.mur import main as mur_main
from murmur.starter import server

PRELOAD = (
    "murmur.cli._common",
    "murmur.cli.cmd_run",
    "murmur.registry",
    "murmur.registry.build",
    "murmur.tree.lineage",
    "murmur.tree.journaling",
    "murmur.tree.journal",
    "murmur.manifest.support",
    "murmur.assembly.workload_choice",
    "murmur.httpserve",
    "murmur.delegation.spawner",
    "encodings.utf_8_sig",
    "encodings.cp437",
    "ruamel.yaml.mergevalue",
    "zipfile",
    "murmur.assembly.compose",
    "murmur.assembly.contributors",
    "murmur.cli.run_session",
    "murmur.session.session",
    "murmur.session.door",
    "murmur.formation.member.member",
    "murmur.formation.member.membership",
    "murmur.formation.member.firstline",
    "murmur.formation.member.verifier",
    "murmur.formation.member.calls",
    "murmur.formation.wire.channel",
    "murmur.plan.planfile",
    "murmur.manifest.load",
    "hypercorn.trio",
)
"""Imported before ``ready``: what a member's ``mur run`` has imported when it prints its
readiness line (its session, door, plan, registry and tree code, the formation member side;
the list is what ``sys.modules`` holds in an exec'd member at that moment). Anything more here
delays the first fork. A name that is missing is skipped."""

AFTER_READY = (
    "httpx",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "murmur.tree.cascade",
    "murmur.tree.snapshot",
    "murmur.a2a.door_client",
)
"""Imported after ``ready``, one module at a time while no request waits: what a member imports
only once it works (its calls to peers and the token check on a call, ``mur ps``'s tree). A
child forked before they are in shares nothing of them and imports them itself."""


if __name__ == "__main__":
    sys.exit(server.main(sys.argv[1:], entry=mur_main, imports=PRELOAD, later=AFTER_READY))
