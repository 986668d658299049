"""Shared fixtures: every test gets a private MURMUR_HOME so nothing touches ~/.murmur."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _test_unit import enter, pytest_unconfigure
from loop_guard import guard_items

__all__ = ["pytest_unconfigure"]
enter()  # the test session's own containment unit, before any other conftest (_test_unit.py)


@pytest.fixture(autouse=True)
def murmur_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh MURMUR_HOME per test (sync, so it is safe beside trio tests)."""
    home = tmp_path_factory.mktemp("murmur-home")
    monkeypatch.setenv("MURMUR_HOME", str(home))
    yield home


# Tests that start real `mur` / `mur-roost` processes (or a formation, or a kill) and wait on
# them: `slow`, so `python -m pytest -m "not slow and not soak"` is a fast loop for development
# (CI runs everything but soak). Measured on the loaded 2-core machine (issue 16): each of
# these takes seconds (the two searches below, minutes); the rest of the suite tenths of a
# second. A test marked `e2e` is slow too.
SLOW_TESTS = (
    "tests/e2e/",
    "tests/agent/test_e2e_run.py",
    "tests/cli/test_doctor.py",
    "tests/cli/test_new_build_install.py",
    "tests/cli/test_roost.py::TestBinary",
    "tests/cli/test_startup_imports.py",
    "tests/conversation/test_resume_refusals.py::test_the_command_line_exits_2_for_misuse",
    "tests/containment/test_context.py",
    "tests/containment/test_janitor.py",
    "tests/formation/test_launcher_properties.py",  # hypothesis over whole launches: minutes when loaded
    "tests/model/",  # the protocol model's breadth-first search (about 10 s idle)
    "tests/test_demo_",
)


# Tests run under the blocked-loop guard (tests/loop_guard.py, issue 31): one task step that
# holds the event loop for more than 100 ms fails the test.
GUARDED_TESTS = ("tests/session/", "tests/formation/", "tests/delegation/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the multi-process tests of :data:`SLOW_TESTS` (and every ``e2e`` test) ``slow``;
    run the async tests of :data:`GUARDED_TESTS` under the blocked-loop guard."""
    for item in items:
        if item.get_closest_marker("e2e") is not None or item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    guard_items(item for item in items if item.nodeid.startswith(GUARDED_TESTS))
