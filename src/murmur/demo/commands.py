"""The commands the demo runs and the environment it runs them in (pure).

Each is the command a user would type (``mur install -g``, ``mur-roost``, ``mur run``); the
``--keep`` script prints the same ones.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from murmur.demo.layout import DESK, DESK_URL_ENV, VERSION, Layout, task_text

_DROPPED_ENV_PREFIXES = ("MURMUR_FORMATION_", "MURMUR_SPAWNER")
_DROPPED_ENV = frozenset({"MURMUR_HOME", "MURMUR_ROOST_URL", "MURMUR_MUR_BINARY", DESK_URL_ENV})


def child_environment(environ: Mapping[str, str], layout: Layout, python_dir: Path | None) -> dict[str, str]:
    """The environment of every process the demo starts (before role-specific additions).

    The caller's environment, minus the variables the demo owns or that would turn its
    processes into something else (``MURMUR_HOME``, ``MURMUR_ROOST_URL``,
    ``MURMUR_MUR_BINARY``, ``MURMUR_FORMATION_*``, ``MURMUR_SPAWNER*``, ``AUDIT_DESK_URL``),
    plus ``MURMUR_HOME`` = the private home. When ``python_dir`` holds a ``python3`` it is
    put first on ``PATH``, so the checks run with the Python that runs murmur.

    Args:
        environ (Mapping[str, str]): the demo's own environment.
        layout (Layout): the demo's directories.
        python_dir (Path | None): the running interpreter's directory.
    """
    env = {
        k: v for k, v in environ.items()
        if k not in _DROPPED_ENV and not k.startswith(_DROPPED_ENV_PREFIXES)
    }
    env["MURMUR_HOME"] = str(layout.home)
    path = env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    if python_dir is not None and (python_dir / "python3").exists():
        parts = [p for p in path.split(os.pathsep) if p and Path(p) != python_dir]
        path = os.pathsep.join([str(python_dir), *parts])
    env["PATH"] = path
    return env


def _script_beside_interpreter(name: str, module: str) -> list[str]:
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


def mur_binary() -> list[str]:
    """``mur`` beside the running interpreter, else ``python -m murmur.cli.mur``."""
    beside = Path(sys.executable).parent / "mur"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "murmur.cli.mur"]


def roost_binary() -> list[str]:
    """``mur-roost`` beside the running interpreter, else the same entry point via ``python -c``."""
    return _script_beside_interpreter("mur-roost", "murmur.cli.roost")


def install_command(mur: Sequence[str], capsule_dir: Path) -> list[str]:
    """``mur install -g <capsule dir>`` (builds the archive, then installs it globally)."""
    return [*mur, "install", "-g", str(capsule_dir)]


def roost_command(roost: Sequence[str], layout: Layout, port: int = 0) -> list[str]:
    """mur-roost on ``port`` (0: a free one), reading the private store, admitting the desk."""
    return [*roost, "--port", str(port), "--registry-path", str(layout.artifacts),
            "--spawn-allow", DESK]


def desk_command(mur: Sequence[str], layout: Layout) -> list[str]:
    """The check desk: an ordinary session of ``local/audit-desk`` that prints its readiness line."""
    return [*mur, "run", "--capsule", f"local/{DESK}", "--capsule-version", VERSION,
            "--workdir", str(layout.desk_workdir), "--project-dir", str(layout.project),
            "--no-env-file", "--json"]


def formation_command(mur: Sequence[str], layout: Layout, target: Path) -> list[str]:
    """The formation: ``mur run --roster <project> --task "audit <target>" --json``."""
    return [*mur, "run", "--roster", str(layout.project), "--task", task_text(target),
            "--no-env-file", "--json"]


def parse_roost_port(line: bytes) -> int | None:
    """The port in ``mur-roost: listening on 127.0.0.1:<port>``, or None for any other line."""
    text = line.decode("utf-8", "replace").strip()
    prefix = "mur-roost: listening on 127.0.0.1:"
    if not text.startswith(prefix):
        return None
    digits = text[len(prefix):]
    return int(digits) if digits.isdigit() else None


def rerun_script(layout: Layout, target: Path) -> list[str]:
    """Shell lines that rerun the kept demo by hand (``--keep``), one command each."""
    q = shlex.quote
    home = q(str(layout.home))
    return [
        f"export MURMUR_HOME={home}",
        f"mur-roost --port 7700 --registry-path {q(str(layout.artifacts))} --spawn-allow {DESK} &",
        (f"MURMUR_ROOST_URL=http://127.0.0.1:7700 mur run --capsule local/{DESK} "
         f"--capsule-version {VERSION} --workdir {q(str(layout.desk_workdir))} "
         f"--project-dir {q(str(layout.project))} &"
         "    # prints `murmur: url http://127.0.0.1:<port>`"),
        (f"AUDIT_DESK_URL=http://127.0.0.1:<port> mur run --roster {q(str(layout.project))} "
         f"--task {q(task_text(target))}"),
        "mur ps          # then stop the desk (mur stop <session>) and mur-roost (kill %1)",
    ]
