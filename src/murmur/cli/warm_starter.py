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
    "murmur.tree.cascade",
    "murmur.tree.lineage",
    "murmur.tree.contrib",
    "murmur.tree.journal",
    "murmur.tree.snapshot",
    "murmur.manifest.support",
    "murmur.assembly.workloads",
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
    "murmur.formation.member",
    "murmur.formation.membership",
    "murmur.formation.firstline",
    "murmur.formation.verifier",
    "murmur.formation.calls",
    "murmur.formation.channel",
    "murmur.plan.load",
    "murmur.manifest.load",
    "hypercorn.trio",
    "httpx",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
)
"""Imported before ``ready``: what a member's ``mur run`` imports (its session, door, plan,
registry and tree code, the formation member side, the call transport and the token check;
the list is what ``PYTHONPROFILEIMPORTTIME=1`` shows a forked member still importing without
it). A name that is missing is skipped."""


if __name__ == "__main__":
    sys.exit(server.main(sys.argv[1:], entry=mur_main, imports=PRELOAD))
