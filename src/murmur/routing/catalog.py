"""The values the routing index is built from and answers with (``spec/routing.md``).

Everything is frozen and does no I/O. The index is rebuilt from these every time it is
asked; nothing here is declared anywhere else.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from murmur.manifest import Manifest
from murmur.routing.ceiling import Ceiling, ceiling_of


class State(enum.Enum):
    """Whether a capsule is only installed or has a live session."""

    INSTALLED = "installed"
    RUNNING = "running"


class RouteKind(enum.Enum):
    """How work reaches a target: a formation edge, or a delegated child."""

    CALL_MEMBER = "call-member"
    DELEGATE = "delegate-task"


class RouteState(enum.Enum):
    """``ready``: usable now. ``blocked``: the target can do the job, but something the
    operator controls stands in the way."""

    READY = "ready"
    BLOCKED = "blocked"


@attrs.frozen
class Capsule:
    """One capsule the index knows: installed (a store entry) and perhaps running.

    Attributes:
        name (str): the bare capsule name.
        version (str): its exact version.
        manifest (Manifest): the manifest packed in its installed artifact (or, for a
            session run from a source directory, the manifest it started with).
        state (State): ``running`` when a live session runs this name and version.
        store (str | None): ``project`` or ``global`` (None for a source-only session).
        sessions (tuple[str, ...]): ``ses_…`` ids of its live sessions.
        edited (tuple[str, ...]): the live sessions whose installed bytes or source manifest
            changed since they started (PROFILE EDITED SINCE START).
    """

    name: str
    version: str
    manifest: Manifest
    state: State = State.INSTALLED
    store: str | None = None
    sessions: tuple[str, ...] = ()
    edited: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """``local/<name>``."""
        return f"local/{self.name}"

    @property
    def is_agent(self) -> bool:
        """Whether its workload is an agent loop (an ``inference`` block)."""
        return self.manifest.inference is not None

    @property
    def has_spending_ceiling(self) -> bool:
        """A positive ``inference.max_turns`` and a positive ``inference.budget_tokens``.

        Plans need none, so a plan capsule always has one for routing purposes.
        """
        ceiling = ceiling_of(self.manifest)
        return ceiling is None or ceiling.positive


@attrs.frozen
class Member:
    """One roster member and the capsule it runs.

    Attributes:
        name (str): the member's name in the roster.
        capsule (Capsule): what it runs.
        entry (bool): whether it is the entry member.
        callees (tuple[str, ...]): members it may call (the roster's expanded edges).
    """

    name: str
    capsule: Capsule
    entry: bool = False
    callees: tuple[str, ...] = ()


@attrs.frozen
class Formation:
    """A roster: its members and its edges (the authorization of ``call-member`` routes).

    Attributes:
        roster (str): the ``roster.yaml`` path as shown in ``authorize:`` lines.
        members (tuple[Member, ...]): in roster order.
        reachability_all (bool): the roster wrote ``reachability: all``.
    """

    roster: str
    members: tuple[Member, ...]
    reachability_all: bool = False

    def member(self, name: str) -> Member | None:
        """The member called ``name``, or None."""
        return next((m for m in self.members if m.name == name), None)


@attrs.frozen
class Catalog:
    """Everything the index reads: what is installed and running, and the formation.

    Attributes:
        capsules (tuple[Capsule, ...]): every capsule known, one per name and version.
        formation (Formation | None): the roster asked about (``--roster``), if any.
        roost_spawn_allow (tuple[str, ...] | None): mur-roost's ``--spawn-allow`` when known;
            None when not known (then only each manifest's ``spawn.allow`` decides).
        global_store (frozenset[tuple[str, str]] | None): ``(name, version)`` installed in the
            global store, where a delegated child resolves from; None when not read.
        effective_spawn (Mapping[str, tuple[str, ...]] | None): capsule name -> the effective
            spawn set of its live sessions (their lineage's ``spawn``, intersected), when any run.
    """

    capsules: tuple[Capsule, ...] = ()
    formation: Formation | None = None
    roost_spawn_allow: tuple[str, ...] | None = None
    global_store: frozenset[tuple[str, str]] | None = None
    effective_spawn: Mapping[str, tuple[str, ...]] | None = None


@attrs.frozen
class Holder:
    """One row of the holders' list: a member, or an installed or running capsule.

    Attributes:
        label (str): the member name (formation rows) or the capsule name.
        capsule (Capsule): the capsule behind the row.
        member (Member | None): the roster member, for formation rows.
    """

    label: str
    capsule: Capsule
    member: Member | None = None


@attrs.frozen(order=True)
class RankKey:
    """The least-privileged ordering key of a ready route (ascending = better).

    Compared field by field, in this order: ``other_binaries`` (binaries the target holds
    besides the one asked for), ``scope_breadth`` (``-depth`` of its normalised
    ``filesystem.scope``; the whole workdir is 0, ``src/x`` is -2), ``workdir_exec``,
    ``network_hosts`` (``network.allow`` entries), ``spawns`` (whether ``spawn.allow`` is
    non-empty), then ``name``.
    """

    other_binaries: int
    scope_breadth: int
    workdir_exec: bool
    network_hosts: int
    spawns: bool
    name: str

    def text(self) -> str:
        """``1 other binary, scope ., 0 hosts, no spawn`` (the key as shown)."""
        bins = f"{self.other_binaries} other binar{'y' if self.other_binaries == 1 else 'ies'}"
        hosts = f"{self.network_hosts} host{'' if self.network_hosts == 1 else 's'}"
        return f"{bins}, scope depth {-self.scope_breadth}{' +exec' if self.workdir_exec else ''}, " \
            f"{hosts}, {'spawns' if self.spawns else 'no spawn'}"

    def to_json(self) -> dict[str, object]:
        """The key as the ``--json`` schema writes it."""
        return {
            "other_binaries": self.other_binaries,
            "scope_depth": -self.scope_breadth,
            "workdir_exec": self.workdir_exec,
            "network_hosts": self.network_hosts,
            "spawns": self.spawns,
            "name": self.name,
        }


@attrs.frozen
class Route:
    """One way the asking capsule can get the work done.

    Attributes:
        kind (RouteKind): ``call-member`` or ``delegate-task``.
        target (str): the member it calls, or the capsule it delegates to.
        via (tuple[str, ...]): the members or capsules that hold what was asked for along
            the route (the target itself, or what it reaches through its own callees).
        state (RouteState): ready or blocked.
        key (RankKey): the ordering key (computed for blocked routes too).
        reason (str | None): why a blocked route is blocked (None when ready).
        authorize (str | None): the one edit that would unblock it, or why none should.
        ceiling (Ceiling | None): the target's spending ceiling; None for a target that is no
            agent (it needs none).
    """

    kind: RouteKind
    target: str
    via: tuple[str, ...]
    state: RouteState
    key: RankKey
    reason: str | None = None
    authorize: str | None = None
    ceiling: Ceiling | None = None

    @property
    def call(self) -> str:
        """The tool call an agent would make: ``call-member(member="builder", task=…)``."""
        if self.kind is RouteKind.CALL_MEMBER:
            return f'call-member(member="{self.target}", task=<this exact command, with absolute paths>)'
        return f'delegate-task(capsule="{self.target}", task=<this exact command, with absolute paths>)'


@attrs.frozen
class Answer:
    """What ``mur agent who`` prints.

    Attributes:
        holders (tuple[Holder, ...]): rows matching the query, formation members first.
        asking (str | None): the ``--as`` capsule or member the routes are for.
        ready (tuple[Route, ...]): ready routes, best first.
        blocked (tuple[Route, ...]): blocked routes (shown only to the operator).
        holds_itself (bool): the asking capsule already holds what was asked for.
    """

    holders: tuple[Holder, ...]
    asking: str | None = None
    ready: tuple[Route, ...] = ()
    blocked: tuple[Route, ...] = ()
    holds_itself: bool = False
    indirect: tuple[Any, ...] = ()  # murmur.routing.indirect.Indirect rows (--can under advisory)
