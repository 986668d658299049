"""``mur new --roster NAME``: a two-member roster that admission accepts as written.

Writes, atomically (into ``<dest>/.<NAME>.tmp-<id>`` and then one rename)::

    <NAME>/
      roster.yaml          lead (entry) may call worker
      lead/murmur.yaml     <NAME>-lead   plan capsule; single + exit; network.allow [localhost];
      lead/plan.yaml                     calls worker with a `member` step, outputs its answer
      worker/murmur.yaml   <NAME>-worker plan capsule; queue + sleep; serves peers; echoes
      worker/plan.yaml
      README.md            the build / install / run commands

Both members declare a bearer ``network.authentication`` (the roster has an edge). After
``mur build`` and ``mur install -g`` of each member, ``mur doctor --roster <NAME>`` admits it
and ``mur run --roster <NAME> --task "…"`` runs it offline (no model is called).
Specification: ``spec/roster.md`` "``mur new --roster NAME``".
"""

from __future__ import annotations

import re
from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.manifest import write_new_tree

CAPSULE_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_MAX_NAME = 100 - len("-worker")  # the member capsule names stay within 100 characters

SCAFFOLD_VERSION = "0.1.0"


def roster_files(name: str) -> dict[str, str]:
    """The scaffold's files, ``relative path -> text`` (pure; used by tests and the writer)."""
    lead, worker = f"{name}-lead", f"{name}-worker"
    return {
        "roster.yaml": (
            f"# A formation of two members. Build and install each member, then run:\n"
            f"#   mur run --roster {name} --task \"hello\"\n"
            "roster_version: 1\n"
            "members:\n"
            "  - name: lead\n"
            f"    capsule: local/{lead}\n"
            f"    version: {SCAFFOLD_VERSION}\n"
            "    entry: true\n"
            "  - name: worker\n"
            f"    capsule: local/{worker}\n"
            f"    version: {SCAFFOLD_VERSION}\n"
            "reachability:\n"
            "  - from: lead\n"
            "    to: [worker]\n"
        ),
        "lead/murmur.yaml": (
            f"name: {lead}\n"
            f"version: {SCAFFOLD_VERSION}\n"
            "description: The entry member; hands the task to worker and answers with its reply.\n"
            "plan: plan.yaml\n"
            "lifecycle:\n"
            "  task_acceptance: single\n"
            "  after_task: exit\n"
            "capabilities:\n"
            "  network:\n"
            "    allow: [localhost]   # member doors are loopback http on a random port\n"
            "network:\n"
            "  authentication:\n"
            "    scheme: bearer\n"
        ),
        "lead/plan.yaml": (
            "steps:\n"
            "  - id: ask\n"
            "    member: worker\n"
            "    task: \"{{ task }}\"\n"
            "output: \"{{ steps.ask.output }}\"\n"
        ),
        "worker/murmur.yaml": (
            f"name: {worker}\n"
            f"version: {SCAFFOLD_VERSION}\n"
            "description: A peer; answers each task it is given by echoing it.\n"
            "plan: plan.yaml\n"
            "lifecycle:\n"
            "  task_acceptance: queue\n"
            "  queue_depth: 1\n"
            "  after_task: sleep\n"
            "capabilities:\n"
            "  shell:\n"
            "    allow: [echo]\n"
            "exports:\n"
            "  peer_tasks:\n"
            "    accept: true\n"
            "network:\n"
            "  authentication:\n"
            "    scheme: bearer\n"
        ),
        "worker/plan.yaml": (
            "steps:\n"
            "  - id: answer\n"
            "    shell: [echo, \"worker heard: {{ task }}\"]\n"
            "output: \"{{ steps.answer.stdout }}\"\n"
        ),
        "README.md": (
            f"# {name}\n\n"
            "A formation of two plan capsules: `lead` (the entry member) calls `worker`.\n\n"
            "```sh\n"
            f"cd {name}\n"
            "mur build lead && mur install -g lead/" + f"{lead}-{SCAFFOLD_VERSION}.mur.zip\n"
            "mur build worker && mur install -g worker/" + f"{worker}-{SCAFFOLD_VERSION}.mur.zip\n"
            "mur doctor --roster .\n"
            "mur run --roster . --task \"hello\"\n"
            "```\n"
        ),
    }


def check_name(name: str) -> None:
    """Refuse a name ``mur new --roster`` cannot use.

    Raises:
        DiagnosticError: ``E-NEW-002`` when ``name`` is not a capsule name (lowercase letters,
            digits and ``-``, no leading or trailing ``-``, at most 93 characters so that
            ``<name>-worker`` fits the 100-character limit).
    """
    if not CAPSULE_NAME_RE.fullmatch(name) or len(name) > _MAX_NAME:
        raise DiagnosticError(
            error(
                "E-NEW-002",
                f"'{name}' is not a valid roster name",
                hint="use lowercase letters, digits and '-' (not first or last), at most "
                f"{_MAX_NAME} characters; the members become <name>-lead and <name>-worker",
            )
        )


def write_roster_scaffold(name: str, dest: Path) -> None:
    """Write ``<dest>/<name>/`` with a two-member roster and a source directory per member.

    Args:
        name (str): the roster (and directory) name; the member capsules are
            ``<name>-lead`` and ``<name>-worker``.
        dest (Path): the directory in which ``<name>/`` is created (the cwd for ``mur new``).

    Raises:
        DiagnosticError: ``E-NEW-002`` bad name; ``E-NEW-003`` ``<dest>/<name>`` already
            exists (nothing is written); ``E-IO-002``/``E-IO-003`` when writing fails (the
            temporary directory is removed, nothing is left behind).
    """
    check_name(name)
    write_new_tree(dest / name, roster_files(name))
