"""Contributions merged once, in the stated order (murmur.session.contribution; issue 31)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from murmur.session import Contribution, add_contributions
from murmur.session.completion_hook import CompletionVerdict
from murmur.workload import TaskContext, TaskOutcome

from .helpers import EchoWorkload, make_setup, manifest


def hook(name: str, seen: list[str]) -> Any:
    async def run(_: object) -> None:
        seen.append(name)

    run.__name__ = name
    return run


def test_hooks_keep_the_stated_order(tmp_path: Path) -> None:
    """First hooks before everything (the later contribution's first), then the setup's own,
    then the others in contribution order; lists are appended in contribution order."""
    seen: list[str] = []
    setup = make_setup(tmp_path, manifest(), EchoWorkload())
    own = hook("own", seen)
    setup.start_hooks.append(own)
    a = Contribution(start_hooks=(hook("a", seen),), start_hooks_first=(hook("a-first", seen),),
                     watchers=(hook("wa", seen),))
    b = Contribution(start_hooks=(hook("b", seen),), start_hooks_first=(hook("b-first", seen),),
                     watchers=(hook("wb", seen),))
    add_contributions(setup, [a, None, b])
    assert [h.__name__ for h in setup.start_hooks] == ["b-first", "a-first", "own", "a", "b"]
    assert [w.__name__ for w in setup.watchers] == ["wa", "wb"]


async def test_services_and_wrappers_compose_in_order(tmp_path: Path) -> None:
    """Each services layer sees what the one before gave; the first wrapper is the innermost."""
    setup = make_setup(tmp_path, manifest(), EchoWorkload())

    def layer(name: str) -> Any:
        return lambda task, base: attrs.evolve(base, callees=(*base.callees, name))

    class Tag:
        def __init__(self, inner: Any, tag: str) -> None:
            self.inner, self.tag = inner, tag

        async def run_task(self, ctx: TaskContext) -> TaskOutcome:
            out = await self.inner.run_task(ctx)
            return TaskOutcome(out.status, f"{self.tag}({out.answer})")

    add_contributions(setup, [
        Contribution(services=layer("one"), wrap_workload=lambda w: Tag(w, "in")),
        Contribution(services=layer("two"), wrap_workload=lambda w: Tag(w, "out")),
    ])
    assert setup.services is not None
    assert setup.services(object()).callees == ("one", "two")  # type: ignore[arg-type]
    assert isinstance(setup.workload, Tag) and setup.workload.tag == "out" and setup.workload.inner.tag == "in"


def test_one_completion_handler_at_most(tmp_path: Path) -> None:
    setup = make_setup(tmp_path, manifest(), EchoWorkload())
    handler = lambda req: CompletionVerdict(accept=True)  # noqa: E731
    add_contributions(setup, [Contribution(completion_handler=handler)])
    assert setup.completion_handler is handler
    with pytest.raises(ValueError, match="more than one"):
        add_contributions(setup, [Contribution(completion_handler=handler)])

