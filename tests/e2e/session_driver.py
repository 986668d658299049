"""Test driver: `mur` with a workload whose teardown never ends (for the guard and 2nd signal).

Usage: ``python session_driver.py run [mur run options]``. Every task prints nothing, waits
forever, and on cancellation waits forever again in a shielded scope, so only the second
signal or the 20 s guard can end the process.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import trio

from murmur.assembly import compose
from murmur.manifest.model import Manifest
from murmur.workload import TaskContext, TaskOutcome


class StuckWorkload:
    """Starts, then never finishes, not even when cancelled."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Hang; hang harder when cancelled."""
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep_forever()
        return TaskOutcome("ok", "never")  # pragma: no cover


def _stuck(manifest: Manifest, capsule_root: Path, environ: Mapping[str, str], **_: object) -> StuckWorkload:
    return StuckWorkload()


compose.load_workload = _stuck  # type: ignore[assignment]

if __name__ == "__main__":
    from murmur.cli.mur import main

    sys.exit(main(sys.argv[1:]))
