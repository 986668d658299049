"""The escape-conformance harness behind ``mur doctor --escape`` (spec/containment.md, "Verification").

:func:`run` / :func:`run_sync` (:mod:`~murmur.escape.runner`) grade the
:data:`CASES` (:mod:`~murmur.escape.cases`) against each class this host backs, each
beside its advisory negative control.
"""

from murmur.escape.cases import CASES, Case
from murmur.escape.runner import Report, Verdict, run, run_sync

__all__ = ["CASES", "Case", "Report", "Verdict", "run", "run_sync"]
