"""spec/architecture.md's links stay true: every linked file exists and holds what is named.

A link in the page is ``[path: Name.attr](../src/murmur/path)`` or ``[path](../src/murmur/path)``
(issue 31, "Walkthroughs"). The file must exist; a named class, function or method must be
defined in it (``class Name`` and, for ``Name.attr``, ``def attr`` inside that class).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec" / "architecture.md"
LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)#\s]+)\)")


def links() -> list[tuple[str, str]]:
    return LINK.findall(SPEC.read_text())


def defined(tree: ast.Module, dotted: str) -> bool:
    """Whether ``dotted`` (``name`` or ``Class.name``) is defined at the top of ``tree``."""
    body: list[ast.stmt] = tree.body
    for part in dotted.split("."):
        found = [n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == part]
        if not found:
            return False
        body = found[0].body
    return True


def test_the_walkthroughs_link_something() -> None:
    assert len(links()) >= 30


@pytest.mark.parametrize(("text", "target"), links())
def test_every_link_holds(text: str, target: str) -> None:
    path = (SPEC.parent / target).resolve()
    assert path.is_file(), f"{SPEC.name} links {target}, which does not exist"
    _, _, name = text.partition(": ")
    if name and path.suffix == ".py":
        assert defined(ast.parse(path.read_text()), name.strip()), f"{target} defines no {name}"
