"""Find, or install once, a real agent CLI from npm for the tests that drive it (issue 20).

The CLIs live in one npm prefix shared by every test run of this checkout:
``$MURMUR_TEST_NPM_PREFIX`` when set, else ``<repo>/.ci-npm`` (``.ci/run`` installs there
ahead of the tests; git ignores it). :func:`npm_cli` returns the CLI's ``bin`` path; when the
pinned version is not installed yet it runs ``npm install --prefix <prefix> <pkg>@<version>``
(under a lock file, so two test processes never install at once).

The only reason to skip is that the npm registry cannot be reached (the install failed
with a network error): then the test is skipped with that reason printed. Any other
failure (no ``npm``, a broken install) fails the test with npm's own output.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["CODEX", "NpmCli", "npm_cli", "npm_prefix"]

REPO = Path(__file__).resolve().parents[2]
PREFIX_ENV = "MURMUR_TEST_NPM_PREFIX"
INSTALL_TIMEOUT = 600.0  # seconds; a cold install of @openai/codex is ~25 s here
_NETWORK = re.compile(
    r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|"
    r"ERR_SOCKET_TIMEOUT|network request to)\b|request to \S+ failed"
)


class NpmCli:
    """One pinned npm package providing one CLI."""

    def __init__(self, package: str, version: str, bin_name: str) -> None:
        self.package = package
        self.version = version
        self.bin_name = bin_name

    def installed_version(self, prefix: Path) -> str | None:
        manifest = prefix / "node_modules" / self.package / "package.json"
        try:
            text = manifest.read_text(encoding="utf-8")
        except OSError:
            return None
        found = re.search(r'"version"\s*:\s*"([^"]+)"', text)
        return found.group(1) if found else None


CODEX = NpmCli("@openai/codex", "0.171.0", "codex")
"""The Codex CLI the Codex protocol was checked against (spec/agent.md, "Codex protocol")."""


def npm_prefix() -> Path:
    """The shared prefix: ``$MURMUR_TEST_NPM_PREFIX`` or ``<repo>/.ci-npm``."""
    value = os.environ.get(PREFIX_ENV, "").strip()
    return Path(value) if value else REPO / ".ci-npm"


def npm_cli(cli: NpmCli) -> Path:
    """The installed CLI's ``node_modules/.bin`` entry, installing it first if needed.

    Raises:
        pytest.skip.Exception: the npm registry is unreachable (reason printed).
        pytest.fail.Exception: npm is missing or the install failed for another reason.
    """
    prefix = npm_prefix()
    binary = prefix / "node_modules" / ".bin" / cli.bin_name
    if cli.installed_version(prefix) == cli.version and binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm is not on PATH: cannot install {cli.package}@{cli.version}")
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cli.installed_version(prefix) == cli.version and binary.exists():
            return binary
        print(f"installing {cli.package}@{cli.version} into {prefix} …")
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                 f"{cli.package}@{cli.version}"],
                capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm registry unreachable: installing {cli.package} took over "
                        f"{INSTALL_TIMEOUT:.0f} s")
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            cause = next((line for line in output.splitlines() if _NETWORK.search(line)), None)
            if cause is not None:
                pytest.skip(f"npm registry unreachable, {cli.package} not installed: "
                            f"{cause.strip()}")
            pytest.fail(f"npm install {cli.package}@{cli.version} failed "
                        f"(status {done.returncode}):\n{output[-2000:]}")
    if not binary.exists():
        pytest.fail(f"npm installed {cli.package} but {binary} is missing")
    return binary
