"""The warm starter's import lists name modules that exist (the starter skips a missing name
silently, so a rename would otherwise drop a module from the preload without a failure)."""

from __future__ import annotations

import importlib.util

import pytest

from murmur.cli import warm_starter


@pytest.mark.parametrize("name", [*warm_starter.PRELOAD, *warm_starter.AFTER_READY])
def test_every_preloaded_module_exists(name: str) -> None:
    assert importlib.util.find_spec(name) is not None, f"{name} is in the starter's list but is no module"


def test_no_module_is_listed_twice() -> None:
    names = [*warm_starter.PRELOAD, *warm_starter.AFTER_READY]
    assert len(names) == len(set(names))
