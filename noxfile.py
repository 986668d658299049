"""nox sessions: tests, lint, typecheck, demo."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]  # also: demo, soak, loaded
PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite (what CI runs)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, including the async rules."""
    session.install("ruff==0.17.6")
    session.run("ruff", "check", "src", "tests", "benchmarks", "noxfile.py")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over src/."""
    session.install("-e", ".", "mypy==2.4.1")
    session.run("mypy")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The main job: the example formation auditing a source tree (default: murmur itself).

    A regular (non-editable) install, so the example capsules are found as package data the
    way a user's `pip install murmur` finds them. Arguments pass through: `nox -s demo -- PATH`.
    """
    session.install(".")
    session.run("mur", "demo", *session.posargs)


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """The long repetition loops (the `soak` marker), which the default run leaves out."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-m", "soak", *session.posargs)


@nox.session(python=PYTHON)
def loaded(session: nox.Session) -> None:
    """The whole suite three times back to back, with a busy loop on every core (issue 32).

    Proves that no test depends on an idle machine: each run must be green. The busy loops
    are plain Python processes (no extra package), started before the first run and killed
    after the last, whatever happened. ``nox -s loaded -- -x`` passes arguments to pytest.
    """
    import os
    import subprocess
    import sys

    session.install("-e", ".[test]")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        for run in range(3):
            session.log(f"loaded run {run + 1} of 3 ({len(hogs)} busy loops)")
            session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *session.posargs)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
