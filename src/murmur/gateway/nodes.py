"""The sessions of one tree as the gateway knows them: identity, reach and budget.

Specification: ``spec/gateway.md`` "Who is calling" and "Budgets". Pure: the caller's process
ancestry is handed in (:mod:`murmur.gateway.callers` reads it from ``/proc``).

A :class:`Node` is one session: its process (pid and start time, so a reused pid never passes
for it), its parent node, its ``network.allow`` (clamped by the parent's: a child never reaches
more than its parent), its own token budget, and its key claim (what its manifest names for
its own provider, with the value when its own environment holds one; see
:mod:`murmur.gateway.keys`). Budget arithmetic:

* a node's **ceiling** is the smaller of its own budget and its parent's ceiling left;
* spend is charged to the node and every ancestor (a subtree's spend counts against each
  ceiling above it);
* a call is refused when the node, or any ancestor, has a budget whose spend has reached it;
  the refusal names the highest such node (the one whose budget ran out).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from murmur.gateway.keys import KeyClaim
from murmur.manifest.netallow import NetEntry, entry_covers, parse_net_entry

__all__ = ["Node", "Tree", "clamp_allow"]


@attrs.frozen
class Node:
    """One session in the tree.

    Attributes:
        session (str): its session id.
        pid (int), start_ticks (int): its process.
        parent (str | None): the parent node's session id; None for the root.
        allow (tuple[str, ...]): its ``network.allow`` after clamping.
        budget (int | None): its own token budget; None for none of its own.
        spent (int): tokens charged to it and its subtree.
        own (int): tokens of the calls it made itself (``spent`` less its descendants').
        key (KeyClaim | None): its claim (registered; the root's keys are the gateway's
            :class:`~murmur.gateway.keys.KeyTable`); its value is never shown.
    """

    session: str
    pid: int
    start_ticks: int
    parent: str | None
    allow: tuple[str, ...]
    budget: int | None = None
    spent: int = 0
    own: int = 0
    key: KeyClaim | None = None


def clamp_allow(child: Iterable[str], parent: Sequence[str] | None) -> tuple[str, ...]:
    """The child's entries some parent entry covers (``parent`` None: no clamp, the root)."""
    if parent is None:
        return tuple(child)
    held = [p for p in (parse_net_entry(e) for e in parent) if p is not None]
    kept: list[str] = []
    for entry in child:
        asked = parse_net_entry(entry)
        if asked is not None and any(entry_covers(h, asked) for h in held):
            kept.append(entry)
    return tuple(kept)


def reaches(allow: Iterable[str], target: NetEntry) -> bool:
    """Whether some entry of ``allow`` covers ``target`` (scheme, host, port)."""
    return any(
        held is not None and entry_covers(held, target)
        for held in (parse_net_entry(e) for e in allow)
    )


@attrs.frozen
class Tree:
    """Session id -> :class:`Node`; every change returns a new tree."""

    nodes: dict[str, Node] = attrs.field(factory=dict)

    def add(self, node: Node) -> Tree:
        """This tree with ``node`` (its allow clamped by its parent's; its budget as given)."""
        parent = self.nodes.get(node.parent) if node.parent is not None else None
        allow = clamp_allow(node.allow, parent.allow if parent is not None else None)
        return Tree({**self.nodes, node.session: attrs.evolve(node, allow=allow, spent=0, own=0)})

    def by_process(self, ancestry: Sequence[tuple[int, int]]) -> Node | None:
        """The node of the nearest process in ``ancestry`` (the caller first, then its parent…)."""
        index = {(n.pid, n.start_ticks): n for n in self.nodes.values()}
        for proc in ancestry:
            if proc in index:
                return index[proc]
        return None

    def chain(self, session: str) -> list[Node]:
        """The node and its ancestors, nearest first."""
        out: list[Node] = []
        node = self.nodes.get(session)
        while node is not None and len(out) <= len(self.nodes):
            out.append(node)
            node = self.nodes.get(node.parent) if node.parent is not None else None
        return out

    def left(self, session: str) -> int | None:
        """Tokens ``session`` may still spend: min over its chain of budget - spent; None: unbounded."""
        room = [n.budget - n.spent for n in self.chain(session) if n.budget is not None]
        return max(0, min(room)) if room else None

    def spent_out(self, session: str) -> Node | None:
        """The highest node on ``session``'s chain whose budget is spent, or None."""
        out = [n for n in self.chain(session) if n.budget is not None and n.spent >= n.budget]
        return out[-1] if out else None

    def charge(self, session: str, tokens: int) -> Tree:
        """This tree with ``tokens`` charged to ``session`` (its ``own`` too) and each of its
        ancestors."""
        if tokens <= 0:
            return self
        changed = {n.session: attrs.evolve(n, spent=n.spent + tokens) for n in self.chain(session)}
        if session in changed:
            mine = changed[session]
            changed[session] = attrs.evolve(mine, own=mine.own + tokens)
        return Tree({**self.nodes, **changed})

    def ceiling(self, session: str, own: int | None) -> int | None:
        """A new child's budget: the smaller of ``own`` and what ``session`` has left."""
        left = self.left(session)
        if left is None:
            return own
        return left if own is None else min(own, left)
