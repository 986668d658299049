"""What the host backs: the live probe, and the paths where the host lacks something."""

from __future__ import annotations

import pytest

from murmur.manifest.model import Containment
from murmur.sandbox.host import HOST_ENV, HostSupport, probe

FULL = HostSupport(7, True, True, True)


def test_lacks_and_best() -> None:
    assert FULL.best() is Containment.SEALED and FULL.lacks(Containment.SEALED) == ()
    no_ll = HostSupport(0, True, True, True)
    assert no_ll.best() is Containment.ADVISORY
    assert any("Landlock" in x for x in no_ll.lacks(Containment.SCOPED))
    no_userns = HostSupport(7, True, False, False)
    assert no_userns.best() is Containment.ADVISORY
    assert any("user and network namespaces" in x for x in no_userns.lacks(Containment.SCOPED))
    no_mount = HostSupport(7, True, True, False)
    assert no_mount.best() is Containment.SCOPED
    assert no_mount.lacks(Containment.SEALED) == ("a mount namespace it can mount inside",)
    assert HostSupport(0, False, False, False).lacks(Containment.ADVISORY) == ()


@pytest.mark.parametrize("removed,best,word", [("no-landlock", "advisory", "landlock"),
                                               ("no-userns", "advisory", "user namespaces"),
                                               ("no-seccomp", "advisory", "seccomp"),
                                               ("no-mountns", "scoped", "mount namespaces")])
def test_probe_reports_what_is_taken_away(removed: str, best: str, word: str) -> None:
    found = probe({HOST_ENV: removed}, fresh=True)
    assert found.best().value == best
    assert any(word in n for n in found.notes)
    assert word in "\n".join(found.doctor_lines())


def test_probe_of_this_host_is_live() -> None:
    found = probe({}, fresh=True)
    # Whatever this host gives, the answer agrees with its own notes.
    assert (found.landlock_abi == 0) == any(n.startswith("landlock") for n in found.notes)
    assert found.userns == (not any(n.startswith("user namespaces") for n in found.notes))
