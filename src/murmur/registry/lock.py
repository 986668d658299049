"""``murmur.lock``: a project's pins of exact artifacts (version and sha256).

Format (YAML, written by ``mur install --pin``, editable by hand)::

    # murmur.lock: ...
    lock_version: 1
    pins:
      local/demo:
        version: 0.1.0
        sha256: 9f2c...   # 64 lowercase hex digits

Every resolution in the project reads it (:func:`check_pin`); a pinned artifact whose
resolved version or sha256 differs is refused with ``E-REG-005``. Resolving never writes
the lock. A lock that cannot be read or parsed is ``E-REG-008``.
Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import attrs

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.manifest import VERSION_RE, YMap, YStr, as_int, parse_located, position
from murmur.userfile import UserFileError, read_user_text

LOCK_FILE = "murmur.lock"
LOCK_VERSION = 1
MAX_LOCK_BYTES = 1 << 20
"""A larger lock file is refused unread (``E-REG-008``)."""
_SHA_RE = re.compile(r"[0-9a-f]{64}")
_REF_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?/[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?")


@attrs.frozen
class Pin:
    """One pinned artifact: ``ref`` (``local/<name>``) at ``version`` with ``sha256``."""

    ref: str
    version: str
    sha256: str


def lock_path(project_dir: Path | None = None) -> Path:
    """``<project>/murmur.lock`` (default: the current directory)."""
    return (project_dir or Path.cwd()) / LOCK_FILE


def read_lock(path: Path) -> dict[str, Pin]:
    """The pins in a lock file, by ref; empty when the file does not exist.

    Raises:
        DiagnosticError: ``E-REG-008`` (with line) when the file is unreadable or malformed.
    """
    try:
        text = read_user_text(path, limit=MAX_LOCK_BYTES)
    except UserFileError as exc:
        if exc.kind == "missing":
            return {}
        raise DiagnosticError(
            error("E-REG-008", f"murmur.lock cannot be read ({exc.reason})", path=str(path))
        ) from None
    return parse_lock(text, path=str(path))


def parse_lock(text: str, *, path: str) -> dict[str, Pin]:
    """Parse lock text; see the module docstring for the format."""
    root = parse_located(text, path=path, code="E-REG-008")
    if root is None:
        return {}
    faults: list[Diagnostic] = []

    def fault(msg: str, at: object, hint: str | None = None) -> None:
        line, col = position(at)
        faults.append(error("E-REG-008", msg, hint=hint, path=path, line=line, col=col))

    if not isinstance(root, YMap):
        fault("murmur.lock must be a mapping with `lock_version` and `pins`", root)
        raise DiagnosticError(faults)
    for key in root:
        if key not in ("lock_version", "pins"):
            line, col = root.key_pos[key]
            faults.append(error("E-REG-008", f"unknown key `{key}` in murmur.lock", path=path,
                                line=line, col=col))
    if as_int(root.get("lock_version")) != LOCK_VERSION:
        fault(f"murmur.lock needs `lock_version: {LOCK_VERSION}`", root.get("lock_version", root))
    pins: dict[str, Pin] = {}
    body = root.get("pins", YMap())
    if not isinstance(body, YMap):
        fault("`pins` must map artifact names to {version, sha256}", body)
        raise DiagnosticError(faults)
    for ref, entry in body.items():
        line, col = body.key_pos[ref]
        if not _REF_RE.fullmatch(ref):
            faults.append(error("E-REG-008", f"`{ref}` is not a scoped artifact name", path=path,
                                line=line, col=col, hint="write `local/<name>`"))
            continue
        if not isinstance(entry, YMap) or set(entry) != {"version", "sha256"}:
            faults.append(error("E-REG-008", f"pin `{ref}` must hold exactly `version` and `sha256`",
                                path=path, line=line, col=col))
            continue
        version, sha = entry["version"], entry["sha256"]
        if not isinstance(version, YStr) or not VERSION_RE.fullmatch(version):
            fault(f"pin `{ref}` has an invalid version", version)
            continue
        if not isinstance(sha, YStr) or not _SHA_RE.fullmatch(sha):
            fault(f"pin `{ref}` has an invalid sha256 (64 lowercase hex digits)", sha)
            continue
        pins[ref] = Pin(ref, str(version), str(sha))
    if faults:
        raise DiagnosticError(faults)
    return pins


def check_pin(pins: dict[str, Pin], ref: str, version: str, sha256: str, *, where: str) -> None:
    """Refuse (``E-REG-005``) a resolution that disagrees with a pin for ``ref``."""
    pin = pins.get(ref)
    if pin is None:
        return
    if pin.version != version:
        raise DiagnosticError(error(
            "E-REG-005",
            f"murmur.lock pins {ref} at version {pin.version}, but version {version} was resolved",
            path=where,
            hint=f"ask for {ref}@{pin.version}, or re-pin with `mur install --pin`"))
    if pin.sha256 != sha256:
        raise DiagnosticError(error(
            "E-REG-005",
            f"{ref}@{version} resolves to sha256 {sha256}, but murmur.lock pins sha256 {pin.sha256}",
            path=where,
            hint="install the pinned artifact, or re-pin with `mur install --pin`"))


def render_lock(pins: dict[str, Pin]) -> str:
    """Lock text for ``pins`` (sorted by ref; stable bytes for the same pins)."""
    lines = [
        "# murmur.lock: the exact artifacts this project runs (see spec/artifacts.md).",
        "# Written by `mur install --pin`; every resolution checks it, none writes it.",
        f"lock_version: {LOCK_VERSION}",
    ]
    if not pins:
        lines.append("pins: {}")
    else:
        lines.append("pins:")
        for ref in sorted(pins):
            p = pins[ref]
            lines += [f"  {ref}:", f'    version: "{p.version}"', f"    sha256: {p.sha256}"]
    return "\n".join(lines) + "\n"


def write_pin(path: Path, pin: Pin) -> None:
    """Add or replace one pin in the lock at ``path`` (atomic: temp file + rename)."""
    pins = read_lock(path)
    pins[pin.ref] = pin
    fd, tmp = tempfile.mkstemp(prefix=".murmur.lock.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render_lock(pins))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
