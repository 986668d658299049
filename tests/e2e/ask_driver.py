"""Test driver: `mur` whose workload asks its user through ``TaskContext.request_input``.

Usage: ``python ask_driver.py run [mur run options]``. A task whose text starts with ``ask``
asks "Which environment?" and answers ``deploying to <answer>``; any other task echoes. No
upstream built-in tool or plan step can ask (only a WASM tool importing ``request-input``,
which this runtime does not run yet), so the door's input-required flow is driven by this
test-only workload (spec/conversations.md "Input-required").
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from murmur.assembly import compose
from murmur.manifest.model import Manifest
from murmur.workload import TaskContext, TaskOutcome

PROMPT = "Which environment? (staging or prod)"


class AskWorkload:
    """Asks once for ``ask`` tasks; echoes others."""

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Ask, then answer with the reply."""
        if ctx.text.startswith("ask"):
            return TaskOutcome("ok", f"deploying to {await ctx.request_input(PROMPT)}")
        return TaskOutcome("ok", f"echo: {ctx.text}")


def _ask(manifest: Manifest, capsule_root: Path, environ: Mapping[str, str], **_: object) -> AskWorkload:
    return AskWorkload()


compose.load_workload = _ask  # type: ignore[assignment]

if __name__ == "__main__":
    from murmur.cli.mur import main

    sys.exit(main(sys.argv[1:]))
