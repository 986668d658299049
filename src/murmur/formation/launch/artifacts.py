"""The artifact re-hash run just before a formation member starts (``E-RUN-047``, spec/formation.md).

Admission bound the launch to each member's installed artifact by its SHA-256; a member whose
artifact changed, or can no longer be read, between admission and its start is refused.
"""

from __future__ import annotations

import hashlib
import os

import trio

from murmur.formation.launch.supervise import Verify


def artifact_check(archive: os.PathLike[str] | None, sha256: str) -> Verify | None:
    """A re-hash of ``archive`` against the admitted ``sha256`` (run in a worker thread).

    Returns:
        Verify | None: an awaitable check (None: unchanged; else the reason), or None when the
        member has no installed artifact (a capsule run from its source directory).
    """
    if archive is None:
        return None
    path = os.fspath(archive)

    def digest() -> str:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
        except OSError:
            return ""
        return h.hexdigest()

    async def check() -> str | None:
        now = await trio.to_thread.run_sync(digest)
        if now == sha256:
            return None
        if not now:
            return f"its installed artifact {path} can no longer be read"
        return f"its installed artifact {path} changed since admission"

    return check
