"""The delegation bound and the launcher's own reports (seed 000, "Bounds", "Who reports")."""

from __future__ import annotations

import pytest

from murmur.delegation.watch_policy import Ending, launcher_report
from murmur.exitstatus import describe
from murmur.manifest.model import Lifecycle, Manifest
from murmur.timing import delegation_bound


def manifest(secs: int = 600) -> Manifest:
    return Manifest("m", "0.1.0", lifecycle=Lifecycle(delegation_deadline_secs=secs))


class TestBound:
    @pytest.mark.parametrize(
        ("env", "declared", "bound"),
        [
            ({}, 600, 600),
            ({}, 42, 42),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": "7"}, 42, 7),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": " 9 "}, 42, 9),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": "0"}, 42, 42),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": "-3"}, 42, 42),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": "1.5"}, 42, 42),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": "ten"}, 42, 42),
            ({"MURMUR_DELEGATION_TIMEOUT_SECS": "٣"}, 42, 42),
        ],
    )
    def test_env_overrides_only_when_positive_whole(self, env: dict[str, str], declared: int, bound: int) -> None:
        """MURMUR_DELEGATION_TIMEOUT_SECS wins when a positive whole number; else the manifest."""
        assert delegation_bound(manifest(declared).lifecycle.delegation_deadline_secs, env) == bound


class TestLauncherReport:
    def test_exited_without_completion_is_crashed(self) -> None:
        """A child that exited without a completion: crashed, posted, with status and stderr."""
        r = launcher_report(Ending.EXITED, returncode=3, stderr_tail=["", "boom", "bang"], bound=600)
        assert (r.status, r.post) == ("crashed", True)
        assert "(status 3)" in r.detail and r.detail.endswith("boom\nbang")

    def test_expired_names_the_bound(self) -> None:
        """The watch bound passed: terminated, posted, naming the bound in seconds."""
        r = launcher_report(Ending.EXPIRED, returncode=None, bound=2)
        assert (r.status, r.post) == ("terminated", True)
        assert "lifecycle.delegation_deadline_secs (2 s)" in r.detail

    def test_parent_ended_it_is_posted_to_nobody(self) -> None:
        """The parent ended the delegation: terminated, recorded, posted to nobody."""
        r = launcher_report(Ending.STOPPED, returncode=None, bound=600, reason="its session ended")
        assert (r.status, r.post) == ("terminated", False) and "its session ended" in r.detail

    @pytest.mark.parametrize(("code", "text"), [(None, "still running"), (0, "status 0"), (-9, "signal SIGKILL")])
    def test_describe_exit(self, code: int | None, text: str) -> None:
        """Exit statuses read as words (the formation's words too: murmur.exitstatus)."""
        assert describe(code) == text
