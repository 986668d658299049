"""Refusals a new user met without a hint line (issue 32, item 3), through the real CLIs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _mur(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mur"), *args], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=60)


def test_bare_mur_agent(tmp_path: Path) -> None:
    out = _mur("agent", cwd=tmp_path)
    assert out.returncode == 2
    assert "error[E-CLI-001]: `mur agent` needs a subcommand" in out.stderr
    assert "hint: `mur agent who --can BINARY`" in out.stderr


@pytest.mark.parametrize("url", ["garbage", "127.0.0.1:7700", "http://127.0.0.1"])
def test_a_roost_url_that_is_no_url(tmp_path: Path, url: str) -> None:
    """A delegating capsule with MURMUR_ROOST_URL=garbage: the URL's fault, not "did not answer"."""
    home = {"MURMUR_HOME": str(tmp_path / "home")}
    assert _mur("new", "boss", cwd=tmp_path, env=home).returncode == 0
    manifest = tmp_path / "boss" / "murmur.yaml"
    manifest.write_text(manifest.read_text().replace("capabilities:\n", "capabilities:\n  spawn:\n    allow: [kid]\n", 1))
    out = _mur("run", "--manifest", "boss", "--task", "hi", cwd=tmp_path, env={**home, "MURMUR_ROOST_URL": url})
    assert out.returncode == 1
    assert "error[E-RUN-019]" in out.stderr and f'MURMUR_ROOST_URL is "{url}"' in out.stderr
    assert "did not answer" not in out.stderr
    assert "hint: set MURMUR_ROOST_URL to the base URL" in out.stderr
