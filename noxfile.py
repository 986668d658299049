"""nox sessions: tests, lint, typecheck, demo."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite (what CI runs)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


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
