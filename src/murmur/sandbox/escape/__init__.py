"""The escape-conformance harness behind ``mur doctor --escape`` (spec/containment.md, "Verification").

:func:`run` / :func:`run_sync` (:mod:`~murmur.sandbox.escape.runner`) grade the
:data:`CASES` (:mod:`~murmur.sandbox.escape.cases`) against each class this host backs, each
beside its advisory negative control.
"""

from murmur.sandbox.escape.cases import CASES, Case
from murmur.sandbox.escape.runner import Report, Verdict, run, run_sync

__all__ = ["CASES", "Case", "Report", "Verdict", "run", "run_sync"]
