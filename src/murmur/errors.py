"""The error tree of murmur.

::

    MurmurError
    └── DiagnosticError        one or more coded diagnostics (bad input, refusals)
        └── UsageError         command-line misuse (exit status 2)

A ``DiagnosticError`` is what every refusal raises: it carries the coded diagnostics the
CLI renders (``error[E-XXX-NNN]: message`` + location + hint).
"""

from __future__ import annotations

from collections.abc import Iterable

from murmur.diagnostics import Diagnostic


class MurmurError(Exception):
    """Root of every error murmur raises on purpose."""


class DiagnosticError(MurmurError):
    """A refusal carrying one or more coded diagnostics.

    Args:
        diagnostics (Diagnostic | Iterable[Diagnostic]): what went wrong, in report order.
        exit_status (int): the process exit status the CLI uses (default 1).
    """

    def __init__(
        self, diagnostics: Diagnostic | Iterable[Diagnostic], *, exit_status: int = 1
    ) -> None:
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        self.exit_status = exit_status
        super().__init__("\n".join(d.render() for d in self.diagnostics))

    @property
    def code(self) -> str:
        """The code of the first diagnostic."""
        return self.diagnostics[0].code


class UsageError(DiagnosticError):
    """Command-line misuse; exits with status 2."""

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]) -> None:
        super().__init__(diagnostics, exit_status=2)

