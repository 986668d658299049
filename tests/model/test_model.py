"""The protocol model: every invariant holds within the scope, and every control catches its guard.

spec/model.md. Figures (worlds explored, seconds) are printed, never asserted on.
"""

from __future__ import annotations

import pytest

from murmur.roost.ledger import Ledger

from .explore import CONTROLS, Control, explore, mutant
from .invariants import INVARIANTS
from .protocol import CAPPED, LARGE, SMALL, Protocol, Scope

_BY_NAME = {inv.name: inv for inv in INVARIANTS}


def _holds(scope: Scope) -> None:
    result = explore(Protocol(scope))
    print(f"\nscope: {scope.describe()}")
    print(f"explored {result.states} worlds, {result.transitions} transitions, depth {result.depth}, "
          f"{result.seconds:.1f} s")
    for violation in result.violations.values():
        print(violation.render())
    assert result.depth == scope.steps  # the whole scope was reached, not cut short
    assert not result.violations, "\n".join(v.render() for v in result.violations.values())


def test_every_invariant_holds_in_the_ci_scope() -> None:
    _holds(SMALL)


def test_every_invariant_holds_under_the_tree_caps() -> None:
    """Issue 30 item 3: the per-tree total and the same-capsule chain cap (TotalBound,
    SameCapsuleChainBound) with every other invariant."""
    _holds(CAPPED)


@pytest.mark.slow
@pytest.mark.soak  # 130k states, about 50 s here: `python -m pytest -m soak` (CI runs the small scope)
def test_every_invariant_holds_in_the_larger_scope() -> None:
    _holds(LARGE)


def test_each_invariant_has_exactly_one_control() -> None:
    assert sorted(c.invariant for c in CONTROLS) == sorted(_BY_NAME)


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.invariant)
def test_the_control_finds_a_counterexample(control: Control) -> None:
    scope = control.scope or SMALL
    result = explore(control.protocol(scope), [_BY_NAME[control.invariant]], stop_on=control.invariant)
    violation = result.violations.get(control.invariant)
    print(f"\ncontrol for {control.invariant}: {control.what} -- removed from {control.where}")
    print(f"explored {result.states} worlds in {result.seconds:.2f} s")
    assert violation is not None, f"{control.invariant}: removing the guard in {control.where} went unnoticed"
    print(violation.render())
    assert violation.trace and len(violation.trace) <= scope.steps


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: c.invariant)
def test_the_counterexample_needs_the_removed_guard(control: Control) -> None:
    """Replayed on the real code, the control's shortest trace either cannot be taken (the
    guard refuses a step) or ends in a world where the invariant holds."""
    invariant = _BY_NAME[control.invariant]
    scope = control.scope or SMALL
    violation = explore(control.protocol(scope), [invariant], stop_on=control.invariant).violations[control.invariant]
    protocol = Protocol(scope)
    world = protocol.initial()
    for label in violation.trace:
        nxt = dict(protocol.successors(world)).get(label)
        if nxt is None:
            return  # the real guard refused this step
        world = nxt
    check = invariant.check(world, scope, protocol) if invariant.name == "EventuallySettled" else invariant.check(world, scope)
    assert check is None, f"the real code violates {invariant.name} too: {check}"


def test_a_mutant_that_no_longer_matches_the_source_is_refused() -> None:
    with pytest.raises(AssertionError, match="expected exactly one"):
        mutant(Ledger.check_spawn, "if a guard that is not there:", "if False:")
