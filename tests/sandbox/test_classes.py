"""The class a session runs at, and how refusals read (pure)."""

from __future__ import annotations

from murmur.manifest.model import Containment
from murmur.sandbox.classes import (
    CLASS_ENV,
    FLOOR_ENV,
    class_problem,
    class_source,
    denied_exec,
    explain,
    resolve_class,
    shim,
)

A, S, X = Containment.ADVISORY, Containment.SCOPED, Containment.SEALED


def test_no_source_is_advisory() -> None:
    assert resolve_class(None, None, {}) is A


def test_the_strongest_source_wins_and_nothing_lowers() -> None:
    assert resolve_class(S, None, {}) is S
    assert resolve_class(S, "advisory", {}) is S  # a flag only raises
    assert resolve_class(None, "sealed", {}) is X
    assert resolve_class(A, None, {FLOOR_ENV: "scoped"}) is S  # the parent's class
    assert resolve_class(X, None, {FLOOR_ENV: "scoped"}) is X
    assert resolve_class(None, None, {CLASS_ENV: "sealed"}) is X


def test_the_source_of_the_class_is_named_with_what_lowers_it() -> None:
    """What set the class (the strongest source, the manifest first on a tie) and how to lower it."""
    assert class_source(None, None, {}) is None  # advisory: nothing to name
    said, lower = class_source(X, None, {})  # type: ignore[misc]
    assert said == "capabilities.containment: sealed" and "capabilities.containment" in lower
    said, lower = class_source(S, "sealed", {})  # type: ignore[misc]
    assert said == "mur run --containment sealed" and "--containment" in lower
    said, lower = class_source(None, None, {CLASS_ENV: "sealed"})  # type: ignore[misc]
    assert said == "MURMUR_SANDBOX_CLASS=sealed" and "unset MURMUR_SANDBOX_CLASS" in lower
    said, lower = class_source(A, None, {FLOOR_ENV: "scoped"})  # type: ignore[misc]
    assert said == "the parent session's class" and "parent" in lower
    assert class_source(X, None, {CLASS_ENV: "sealed"})[0] == "capabilities.containment: sealed"  # type: ignore[index]


def test_class_problem() -> None:
    assert class_problem("scoped") is None and class_problem("") is None
    assert "names no containment class" in (class_problem("strict") or "")


def test_denied_exec_reads_shell_and_python_wordings() -> None:
    assert denied_exec(b"sh: 1: ls: Permission denied\n", ["sh"], "/usr/bin:/bin") == "ls"
    assert denied_exec("bash: line 1: /usr/bin/ls: Permission denied", ["bash"], "/usr/bin:/bin") == "ls"
    assert denied_exec("PermissionError: [Errno 13] Permission denied: 'ls'", ["python3"], "/usr/bin:/bin") == "ls"
    assert denied_exec(b"sh: 1: cat: Permission denied\n", ["sh", "cat"], "/usr/bin:/bin") is None  # granted
    assert denied_exec(b"nothing\n", ["sh"], "/usr/bin") is None
    # a refused read of a file whose name is also a binary's is not an exec
    assert denied_exec(b"cat: /etc/hostname: Permission denied\n", ["sh", "cat"], "/usr/bin:/bin") is None


def test_explain_names_the_grant() -> None:
    text = explain(b"cat: /etc/secret: Permission denied\n", "scoped", "/w/work")
    assert text is not None and "outside the workdir grant" in text and "capabilities.filesystem.scope" in text
    assert text.startswith("running at containment advisory (`capabilities.containment`")  # the grant first
    ro = explain(b"sh: 1: cannot create /w/work/docs/a: Permission denied\n", "scoped", "/w/work",
                 ("/w/work/docs",))
    assert ro is not None and ro.startswith("removing `/w/work/docs` from capabilities.filesystem.read_only")
    assert explain(b"cat: /w/work/a: Permission denied\n", "scoped", "/w/work") is None  # inside: not ours
    assert explain(b"cat: /nope: No such file or directory\n", "scoped", "/w") is None


def test_explain_under_sealed_says_the_path_is_absent() -> None:
    """Sealed: a host path that is not in the composed root is absent (ENOENT), and the
    sentence says so (not "refused" as under scoped); a path absent on the host too is not ours."""
    text = explain(b"cat: /etc/hostname: No such file or directory\n", "sealed", "/w/work")
    assert text is not None and text.startswith("running at containment advisory")
    assert "the sealed sandbox has no `/etc/hostname`: its root holds only the workdir" in text
    denied = explain(b"cat: /etc/hostname: Permission denied\n", "sealed", "/w/work")
    assert denied is not None and "the sealed sandbox refused `/etc/hostname`" in denied
    assert explain(b"cat: /no/such/path: No such file or directory\n", "sealed", "/w") is None


def test_a_version_manager_shim_is_named_with_what_would_allow_it() -> None:
    """A granted ``python3`` that is a pyenv shim: the sandbox refused pyenv's own scripts, and
    the sentence says to put the real interpreter first on PATH (no grant of pyenv would do)."""
    text = shim(b"/root/.pyenv/shims/python3: line 12: /root/.pyenv/libexec/pyenv: Permission denied\n", "scoped")
    assert text == ("putting the real `python3`'s directory first on PATH (`$(pyenv prefix)/bin`, or a venv's bin) "
                    "would allow it: `python3` on PATH is a pyenv shim (/root/.pyenv/shims/python3), and the scoped "
                    "sandbox refused the pyenv scripts it runs, which no grant of `python3` covers")
    assert shim(b"sh: 1: ls: Permission denied\n", "scoped") is None  # not a shim
