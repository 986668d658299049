"""``mur new NAME``: a plan capsule that builds, installs and runs as written.

Writes, atomically (into ``<dest>/.<NAME>.tmp-<id>`` and then one rename)::

    <NAME>/
      murmur.yaml   name, version 0.1.0, `plan: plan.yaml`, shell.allow [echo], lifecycle
      plan.yaml     one `shell` step echoing the task; the plan's output is its stdout
      README.md     the build / install / run commands

No model is called: the capsule answers ``received: <task>``. Specification:
``spec/manifest.md`` (the scaffold) and ``spec/plan.md`` (the plan schema).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.ids import uuid7_hex
from murmur.manifest.rules import is_capsule_name
from murmur.paths import oserror_hint

SCAFFOLD_VERSION = "0.1.0"


def capsule_files(name: str) -> dict[str, str]:
    """The scaffold's files, ``relative path -> text`` (pure; used by tests and the writer)."""
    return {
        "murmur.yaml": (
            "# The capsule manifest. Reference: spec/manifest.md.\n"
            f"name: {name}                # lowercase letters, digits and '-'\n"
            f"version: {SCAFFOLD_VERSION}               # an exact version; the artifact is "
            f"{name}-{SCAFFOLD_VERSION}.mur.zip\n"
            "description: A plan capsule that echoes the task it receives.\n"
            "\n"
            "# The workload: a plan file packed with the capsule (spec/plan.md).\n"
            "plan: plan.yaml\n"
            "\n"
            "# What the capsule may do. Plan shell steps may run only the binaries listed here,\n"
            "# by bare name, found on PATH.\n"
            "capabilities:\n"
            "  shell:\n"
            "    allow: [echo]\n"
            "\n"
            "# How tasks arrive: one task at a time (`single`), and the session exits after it.\n"
            "lifecycle:\n"
            "  task_acceptance: single    # none | single | queue\n"
            "  after_task: exit           # exit | sleep\n"
        ),
        "plan.yaml": (
            "# The plan this capsule runs for every task. Reference: spec/plan.md.\n"
            "steps:\n"
            "  # Each step has an `id` (later steps and the output refer to it by name)\n"
            "  # and one action. `shell` runs an argv list; its binary must be in the\n"
            "  # manifest's capabilities.shell.allow. `{{ task }}` is the task's text.\n"
            "  - id: answer\n"
            "    shell: [echo, \"received: {{ task }}\"]\n"
            "\n"
            "# The task's answer: a template over the task and the steps' results.\n"
            "output: \"{{ steps.answer.stdout }}\"\n"
        ),
        "README.md": (
            f"# {name}\n"
            "\n"
            "A plan capsule made by `mur new`. It answers every task with `received: <task>`.\n"
            "\n"
            "```bash\n"
            f"cd {name}\n"
            "mur build        # packs "
            f"{name}-{SCAFFOLD_VERSION}.mur.zip\n"
            "mur install      # installs it into .murmur/artifacts/ as "
            f"local/{name}\n"
            "mur list         # shows scope, name, version and sha256\n"
            "mur run --task \"hello\"\n"
            "```\n"
        ),
    }


def check_name(name: str) -> None:
    """Refuse a name ``mur new`` cannot use (``E-NEW-002``)."""
    if not is_capsule_name(name):
        raise DiagnosticError(error(
            "E-NEW-002", f"`{name}` is not a valid capsule name",
            hint="use lowercase letters, digits and `-` (not first or last), at most 100 characters"))


def _exists(target: Path) -> DiagnosticError:
    return DiagnosticError(error(
        "E-NEW-003", f"{target} already exists; `mur new` never writes over anything",
        path=str(target), hint="choose another name, or remove the existing path"))


def write_capsule_scaffold(name: str, dest: Path) -> Path:
    """Write ``<dest>/<name>/`` holding a plan capsule; return its path.

    Raises:
        DiagnosticError: ``E-NEW-002`` bad name; ``E-NEW-003`` the path exists (nothing is
        written); ``E-IO-002``/``E-IO-003`` when writing fails (nothing is left behind).
    """
    check_name(name)
    return write_new_tree(dest / name, capsule_files(name))


def write_new_tree(target: Path, files: Mapping[str, str]) -> Path:
    """Create the directory ``target`` holding ``files`` (relative path → text), all or nothing.

    The files are written (and fsynced) in a temporary sibling directory, which is then renamed
    to ``target``; ``mur new`` never writes over anything (spec/manifest.md "The scaffold").

    Raises:
        DiagnosticError: ``E-NEW-003`` when ``target`` exists, before or after the files were
        written (nothing is left behind); ``E-IO-002`` permission denied, ``E-IO-003`` any
        other write failure (the temporary directory is removed).
    """
    if target.exists() or target.is_symlink():
        raise _exists(target)
    tmp = target.parent / f".{target.name}.tmp-{uuid7_hex()}"
    try:
        tmp.mkdir(mode=0o755)
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        # os.rename onto an existing non-empty directory fails; onto an empty one it would
        # replace it, so this check narrows the race to a directory made in between, empty.
        if target.exists() or target.is_symlink():
            raise _exists(target)
        os.rename(tmp, target)
    except DiagnosticError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except PermissionError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DiagnosticError(error(
            "E-IO-002", f"cannot write {target}: permission denied ({exc.filename})",
            hint=oserror_hint(exc, target.parent))) from None
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if target.exists():
            raise _exists(target) from None
        raise DiagnosticError(error("E-IO-003", f"cannot write {target}: {exc.strerror or exc}",
                                    hint=oserror_hint(exc, target.parent))) from None
    return target
