"""No import cycle inside a package (issue 31): the modules of one unit form a DAG.

Every import counts, as in ``tests/test_layers.py``: top-level, inside a function and under
``TYPE_CHECKING`` (a cycle hidden there is still two modules that need each other). A package's
``__init__`` face is left out of the graph: it re-exports its modules by design, and a module
that imports its own face would show as a cycle through it. ``from pkg import mod`` counts as
an import of ``pkg.mod`` when that is a module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from test_layers import SRC, module_name, unit_of

# Strongly connected sets of modules allowed, each with why it is not fixed yet (none today).
ALLOWED: dict[frozenset[str], str] = {}


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def targets(path: Path, known: dict[str, Path]) -> Iterator[str]:
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                if f"{mod}.{a.name}" in known:
                    yield f"{mod}.{a.name}"
                elif mod in known:
                    yield mod


def graph() -> dict[str, set[str]]:
    """Module -> the modules of its own unit it imports (faces left out)."""
    known = modules()
    faces = {m for m, p in known.items() if p.name == "__init__.py"}
    out: dict[str, set[str]] = {}
    for name, path in known.items():
        if name in faces:
            continue
        out[name] = {t for t in targets(path, known)
                     if t not in faces and t != name and unit_of(t) == unit_of(name) and unit_of(name) != "murmur"}
    return out


def cycles(g: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[frozenset[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    g = graph()
    assert "murmur.session.session" in g and "murmur.session.tasks.runner" in g["murmur.session.session"]


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]


def test_no_cycle_inside_a_package() -> None:
    found = set(cycles(graph()))
    new = [sorted(c) for c in found if c not in ALLOWED]
    assert not new, f"import cycles inside a package: {new}"
    stale = [sorted(c) for c in ALLOWED if c not in found]
    assert not stale, f"ALLOWED lists cycles that are gone (remove them): {stale}"
