"""An agent reaches an agent capsule only under a spending ceiling: the one decision.

Specification: ``spec/routing.md`` "Spending ceilings" (and the blocked-route table's last
row). Pure: manifests in, a verdict out. The routing index (``mur agent who``) shows such a
route as blocked with :func:`block`'s reason and ``authorize:`` line; the call sites
(``delegate-task`` and capsule links in :mod:`murmur.delegation.runtime`, ``call-member`` in
:mod:`murmur.formation.member.member`) refuse the call with :func:`ceiling_refusal`, which is
:data:`SENTENCE` and the same routing line (:func:`refusal_for_ceiling` when the target is
known by its ceiling and capsule name only: a ``call-member`` callee not running yet, judged by
what its formation's launcher read from its manifest).

A target's **ceiling** is its ``inference`` block's ``max_turns`` and ``budget_tokens`` (per
task). It is positive when both are. A plan capsule needs none (it makes no model call of its
own), and an asker that is not an agent (a plan step, a plan session's command) is not an
agent-triggered run, so neither is refused here.
"""

from __future__ import annotations

import attrs

from murmur.manifest import Manifest

__all__ = ["SENTENCE", "Ceiling", "block", "ceiling_of", "ceiling_refusal", "refusal_for_ceiling"]

SENTENCE = "an agent-triggered run without a spending ceiling is refused"
"""The rule's sentence (spec/routing.md "Spending ceilings"), in every refusal."""


@attrs.frozen
class Ceiling:
    """A target's spending ceiling (per task).

    Attributes:
        max_turns (int): ``inference.max_turns`` (0: none).
        budget_tokens (int | None): ``inference.budget_tokens`` (input + output tokens).
    """

    max_turns: int
    budget_tokens: int | None

    @property
    def positive(self) -> bool:
        """Both ``max_turns`` and ``budget_tokens`` are positive."""
        return self.max_turns > 0 and (self.budget_tokens or 0) > 0

    @property
    def missing(self) -> str:
        """The key that is not set (``inference.max_turns`` first); empty when positive."""
        if self.max_turns <= 0:
            return "inference.max_turns"
        return "" if self.positive else "inference.budget_tokens"

    def text(self) -> str:
        """``4 turns, 20000 tokens per task`` or ``none (inference.budget_tokens is not set)``."""
        if not self.positive:
            return f"none ({self.missing} is not set)"
        return f"{self.max_turns} turns, {self.budget_tokens} tokens per task"

    def to_json(self) -> dict[str, object]:
        """``{"max_turns", "budget_tokens", "positive"}``."""
        return {"max_turns": self.max_turns, "budget_tokens": self.budget_tokens, "positive": self.positive}


def ceiling_of(manifest: Manifest) -> Ceiling | None:
    """The target's ceiling, or None for a capsule that is no agent (it needs none)."""
    inf = manifest.inference
    if inf is None:
        return None
    return Ceiling(inf.max_turns, inf.budget_tokens)


def block(asker: Manifest, target: Manifest, label: str, where: str) -> tuple[str, str] | None:
    """``(reason, authorize)`` when an agent ``asker`` routes to the agent ``target`` (shown as
    ``label``) that has no positive ceiling; None otherwise. ``where``: what makes the edit
    take effect (``restart the session``, ``relaunch the formation``)."""
    return _block(asker, ceiling_of(target), target.name, label, where)


def _block(asker: Manifest, ceiling: Ceiling | None, name: str, label: str, where: str) -> tuple[str, str] | None:
    if asker.inference is None or ceiling is None or ceiling.positive:
        return None
    return (
        f"'{label}' is an agent capsule without a spending ceiling ({ceiling.missing} is not set), "
        "and an agent may route only to targets that have one",
        f"set `inference.budget_tokens: <input + output tokens per task>` in {name}'s "
        f"murmur.yaml, reinstall it, and {where}",
    )


def ceiling_refusal(kind: str, asker: Manifest, target: Manifest, label: str, where: str) -> str | None:
    """The refusal of a ``kind`` call (``delegate-task``, ``call-member``) to ``target``, or
    None when it may proceed: ``spawn refused:`` (``call refused:`` for ``call-member``) and
    :data:`SENTENCE`, then the routing line as ``mur agent who``
    shows the blocked route (``<kind> <label> — <reason>``) and its ``authorize:`` line."""
    return refusal_for_ceiling(kind, asker, ceiling_of(target), target.name, label, where)


def refusal_for_ceiling(
    kind: str, asker: Manifest, ceiling: Ceiling | None, name: str, label: str, where: str
) -> str | None:
    """:func:`ceiling_refusal` for a target known by its ``ceiling`` (None: no agent) and its
    capsule ``name`` only; the same sentence and routing line."""
    blocked = _block(asker, ceiling, name, label, where)
    if blocked is None:
        return None
    reason, authorize = blocked
    head = "call refused" if kind == "call-member" else "spawn refused"
    return f"{head}: {SENTENCE}. route: {kind} {label} — {reason}; authorize: {authorize}"
