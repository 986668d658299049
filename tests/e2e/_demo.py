"""Helpers for the ``mur demo`` e2e tests: a fixture tree with known contents, the demo as a
real process, and the process table.

Every process a demo starts carries the test's unique temporary directory somewhere in its
command line or environment (``MURMUR_HOME`` lies under it; shell commands get a ``HOME``
under it; the audited tree is under it), so :func:`ours` finds them all, and
:func:`kill_ours` ends them whatever happened.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

# path -> contents. Lines (wc -l, text files only): 4 + 0 + 6 + 2 + 5 + 3 + 1 = 21 in 9 files
# (7 text, 2 binary; 5 Python).
FIXTURE: dict[str, bytes] = {
    "README.md": b"# Fixture\n\nTODO: write the docs\nNot a marker: TODOS\n",
    "pkg/__init__.py": b"",
    "pkg/app.py": b"import os\n\n\ndef main():\n    # TODO: parse arguments\n    return 1\n",
    "pkg/broken.py": b"def broken(:\n    pass\n",
    "pkg/util.py": b"import json\nimport sys\n\n# FIXME: handle errors\nprint(json.dumps(sys.argv))\n",
    "data/table.csv": b"a,b\n1,2\n3,4\n",
    "data/blob.bin": b"\x00\x01TODO binary\n\x00",  # binary: a file, but no lines
    "data/image.png": b"\x89PNG\r\n\x1a\n\x00" + b"\n" * 40,  # binary, never "the largest file"
    "pkg/odd\nname.py": b"x = 1\n",  # a newline in a name: one file, never two
    # never audited: cache and VCS directories
    "__pycache__/app.cpython-311.pyc": b"\x00junk TODO\n",
    ".git/config": b"[core]\n# TODO not here\n",
}


def make_fixture(root: Path) -> Path:
    """Write :data:`FIXTURE` under ``root/tree`` and return that directory."""
    tree = root / "tree"
    for rel, data in FIXTURE.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return tree


def linter() -> str:
    """Which linter the demo's checks will find (they run the python3 beside this interpreter)."""
    if importlib.util.find_spec("pyflakes") is not None:
        return "pyflakes"
    if importlib.util.find_spec("ruff") is not None:
        return "ruff"
    return "none"


def linter_version(name: str) -> str:
    """``pyflakes 3.2.0`` / ``ruff 0.17.6`` as the child reports it."""
    out = subprocess.run([sys.executable, "-m", name, "--version"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return f"pyflakes {out.split()[0]}" if name == "pyflakes" else out


def slow_bin(root: Path) -> Path:
    """A directory holding a ``wc`` that sleeps first: it keeps the inventory member busy."""
    real = shutil.which("wc")
    assert real is not None
    d = root / "slowbin"
    d.mkdir()
    (d / "wc").write_text(f"#!/bin/sh\nsleep 120\nexec {real} \"$@\"\n")
    (d / "wc").chmod(0o755)
    return d


def demo_env(slowbin: Path | None = None) -> dict[str, str]:
    """The test's environment for ``mur demo`` (optionally with the slow ``wc`` first on PATH)."""
    env = dict(os.environ)
    if slowbin is not None:
        env["PATH"] = f"{slowbin}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def ours(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line or environment mentions ``marker``."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        stat = _read(f"/proc/{entry}/stat")
        if not stat or stat.rpartition(b")")[2].split()[:1] == [b"Z"]:
            continue
        if needle in _read(f"/proc/{entry}/cmdline") or needle in _read(f"/proc/{entry}/environ"):
            found.append(int(entry))
    return found


def wait_gone(marker: str, within: float) -> list[int]:
    """Wait up to ``within`` seconds for :func:`ours` to be empty; return what is left."""
    end = time.monotonic() + within
    left = ours(marker)
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = ours(marker)
    return left


def kill_ours(marker: str) -> None:
    """SIGKILL every process :func:`ours` finds (teardown)."""
    for pid in ours(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running_demo(args: list[str], marker: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``mur demo ARGS`` as a process in a session of its own; stderr goes to a file.

    Yields:
        tuple: the process and the path of its stderr file.
    """
    err_path = marker / "demo.stderr"
    with err_path.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "murmur.cli.mur", "demo", *args], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
    try:
        yield proc, err_path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        kill_ours(str(marker))


def wait_for_line(err_path: Path, needle: str, proc: subprocess.Popen[bytes], within: float = 120.0) -> str:
    """Wait until the demo's stderr holds a line containing ``needle``; return that line."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        for line in err_path.read_text(errors="replace").splitlines():
            if needle in line:
                return line
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"no line with {needle!r}; stderr:\n{err_path.read_text(errors='replace')}")
