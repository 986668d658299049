"""Headless Chromium for the page tests and benchmarks/trace.py (Debian's ``chromium``).

Every start gets a fresh ``--user-data-dir`` and the flags that keep it offline and quiet.
Console messages (errors included) reach stderr as ``…:CONSOLE…`` lines (``--enable-logging``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def binary() -> str | None:
    """The chromium executable, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, *extra: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    exe = binary()
    assert exe is not None, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="murmur-chromium-") as profile:
        return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra,
                               page.resolve().as_uri()], capture_output=True, text=True, timeout=timeout, check=False)


def dump_dom(page: Path) -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and every console line Chromium logged."""
    out = _run(page, "--dump-dom")
    return out.stdout, console_lines(out.stderr)


def console_lines(stderr: str) -> list[str]:
    """The console messages in Chromium's log."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def screenshot(page: Path, out: Path, size: str = "1400,1100") -> Path:
    """A PNG of the page at ``size``."""
    _run(page, f"--window-size={size}", f"--screenshot={out}", "--hide-scrollbars")
    return out
