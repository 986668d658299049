"""Which class a session runs at, and how a refused exec reads (pure; spec/containment.md).

The class is the strongest of: the manifest's floor (``capabilities.containment``), ``mur run
--containment``, the parent's class (a delegated child or formation member never runs below
the session that started it: ``MURMUR_SANDBOX_FLOOR``, set by the runtime), and
``MURMUR_SANDBOX_CLASS`` (an operator's or a test suite's raise). No source: advisory.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping

from murmur.manifest import Containment

__all__ = ["CLASS_ENV", "FLOOR_ENV", "class_problem", "class_source", "denied_exec", "explain", "meaning",
           "resolve_class", "shim", "strongest"]

FLOOR_ENV = "MURMUR_SANDBOX_FLOOR"
"""Runtime-owned: the class of the session that started this one (the envelope's containment axis)."""

CLASS_ENV = "MURMUR_SANDBOX_CLASS"
"""An operator's (or a test suite's) raise of every session's class: ``advisory|scoped|sealed``."""

_DENIED = re.compile(r"(?:^|[\s'\"])([^\s:'\"]+)['\"]?: (?:Permission denied)|Permission denied: '([^']+)'")


def strongest(classes: Iterable[Containment | None]) -> Containment:
    """The strongest of ``classes`` (advisory when none is given)."""
    best = Containment.ADVISORY
    for c in classes:
        if c is not None and c.rank > best.rank:
            best = c
    return best


def class_problem(text: str | None) -> str | None:
    """Why ``text`` names no class (None when it is empty or a class)."""
    if not text:
        return None
    if text.strip().lower() in ("advisory", "scoped", "sealed"):
        return None
    return f"`{text}` names no containment class (advisory, scoped or sealed)"


def _parse(text: str | None) -> Containment | None:
    if not text or class_problem(text):
        return None
    return Containment(text.strip().lower())


def resolve_class(floor: Containment | None, flag: str | None = None,
                  environ: Mapping[str, str] | None = None) -> Containment:
    """The class a session runs at (see the module docstring)."""
    env = os.environ if environ is None else environ
    return strongest([floor, _parse(flag), _parse(env.get(FLOOR_ENV)), _parse(env.get(CLASS_ENV))])


def class_source(floor: Containment | None, flag: str | None = None,
                 environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """What set the class :func:`resolve_class` gives, and what would lower it; None under advisory.

    Returns:
        tuple[str, str] | None: ``(source, how to lower it)``, e.g. ``("mur run --containment
        sealed", "drop `--containment sealed`")``. On a tie the first of the manifest's floor,
        the flag, the parent's class and ``MURMUR_SANDBOX_CLASS`` is named.
    """
    env = os.environ if environ is None else environ
    klass = resolve_class(floor, flag, env)
    if klass is Containment.ADVISORY:
        return None
    v = klass.value
    if floor is klass:
        return (f"capabilities.containment: {v}",
                "lower `capabilities.containment` in murmur.yaml (or leave it out: advisory)")
    if _parse(flag) is klass:
        return f"mur run --containment {v}", f"drop `--containment {v}`"
    if _parse(env.get(FLOOR_ENV)) is klass:
        return ("the parent session's class",
                "a delegated child or member never runs below its parent: lower the parent's class")
    return f"{CLASS_ENV}={v}", f"unset {CLASS_ENV} (it raises every session's class)"


def meaning(klass: Containment) -> str:
    """What ``klass`` holds a capsule's commands to, in a few words (``mur doctor``'s line)."""
    if klass is Containment.SEALED:
        return ("the kernel holds its commands to its grants (Landlock, seccomp, a network namespace) "
                "inside a root of their own: the workdir, the runtime trees, a fixed /etc and /dev")
    if klass is Containment.SCOPED:
        return ("the kernel holds its commands to its grants (Landlock, seccomp, a network namespace) "
                "over the host's filesystem")
    return "only capabilities.shell.allow is checked, by the name a command starts; `sh -c` runs anything"


_SHIM = re.compile(r"(/\S+/shims/([^\s:/]+)): line \d+: /\S+/libexec/(pyenv|rbenv|nodenv|goenv|plenv)\S*: "
                   r"Permission denied")


def shim(stderr: bytes | str, klass: str) -> str | None:
    """The sentence for a granted name that is a version manager's shim (pyenv, rbenv, …), or None.

    A shim (``~/.pyenv/shims/python3``) is a script that execs its manager's own scripts to
    find the real program; the sandbox grants the name's file, not the manager, so the shim's
    ``exec`` of ``…/libexec/pyenv`` is refused. Granting the manager would not help (it runs
    many more); the real interpreter's directory first on ``PATH`` does.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    m = _SHIM.search(text)
    if m is None:
        return None
    path, name, manager = m.group(1), m.group(2), m.group(3)
    return (f"putting the real `{name}`'s directory first on PATH (`$({manager} prefix)/bin`, or a venv's "
            f"bin) would allow it: `{name}` on PATH is a {manager} shim ({path}), and the {klass} sandbox "
            f"refused the {manager} scripts it runs, which no grant of `{name}` covers")


def denied_exec(stderr: bytes | str, allow: Iterable[str], search_path: str = "") -> str | None:
    """The binary a confined command was refused ``exec`` of, read from its stderr, or None.

    Shells word it ``sh: 1: ls: Permission denied`` or ``bash: line 1: /usr/bin/ls: Permission
    denied``; Python ``PermissionError: [Errno 13] Permission denied: 'ls'``. Only a name
    that is not in ``allow`` and is found on ``search_path`` counts.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    granted = set(allow)
    for m in _DENIED.finditer(text):
        said = m.group(1) or m.group(2) or ""
        name = os.path.basename(said)
        if not name or name in granted:
            continue
        found = said if "/" in said else (shutil.which(name, path=search_path) if search_path else None)
        if found is None or not _is_program(found):  # else a read of a data file was refused
            continue
        return name
    return None


def _is_program(path: str) -> bool:
    """An executable file the kernel would run: ELF or ``#!`` (not a data file with an x bit)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4).startswith((b"\x7fELF", b"#!"))
    except OSError:
        return False


_PATH_DENIED = re.compile(r"(/[^\s:'\"]+)['\"]?: (Permission denied|No such file or directory)"
                          r"|(?:Permission denied|No such file or directory): '(/[^']+)'")


def explain(stderr: bytes | str, klass: str, workdir: str, read_only: Iterable[str] = (),
            scope: str = ".") -> str | None:
    """One sentence saying first which grant would allow a path the sandbox refused, then what
    it refused; None when no refused path is the sandbox's doing.

    A path in the command's stderr that was refused (``Permission denied``; under sealed also
    ``No such file or directory`` for a path that exists on the host: it is absent from the
    composed root) and lies outside the workdir grant, or under a ``filesystem.read_only``
    path, is explained. Shapes::

        removing `RO` from capabilities.filesystem.read_only would allow it: the scoped sandbox refused `PATH`, …
        running at containment advisory (…) would allow it, or copying it into the workdir: the scoped sandbox refused `PATH`, …
        running at containment advisory (…) would allow it, …: the sealed sandbox has no `PATH`: its root holds only …
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    root = workdir.rstrip("/") + "/"
    for m in _PATH_DENIED.finditer(text):
        path = m.group(1) or m.group(3)
        missing = (m.group(2) or "") == "No such file or directory" or "No such file" in m.group(0)
        if missing and (klass != "sealed" or not os.path.lexists(path)):
            continue
        ro = next((p for p in read_only if path == p or path.startswith(p.rstrip("/") + "/")), None)
        if ro is not None:
            return (f"removing `{ro}` from capabilities.filesystem.read_only would allow it: the {klass} "
                    f"sandbox refused `{path}`, which is under that read-only path")
        if not (path + "/").startswith(root):
            grant = ("running at containment advisory (`capabilities.containment`, `mur run --containment`) "
                     "would allow it, or copying it into the workdir")
            if missing:
                return (f"{grant}: the sealed sandbox has no `{path}`: its root holds only the workdir, "
                        "the runtime trees, the fixed /etc grant and /dev")
            return (f"{grant}: the {klass} sandbox refused `{path}`, which is outside the workdir grant "
                    f"(capabilities.filesystem.scope `{scope}` of {workdir})")
    return None
