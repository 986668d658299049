"""The warm starter's path: a confinement crosses as JSON and is rebuilt and applied (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from murmur import procs
from murmur.manifest import Containment
from murmur.sandbox import compiled
from murmur.sandbox.host import probe
from murmur.sandbox.policy import Policy


async def test_a_rebuilt_confinement_confines_like_the_original(tmp_path: Path) -> None:
    if probe().lacks(Containment.SCOPED):
        pytest.skip("this host cannot back scoped")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret").write_text("s")
    box = compiled.compile(Policy(klass=Containment.SCOPED, workdir=str(work), allow=("cat",),
                                  search_path="/usr/bin:/bin"))
    try:
        conf = box.confinement()
        assert conf is not None
        wire = json.loads(json.dumps(conf.to_wire()))  # what crosses to the starter
        assert wire["kind"] == "murmur.sandbox" and wire["module"] == "murmur.sandbox.confine"
        rebuilt = procs.from_wire(wire)
        assert rebuilt is not None
        env = {"PATH": "/usr/bin:/bin"}
        with trio.fail_after(30):
            inside = await procs.run_process(["cat", str(tmp_path / "secret")], env=rebuilt.environ(env),
                                             cwd=work, executable="/usr/bin/cat", confinement=rebuilt)
            control = await procs.run_process(["cat", str(tmp_path / "secret")], env=env, cwd=work,
                                              executable="/usr/bin/cat")
        assert control.returncode == 0 and control.stdout == b"s"
        assert inside.returncode != 0 and b"Permission denied" in inside.stderr
        assert "HTTPS_PROXY" in rebuilt.environ(env)
    finally:
        box.close()
