"""Tests of the demo's run phases against stand-in commands: failures are coded and reaped."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import trio

from murmur.demo.layout import DemoOptions, prepare_layout
from murmur.demo.run import DemoRun, _StartFailed
from murmur.errors import DiagnosticError


def _run(tmp_path: Path, fake: str) -> tuple[DemoRun, io.StringIO]:
    layout, _ = prepare_layout(tmp_path / "demo")
    err = io.StringIO()
    run = DemoRun(DemoOptions(), layout, tmp_path, {"PATH": "/usr/bin:/bin"}, io.StringIO(), err)
    run.mur = [sys.executable, "-c", fake]
    return run, err


class TestPhases:
    async def test_install_failure_is_coded(self, tmp_path: Path) -> None:
        """A capsule that cannot be installed is E-DMO-002 quoting what the install said."""
        run, _ = _run(tmp_path, "import sys; sys.stderr.write('error[E-BLD-002]: nope'); sys.exit(1)")
        with pytest.raises(DiagnosticError) as info:
            await run.install()
        (d,) = info.value.diagnostics
        assert d.code == "E-DMO-002" and d.message.startswith("the example capsules could not be installed:")
        assert d.message.count("error[E-BLD-002]: nope") == 5

    async def test_desk_without_a_readiness_line(self, tmp_path: Path) -> None:
        """A desk whose first line is not JSON is a start failure; its stderr is relayed."""
        run, err = _run(tmp_path, "import sys, time; sys.stderr.write('boom\\n'); print('not json', flush=True); time.sleep(60)")
        async with trio.open_nursery() as n:
            with pytest.raises(_StartFailed) as info:
                await run.start_desk(n, "http://127.0.0.1:1")
            await run.stop_all()
        assert info.value.what == "the check desk"
        assert info.value.detail == "its first line was not a readiness line"
        assert all(not c.running for c in run.children)
        assert "[audit-desk] boom" in err.getvalue()

    async def test_desk_that_exits_early(self, tmp_path: Path) -> None:
        """A desk that exits before reporting names its exit status."""
        run, _ = _run(tmp_path, "import sys; sys.exit(4)")
        async with trio.open_nursery() as n:
            with pytest.raises(_StartFailed) as info:
                await run.start_desk(n, "http://127.0.0.1:1")
            await run.stop_all()
        assert info.value.detail == "it exited with status 4"
