"""No module outside ``murmur.procs`` starts a process (issue 25, spec/architecture.md).

The scan reads every module of ``src/murmur`` with :mod:`ast` and follows what each name is
bound to by its imports (``import subprocess as sp``, ``from os import fork as f``,
``from trio.lowlevel import open_process``), so an alias does not hide a start. A start is a
call of a process starter, or a process starter handed on as a value (``partial(os.fork)``).
A planted snippet shows the scan can fail (the negative control).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "murmur"
PRIMITIVE = SRC / "procs"

STARTERS = {
    "trio.run_process",
    "trio.lowlevel.open_process",
    "subprocess.Popen",
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.popen",
    "os.posix_spawn",
    "os.posix_spawnp",
    "pty.fork",
    "pty.spawn",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    *(f"os.exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    *(f"os.spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
}


class Scan(ast.NodeVisitor):
    """What a module's names stand for (its imports, aliases followed) and the starts found:
    a call of a process starter, a starter handed to a call (``partial(os.fork)``), or any
    import of :mod:`multiprocessing`."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.found: list[tuple[int, str]] = []

    def bind(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):  # wherever they are: a lazy import counts
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.bound[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.bound[top] = top
                    if alias.name.split(".")[0] == "multiprocessing":
                        self.found.append((node.lineno, alias.name))
            elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
                for alias in node.names:
                    self.bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if node.module.split(".")[0] == "multiprocessing":
                    self.found.append((node.lineno, node.module))

    def dotted(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.bound:
            return None
        return ".".join([self.bound[node.id], *reversed(parts)])

    def visit_Call(self, node: ast.Call) -> None:
        for expr in (node.func, *node.args, *(k.value for k in node.keywords)):
            name = self.dotted(expr)
            if name in STARTERS:
                self.found.append((node.lineno, name))
        self.generic_visit(node)


def starts_in(text: str) -> list[tuple[int, str]]:
    """Every start of a process in a module's text: (line, the starter it names)."""
    tree = ast.parse(text)
    scan = Scan()
    scan.bind(tree)
    scan.visit(tree)
    return sorted(set(scan.found))


def modules_outside() -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if PRIMITIVE not in p.parents]


def test_no_module_outside_the_primitive_starts_a_process() -> None:
    """Only ``murmur.procs`` starts processes; everyone else calls it."""
    found = {
        str(p.relative_to(SRC)): starts
        for p in modules_outside()
        if (starts := starts_in(p.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_primitive_does_start_processes() -> None:
    """The scan sees the starts that are there (the primitive's own)."""
    inside = {str(p.relative_to(SRC)): starts_in(p.read_text(encoding="utf-8")) for p in sorted(PRIMITIVE.glob("*.py"))}
    assert [name for _line, name in inside["procs/owned.py"]] == ["subprocess.Popen"]
    assert {name for _line, name in inside["procs/detached.py"]} == {"subprocess.Popen", "os.fork"}


@pytest.mark.parametrize(
    ("snippet", "named"),
    [
        ("import subprocess\nsubprocess.run(['ls'])\n", "subprocess.run"),
        ("import subprocess as sp\nsp.Popen(['ls'])\n", "subprocess.Popen"),
        ("from subprocess import check_output as co\nco(['ls'])\n", "subprocess.check_output"),
        ("import os\npid = os.fork()\n", "os.fork"),
        ("from os import fork as f\nf()\n", "os.fork"),
        ("import os as o\no.posix_spawnp('ls', ['ls'], {})\n", "os.posix_spawnp"),
        ("import os\nos.execv('/bin/ls', ['ls'])\n", "os.execv"),
        ("import os\nos.spawnv(os.P_WAIT, '/bin/ls', ['ls'])\n", "os.spawnv"),
        ("import pty\npty.fork()\n", "pty.fork"),
        ("import multiprocessing\n", "multiprocessing"),
        ("import multiprocessing.pool as mp\n", "multiprocessing.pool"),
        ("from multiprocessing import Process\n", "multiprocessing"),
        ("import trio\nasync def f():\n    await trio.run_process(['ls'])\n", "trio.run_process"),
        ("import trio\nasync def f():\n    await trio.lowlevel.open_process(['ls'])\n", "trio.lowlevel.open_process"),
        ("from trio.lowlevel import open_process as op\nasync def f():\n    await op(['ls'])\n",
         "trio.lowlevel.open_process"),
        ("import trio.lowlevel as ll\nasync def f():\n    await ll.open_process(['ls'])\n", "trio.lowlevel.open_process"),
        ("def f():\n    import subprocess\n    subprocess.call(['ls'])\n", "subprocess.call"),
        ("import functools, os\nstart = functools.partial(os.fork)\n", "os.fork"),
    ],
)
def test_a_planted_start_is_found(snippet: str, named: str) -> None:
    """Negative control: each way of starting a process, aliased or not, is flagged."""
    assert named in [name for _line, name in starts_in(snippet)]


def test_what_is_not_a_start_is_not_flagged() -> None:
    """Reading ``subprocess.PIPE``, catching ``subprocess.TimeoutExpired``, naming
    ``subprocess.Popen`` as a type or calling ``os.kill`` starts nothing."""
    text = (
        "import os, subprocess\n"
        "x = subprocess.PIPE\n"
        "y: subprocess.Popen[bytes] | None = None\n"
        "try:\n    pass\nexcept subprocess.TimeoutExpired:\n    pass\n"
        "os.kill(1, 0)\nos.execution = 1\nos.execution()\n"
    )
    assert starts_in(text) == []
