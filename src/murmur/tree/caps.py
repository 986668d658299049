"""Tree caps: a per-tree total of delegations and a same-capsule chain cap (spec/tree.md "Caps").

A tree has six caps (spec/tree.md "Caps"); mur-roost keeps depth, concurrency and the machine
ceiling, and the runtime adds the two below, both checked before mur-roost is asked:

* **total** (``mur run --max-tree-total N``): delegations attempted under one root, refused
  ones included, at most ``N``. Unbounded when unset. Counted in
  ``$MURMUR_HOME/tree/totals/<root>`` (0600, one decimal line) under an exclusive ``flock``,
  so every session of the tree, in any process, takes from one count.
* **same-capsule chain** (``mur run --max-same-capsule-chain N``): consecutive parent → child
  steps whose capsule identity (name and installed bytes: the archive's sha256) is equal, at
  most ``N``. Off unless set (a self-naming capsule may run to mur-roost's depth; spec/tree.md "Caps").

The caps travel down the tree in ``MURMUR_TREE_CAPS``, a runtime-owned variable (applied after
everything else in a child's environment, like ``MURMUR_LINEAGE``): compact JSON
``{"total": N|null, "same_chain": N|null, "chain": K}``, ``chain`` being the same-identity
steps that end at the child. A value that does not parse is ``E-TRE-004``. A ``mur run`` flag
only tightens what the environment already holds.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Mapping

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

CAPS_ENV = "MURMUR_TREE_CAPS"
_ROOT = re.compile(r"^(ses|frm)_[0-9a-f]{8,64}$")


@attrs.frozen
class TreeCaps:
    """The caps a session runs under, and its place in a same-capsule chain.

    Attributes:
        total (int | None): ``--max-tree-total`` (None: unbounded).
        same_chain (int | None): ``--max-same-capsule-chain`` (None: off).
        chain (int): same-identity parent → child steps ending at this session (0 for a root).
    """

    total: int | None = None
    same_chain: int | None = None
    chain: int = 0

    def to_json(self) -> dict[str, int | None]:
        """``{"total", "same_chain"}`` as ``mur context`` and ``mur ps --tree --json`` show them."""
        return {"max_tree_total": self.total, "max_same_capsule_chain": self.same_chain}

    def to_env(self) -> str:
        """This session's own ``MURMUR_TREE_CAPS`` value (a root's, from its flags)."""
        return json.dumps({"total": self.total, "same_chain": self.same_chain, "chain": self.chain},
                          separators=(",", ":"))

    def hand_down(self, same_identity: bool) -> str:
        """The child's ``MURMUR_TREE_CAPS`` value."""
        chain = self.chain + 1 if same_identity else 0
        return json.dumps({"total": self.total, "same_chain": self.same_chain, "chain": chain},
                          separators=(",", ":"))


def _bad(why: str) -> DiagnosticError:
    return DiagnosticError(error("E-TRE-004", f"{CAPS_ENV} cannot be read: {why}",
                                 hint=f"{CAPS_ENV} is set by a delegating session's runtime; unset it"))


def _cap(value: object, key: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _bad(f"`{key}` is not a whole number of 0 or more")
    return value


def parse_caps(environ: Mapping[str, str]) -> TreeCaps:
    """The caps ``environ`` hands this session (none set: unbounded, off).

    Raises:
        DiagnosticError: ``E-TRE-004`` when the value does not parse or has an unknown field.
    """
    raw = environ.get(CAPS_ENV, "").strip()
    if not raw:
        return TreeCaps()
    try:
        doc = json.loads(raw)
    except ValueError:
        raise _bad("it is not JSON") from None
    if not isinstance(doc, dict) or set(doc) - {"total", "same_chain", "chain"}:
        raise _bad("it is not an object of total, same_chain and chain")
    chain = _cap(doc.get("chain", 0), "chain")
    return TreeCaps(_cap(doc.get("total"), "total"), _cap(doc.get("same_chain"), "same_chain"), chain or 0)


def tighten(caps: TreeCaps, *, total: int | None, same_chain: int | None) -> TreeCaps:
    """``caps`` with a ``mur run`` flag applied: the smaller of the two wins (pure)."""
    def low(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else min(a, b)

    return attrs.evolve(caps, total=low(caps.total, total), same_chain=low(caps.same_chain, same_chain))


def chain_refusal(caps: TreeCaps, name: str, same_identity: bool) -> str | None:
    """The same-capsule chain refusal for delegating to ``name``, or None (pure)."""
    if caps.same_chain is None or not same_identity or caps.chain + 1 <= caps.same_chain:
        return None
    steps = caps.chain + 1
    chain = " → ".join([name] * (steps + 1))
    return (f"spawn refused: the same-capsule chain {chain} would be {steps} steps of '{name}' delegating to "
            f"itself, over --max-same-capsule-chain {caps.same_chain}; do this part of the task here instead "
            f"of delegating it again, or delegate to a different capsule (the root's `mur run "
            f"--max-same-capsule-chain N` sets the cap)")


def cap_refusal(caps: TreeCaps, name: str, *, taken: int | None, same_identity: bool) -> str | None:
    """The tree caps' decision on one delegation attempt (pure): the total first, then the
    same-capsule chain; None when neither refuses. The runtime (``DelegationRuntime``) and
    the protocol model (spec/model.md) both call it.

    Args:
        caps (TreeCaps): the caps the delegating session runs under.
        name (str): the capsule asked for.
        taken (int | None): the tree's attempt count after this one (None: no total is set,
            so nothing was counted).
        same_identity (bool): ``name`` as a child resolves it is the session's own capsule
            (name and installed bytes).
    """
    if caps.total is not None and taken is not None and taken > caps.total:
        return total_refusal(caps.total, taken)
    if caps.same_chain is not None:
        return chain_refusal(caps, name, same_identity)
    return None


def total_refusal(total: int, taken: int) -> str:
    """The per-tree total refusal (pure)."""
    return (f"spawn refused: this tree has asked for {taken} delegations (refused ones included), over its "
            f"--max-tree-total {total}; finish the task with the answers already in hand, or run the root "
            f"again with a larger `mur run --max-tree-total N`")


def take_one(root: str) -> int:
    """Count one delegation attempt under ``root``; the count after it.

    Raises:
        OSError: the count cannot be written (the caller refuses: a cap it cannot keep is no cap).
    """
    from murmur.tree.journal import tree_dir

    if not _ROOT.match(root):
        raise OSError(f"not a tree root id: {root!r}")
    d = tree_dir() / "totals"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(d / root, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        count = (int(data) if data.isdigit() else 0) + 1
        line = f"{count}\n".encode()
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))
        return count
    finally:
        os.close(fd)
