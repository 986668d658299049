"""Module names that do not collide (issue 31 item 4).

No two modules under ``src/murmur/`` share a base name where the package of one imports the
package of the other (``formation/wire/tokens.py`` beside ``murmur/tokens.py`` made a reader
ask which ``tokens`` an import meant). Packages are directories; ``__init__`` is left out.
None is allowed (:data:`ALLOWED` is empty); a pair a later change must keep goes there with its
reason, and an entry that no longer collides fails the test.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from test_cycles import modules, targets

ALLOWED: dict[frozenset[str], str] = {}


def package_of(module: str, is_init: bool) -> str:
    return module if is_init else module.rpartition(".")[0]


def collisions() -> set[frozenset[str]]:
    """Pairs of same-named modules whose packages import one another (either way)."""
    known = modules()
    uses: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        here = package_of(name, path.name == "__init__.py")
        uses[here] |= {package_of(t, known[t].name == "__init__.py") for t in targets(path, known)}
    by_base: dict[str, list[str]] = defaultdict(list)
    for name, path in known.items():
        if path.name != "__init__.py":
            by_base[name.rpartition(".")[2]].append(name)
    out: set[frozenset[str]] = set()
    for names in by_base.values():
        for a, b in combinations(sorted(names), 2):
            pa, pb = package_of(a, False), package_of(b, False)
            if pb in uses[pa] or pa in uses[pb]:
                out.add(frozenset({a, b}))
    return out


def test_the_issue_s_pairs_are_gone() -> None:
    """The collisions issue 31 named: two launcher.py, two outcome.py, two tokens.py, context.py."""
    names = set(modules())
    for gone in ("murmur.delegation.launcher", "murmur.formation.launch.outcome", "murmur.formation.wire.tokens",
                 "murmur.containment.context", "murmur.agent.transports.harness"):
        assert gone not in names


def test_no_new_collision() -> None:
    found = collisions()
    new = sorted(sorted(p) for p in found - set(ALLOWED))
    assert not new, f"modules sharing a base name where one package imports the other: {new}"


def test_allowlist_has_no_fixed_entries() -> None:
    stale = sorted(sorted(p) for p in set(ALLOWED) - collisions())
    assert not stale, f"remove these fixed entries from ALLOWED: {stale}"


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """Issue 31: no module under src/murmur/ is over 600 lines (split one that grows past)."""
    from test_layers import SRC

    over = sorted((p.relative_to(SRC).as_posix(), n) for p in SRC.rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES)
    assert over == [], f"modules over {MAX_MODULE_LINES} lines: {over}"
