"""Tests of the spawn envelope: lowering and the referee (seed 000, Spawn envelope table)."""

from __future__ import annotations

import pytest

from murmur.manifest.model import (
    Capabilities,
    Containment,
    EnvCaps,
    FilesystemCaps,
    Manifest,
    NetworkCaps,
    PeerFetchCaps,
    ShellCaps,
    SpawnCaps,
    StateCaps,
)
from murmur.roost.envelope import Envelope, lower, referee

MONOTONE = "a spawned capsule can never hold more capability than the capsule that spawned it"


def env(**kw: object) -> Envelope:
    """An envelope for capsule 'c' with the given axes."""
    return Envelope("c", **kw)  # type: ignore[arg-type]


class TestLower:
    def test_empty_manifest_holds_nothing(self) -> None:
        """A manifest with no capabilities lowers to an empty envelope."""
        assert lower(Manifest("a", "1")) == Envelope("a")

    def test_every_axis_lowered(self) -> None:
        """Each manifest key lands on its axis."""
        caps = Capabilities(
            network=NetworkCaps(("h",), unix_sockets=True),
            peer_fetch=PeerFetchCaps(("p",)),
            shell=ShellCaps(("git",)),
            spawn=SpawnCaps(("w",)),
            env=EnvCaps(("E",)),
            filesystem=FilesystemCaps("data/./x/", workdir_exec=True),
            state=StateCaps("s"),
            containment=Containment.SCOPED,
        )
        assert lower(Manifest("a", "1", capabilities=caps)) == Envelope(
            "a", ("h",), True, ("p",), ("git",), ("w",), ("E",), "data/x", True, ("s",), Containment.SCOPED
        )

    def test_state_without_store_is_named_after_capsule(self) -> None:
        """A state block without store opens a store named after its own capsule."""
        m = Manifest("worker-a", "1", capabilities=Capabilities(state=StateCaps()))
        assert lower(m).state_stores == ("worker-a",)

    def test_dot_scope_is_whole_workdir(self) -> None:
        """A filesystem scope of '.' is the same as declaring none."""
        m = Manifest("a", "1", capabilities=Capabilities(filesystem=FilesystemCaps(".")))
        assert lower(m).filesystem_scope is None


class TestReferee:
    def test_identical_fits(self) -> None:
        """A child holding exactly what its parent holds is within the envelope."""
        e = env(network_allow=("h",), shell_allow=("git",), containment=Containment.SCOPED)
        assert referee(e, e) is None

    def test_network_allow(self) -> None:
        """capabilities.network.allow: every child entry must be covered (seed's message)."""
        r = referee(env(network_allow=("example.com",)), env(network_allow=("example.com", "api.example.com")))
        assert r is not None
        assert (r.key, r.entry) == ("capabilities.network.allow", "api.example.com")
        assert r.message == (
            "capabilities.network.allow: the child declares 'api.example.com', which its parent "
            f"does not hold — {MONOTONE}"
        )
        assert referee(env(network_allow=("example.com",)), env(network_allow=("https://example.com",))) is None

    def test_unix_sockets(self) -> None:
        """capabilities.network.unix_sockets: a child true requires a parent true."""
        r = referee(env(), env(unix_sockets=True))
        assert r is not None and (r.key, r.entry) == ("capabilities.network.unix_sockets", "true")
        assert referee(env(unix_sockets=True), env(unix_sockets=True)) is None
        assert referee(env(unix_sockets=True), env()) is None

    def test_peer_fetch(self) -> None:
        """capabilities.peer_fetch.allow: the coverage rule on the separate list."""
        r = referee(env(network_allow=("h",)), env(peer_fetch_allow=("h",)))
        assert r is not None and (r.key, r.entry) == ("capabilities.peer_fetch.allow", "h")
        assert referee(env(peer_fetch_allow=("h",)), env(peer_fetch_allow=("https://h",))) is None

    @pytest.mark.parametrize(
        ("axis", "key"),
        [
            ("shell_allow", "capabilities.shell.allow"),
            ("spawn_allow", "capabilities.spawn.allow"),
            ("env_allow", "capabilities.env.allow"),
            ("state_stores", "capabilities.state.store"),
        ],
    )
    def test_name_lists(self, axis: str, key: str) -> None:
        """Every child name must appear in the parent's list on the name-list axes."""
        parent, child = env(**{axis: ("a", "b")}), env(**{axis: ("b", "c")})
        r = referee(parent, child)
        assert r is not None and (r.key, r.entry) == (key, "c")
        assert r.message.startswith(f"{key}: the child declares 'c', which its parent does not hold")
        assert referee(parent, env(**{axis: ("a",)})) is None

    @pytest.mark.parametrize(
        ("parent", "child", "fits"),
        [
            (None, None, True),
            (None, "data", True),
            ("data", "data", True),
            ("data", "data/sub", True),
            ("data", None, False),
            ("data", "other", False),
            ("data", "database", False),
            ("data/sub", "data", False),
        ],
    )
    def test_filesystem_scope(self, parent: str | None, child: str | None, fits: bool) -> None:
        """No parent scope covers anything; a scope covers itself and beneath, never none."""
        r = referee(env(filesystem_scope=parent), env(filesystem_scope=child))
        assert (r is None) is fits
        if r is not None:
            assert r.key == "capabilities.filesystem.scope"
            assert r.entry == (child or ".")

    def test_workdir_exec(self) -> None:
        """capabilities.filesystem.workdir_exec: a child true requires a parent true."""
        r = referee(env(), env(workdir_exec=True))
        assert r is not None and r.key == "capabilities.filesystem.workdir_exec"
        assert referee(env(workdir_exec=True), env(workdir_exec=True)) is None

    @pytest.mark.parametrize(
        ("parent", "child", "fits"),
        [
            (None, None, True),
            (None, Containment.ADVISORY, True),
            (Containment.SCOPED, Containment.SEALED, True),
            (Containment.SCOPED, Containment.SCOPED, True),
            (Containment.SCOPED, Containment.ADVISORY, False),
            (Containment.SCOPED, None, False),
            (Containment.SEALED, Containment.SCOPED, False),
            (Containment.ADVISORY, None, True),
        ],
    )
    def test_containment_may_only_rise(
        self, parent: Containment | None, child: Containment | None, fits: bool
    ) -> None:
        """The child's floor is at or above the parent's (advisory < scoped < sealed)."""
        r = referee(env(containment=parent), env(containment=child))
        assert (r is None) is fits
        if r is not None:
            assert r.key == "capabilities.containment"
            assert r.message.startswith("capabilities.containment: the child declares ")

    def test_axes_in_table_order(self) -> None:
        """When several axes exceed, the first in the seed's table is named."""
        r = referee(env(), env(shell_allow=("git",), network_allow=("h",), containment=None))
        assert r is not None and r.key == "capabilities.network.allow"

    def test_self_spawning_capsule_narrows_to_itself(self) -> None:
        """A capsule naming itself in spawn.allow fits under itself (the envelope never ends a chain)."""
        m = Manifest("loop", "1", capabilities=Capabilities(spawn=SpawnCaps(("loop",))))
        assert referee(lower(m), lower(m)) is None
