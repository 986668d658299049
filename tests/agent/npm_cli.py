"""The real agent CLIs, installed from npm into ``.ci-npm/`` (a cache in the repository).

:func:`npm_bin` returns the directory holding a CLI's executable, installing the package
spec listed in ``.ci/npm-clis.txt`` when it is missing (``.ci/run`` installs them all before
the tests). When npm cannot reach its registry the calling test is skipped with the reason
printed; any other install failure fails the test.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFIX = ROOT / ".ci-npm"
SPECS = ROOT / ".ci" / "npm-clis.txt"
INSTALL_BOUND = 600  # seconds an npm install may take


def _spec(package: str) -> str:
    for line in SPECS.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line == package or line.startswith(package + "@"):
            return line
    return package


def npm_bin(package: str, binary: str) -> Path:
    """The ``node_modules/.bin`` directory holding ``binary`` from ``package``."""
    bin_dir = PREFIX / "node_modules" / ".bin"
    if (bin_dir / binary).exists():
        return bin_dir
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed, so the real {binary} CLI cannot be installed")
    spec = _spec(package)
    res = subprocess.run(
        [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--loglevel=error", spec],
        capture_output=True, text=True, timeout=INSTALL_BOUND, check=False,
    )
    if res.returncode != 0 or not (bin_dir / binary).exists():
        ping = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=60, check=False)
        if ping.returncode != 0:
            reason = f"the npm registry is unreachable (npm ping: {ping.stderr.strip()[-200:]}); cannot install {spec}"
            print(reason)
            pytest.skip(reason)
        pytest.fail(f"npm install {spec} failed: {res.stderr.strip()[-1000:]}")
    return bin_dir
