"""Roster admission: a parsed roster bound to exact installed artifacts, or refused whole.

``spec/roster.md`` "Admission order". Admission checks, in this order, and stops
at the first failure; within a check, members are taken in roster order:

=====  ==========================================================  ==============
order  check                                                       code
=====  ==========================================================  ==============
1      ``roster.yaml`` reads and has the shape                      ``E-ROS-001``
2      member names are unique                                      ``E-ROS-003``
3      exactly one member has ``entry: true``                       ``E-ROS-002``
4      every rule's ``from`` and ``to`` names a member              ``E-ROS-004``
5      no rule lists the entry member in ``to``                     ``E-ROS-008``
6      each member is installed at its version and its packed       ``E-ROS-007``
       ``murmur.yaml`` parses; ``murmur.lock`` agrees with it       ``E-REG-005``
7      every member a rule calls serves peers                       ``E-ROS-005``
8      with any edge, every member's door requires authentication   ``E-ROS-006``
=====  ==========================================================  ==============

Check 1 is :func:`murmur.formation.roster.schema.load_roster`. Checks 2-5 read no store: they run
before the resolver is called even once. Check 6 takes each member through both of its rows
(the resolver does the lock comparison) before the next member. An admitted roster is then
compared against each called member's ``lifecycle``: ``W-ROS-001`` names every member more
members may call than it holds tasks at once; the roster is still admitted.

Everything here is pure given the resolver: the store lookup is an injected callable, so
tests use fakes and :func:`store_resolver` wires the real registry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, Protocol

import attrs

from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.formation.roster.schema import (
    ROSTER_FILENAME,
    ReachabilityKind,
    Roster,
    RosterMember,
    load_roster,
)
from murmur.manifest import Manifest, TaskAcceptance

W_ROS_001_LINK = "https://docs.murmur.nexus/reference/diagnostics/#w-ros-001"
"""The documentation link every ``W-ROS-001`` line ends with."""


class ResolvedCapsule(Protocol):
    """What admission needs from a store lookup (``murmur.registry.Installed`` has it).

    Attributes:
        sha256 (str): 64 lowercase hex digits of the artifact's bytes.
        archive (Path): the installed ``.mur.zip``.
        manifest (Manifest): its packed ``murmur.yaml``, parsed.
    """

    @property
    def sha256(self) -> str: ...

    @property
    def archive(self) -> Path: ...

    @property
    def manifest(self) -> Manifest: ...


Resolver = Callable[[str, str], ResolvedCapsule]
"""``resolve(capsule, version)``: the installed artifact, project store first, then global.

It compares the result with the project's ``murmur.lock`` when the lock pins the capsule, and
raises :class:`DiagnosticError` on failure: ``E-REG-005`` for a lock disagreement, anything
else (``E-REG-001`` not installed, ``E-REG-002`` bytes changed, ``E-MAN-*`` packed manifest
unreadable, ...) becomes ``E-ROS-007``.
"""


@attrs.frozen
class Edge:
    """``caller`` may call ``callee`` (both member names; ``callee`` is never the entry)."""

    caller: str
    callee: str


@attrs.frozen
class AdmittedMember:
    """One member bound to the artifact admission resolved for it.

    Attributes:
        name (str): the member's name within the roster.
        capsule (str): the artifact it runs, ``<scope>/<name>``.
        version (str): the exact version the roster pins.
        sha256 (str): hash of the artifact bytes admission checked; whatever starts this
            member must start these bytes and no others (``E-RUN-047`` otherwise).
        manifest (Manifest): its packed ``murmur.yaml``.
        entry (bool): whether this is the entry member.
        callees (tuple[str, ...]): the members it may call, in roster order.
        archive (Path | None): the installed ``.mur.zip`` admission resolved.
        line (int): 1-based line of its ``name:`` in ``roster.yaml``.
    """

    name: str
    capsule: str
    version: str
    sha256: str
    manifest: Manifest
    entry: bool
    callees: tuple[str, ...] = ()
    archive: Path | None = None
    line: int = 1

    @property
    def coordinate(self) -> str:
        """``<capsule>@<version>``."""
        return f"{self.capsule}@{self.version}"

    @property
    def serves_peers(self) -> bool:
        """Whether it declares ``exports.peer_tasks.accept: true``."""
        return self.manifest.accepts_peer_tasks

    @property
    def authenticated(self) -> bool:
        """Whether its door requires authentication (``network.authentication``)."""
        return self.manifest.authentication is not None


@attrs.frozen
class CallerOverflow:
    """A member the roster lets more members call than its lifecycle holds at once.

    Attributes:
        member (str): the called member.
        capsule (str): its ``<scope>/<name>``.
        version (str): its version.
        callers (tuple[str, ...]): every member with an edge into it, in roster order.
        task_acceptance (TaskAcceptance): its ``lifecycle.task_acceptance``.
        queue_depth (int): its ``lifecycle.queue_depth``.
        holds (int): tasks it holds at once (always ``< len(callers)``).
        sufficient_queue_depth (int): the ``queue_depth`` that, under ``queue``, holds every
            caller: ``max(len(callers) - 1, 1)``.
    """

    member: str
    capsule: str
    version: str
    callers: tuple[str, ...]
    task_acceptance: TaskAcceptance
    queue_depth: int
    holds: int
    sufficient_queue_depth: int

    def warning(self) -> Diagnostic:
        """The ``W-ROS-001`` diagnostic; its render is exactly the one documented line."""
        return Diagnostic("W-ROS-001", caller_overflow_message(self))

    def fix(self) -> str:
        """The one-line remedy ``mur doctor`` prints under ``Fix:``."""
        depth = self.sufficient_queue_depth
        if self.task_acceptance is TaskAcceptance.QUEUE:
            setting = f"lifecycle.queue_depth: {depth}"
        else:
            setting = f"lifecycle.task_acceptance: queue and lifecycle.queue_depth: {depth}"
        return (
            f"{self.member} ({self.capsule}@{self.version}): set {setting} in its murmur.yaml, "
            f"or let fewer members call it in {ROSTER_FILENAME} (warning[W-ROS-001])"
        )


@attrs.frozen
class AdmittedRoster:
    """A roster that passed every admission check: what the formation launcher consumes.

    Attributes:
        source (str): the ``roster.yaml`` as named in diagnostics.
        project_dir (Path | None): the roster's project directory (its stores and lock).
        members (tuple[AdmittedMember, ...]): every member, in roster order.
        edges (tuple[Edge, ...]): every edge once, ordered by the roster index of ``caller``
            then of ``callee``; no edge leads into the entry member.
        reachability (ReachabilityKind): how ``reachability`` was written, before expansion.
        warnings (tuple[Diagnostic, ...]): ``W-ROS-001`` per overflowing member, in roster
            order; each renders as exactly one line (``mur run --roster`` prefixes
            ``[mur run] ``).
        overflows (tuple[CallerOverflow, ...]): the facts behind ``warnings``, same order.
    """

    source: str
    project_dir: Path | None
    members: tuple[AdmittedMember, ...]
    edges: tuple[Edge, ...]
    reachability: ReachabilityKind
    warnings: tuple[Diagnostic, ...] = ()
    overflows: tuple[CallerOverflow, ...] = ()
    max_tree_total: int | None = None  # the roster's tree caps (spec/roster.md "Tree caps")
    max_same_capsule_chain: int | None = None
    budget_tokens: int | None = None  # the roster's tree budget (spec/roster.md "Tree budget")

    @property
    def entry(self) -> AdmittedMember:
        """The entry member (exactly one)."""
        return next(m for m in self.members if m.entry)

    @property
    def peers(self) -> tuple[AdmittedMember, ...]:
        """Every member except the entry member, in roster order (started first, at once)."""
        return tuple(m for m in self.members if not m.entry)

    @property
    def has_edges(self) -> bool:
        """Whether any member may call any other (then every door is authenticated)."""
        return bool(self.edges)

    def member(self, name: str) -> AdmittedMember:
        """The member called ``name``.

        Raises:
            KeyError: no member has that name.
        """
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    def callees(self, name: str) -> tuple[AdmittedMember, ...]:
        """The members ``name`` may call, in roster order."""
        return tuple(self.member(c) for c in self.member(name).callees)

    def callers(self, name: str) -> tuple[str, ...]:
        """The members that may call ``name``, in roster order."""
        return tuple(e.caller for e in self.edges if e.callee == name)

    def may_call(self, caller: str, callee: str) -> bool:
        """Whether the edge ``caller -> callee`` exists (False for non-members)."""
        return Edge(caller, callee) in self.edges


# --- entry points ---------------------------------------------------------------------


def admit_file(
    path: Path,
    *,
    resolve: Resolver | None = None,
    display: str | None = None,
) -> AdmittedRoster:
    """Load ``path`` (check 1) and admit it (checks 2-8).

    Args:
        path (Path): the ``roster.yaml``.
        resolve (Resolver | None): the store lookup; default :func:`store_resolver` for the
            roster's directory (project store, then global store, then ``murmur.lock``).
        display (str | None): how diagnostics name the file (default ``str(path)``).

    Returns:
        AdmittedRoster: the admitted roster.

    Raises:
        DiagnosticError: the first refusal, with one code (``E-ROS-00N`` or ``E-REG-005``).
    """
    roster = load_roster(path, display=display)
    project_dir = path.resolve().parent
    return admit(roster, resolve or store_resolver(project_dir), project_dir=project_dir)


def store_resolver(project_dir: Path) -> Resolver:
    """The real store lookup for a roster in ``project_dir`` (``murmur.registry.resolve``).

    Args:
        project_dir (Path): the roster's project directory; its ``.murmur/artifacts`` is
            searched first, then the global store, and its ``murmur.lock`` is compared.
    """

    def resolve(capsule: str, version: str) -> ResolvedCapsule:
        from murmur import registry

        installed: ResolvedCapsule = registry.resolve(
            capsule, version, project_dir=project_dir, check_lock=True
        )
        return installed

    return resolve


def admit(roster: Roster, resolve: Resolver, *, project_dir: Path | None = None) -> AdmittedRoster:
    """Admit a parsed roster: checks 2-8 in order, then the ``W-ROS-001`` comparison.

    Args:
        roster (Roster): a roster that passed check 1.
        resolve (Resolver): the store lookup; never called unless checks 2-5 pass.
        project_dir (Path | None): recorded on the result for the launcher.

    Returns:
        AdmittedRoster: members in roster order, the expanded edges, and warnings.

    Raises:
        DiagnosticError: the first refusal (one diagnostic, pointing at the roster line).
    """
    entry_index = check_structure(roster)
    resolved = [_resolve_member(roster, m, resolve) for m in roster.members]
    index = {m.name: i for i, m in enumerate(roster.members)}
    pairs = _expand(roster, resolved, entry_index, index)
    if roster.reachability is ReachabilityKind.RULES:
        _check_callees_serve(roster, resolved, pairs)
    if pairs:
        _check_authentication(roster, resolved)
    members = tuple(
        AdmittedMember(
            name=m.name,
            capsule=m.capsule,
            version=m.version,
            sha256=r.sha256,
            manifest=r.manifest,
            entry=i == entry_index,
            callees=tuple(roster.members[t].name for f, t in pairs if f == i),
            archive=r.archive,
            line=m.line,
        )
        for i, (m, r) in enumerate(zip(roster.members, resolved, strict=True))
    )
    edges = tuple(Edge(roster.members[f].name, roster.members[t].name) for f, t in pairs)
    overflows = caller_overflows(members, edges)
    return AdmittedRoster(
        source=roster.path,
        project_dir=project_dir,
        members=members,
        edges=edges,
        reachability=roster.reachability,
        warnings=tuple(o.warning() for o in overflows),
        overflows=overflows,
        max_tree_total=roster.max_tree_total,
        max_same_capsule_chain=roster.max_same_capsule_chain,
        budget_tokens=roster.budget_tokens,
    )


def check_structure(roster: Roster) -> int:
    """Checks 2-5, which read no store.

    Returns:
        int: the index of the entry member.

    Raises:
        DiagnosticError: ``E-ROS-003``, ``E-ROS-002``, ``E-ROS-004`` or ``E-ROS-008``.
    """
    seen: set[str] = set()
    for m in roster.members:
        if m.name in seen:
            _refuse(roster, "E-ROS-003", m.line,
                    f"member name '{m.name}' is declared more than once",
                    hint="give each member its own name; two members may run the same capsule")
        seen.add(m.name)

    entries = [i for i, m in enumerate(roster.members) if m.entry]
    if not entries:
        _refuse(roster, "E-ROS-002", roster.members_line,
                "no member is marked `entry: true`; a roster designates exactly one entry member",
                hint="add `entry: true` to the member that receives the formation's task")
    if len(entries) > 1:
        names = ", ".join(f"'{roster.members[i].name}'" for i in entries)
        second = roster.members[entries[1]]
        _refuse(roster, "E-ROS-002", second.entry_line or second.line,
                f"members {names} are each marked `entry: true`; a roster designates exactly "
                "one entry member",
                hint="keep `entry: true` on one member only")
    entry = roster.members[entries[0]]

    for rule in roster.rules:
        for named in (rule.caller, *rule.callees):
            if named.name not in seen:
                _refuse(roster, "E-ROS-004", named.line,
                        f"the reachability rule from '{rule.caller.name}' names "
                        f"'{named.name}', which is not a member of this roster",
                        hint="a rule names members by their `name`, not their capsule")
    for rule in roster.rules:
        for named in rule.callees:
            if named.name == entry.name:
                _refuse(roster, "E-ROS-008", named.line,
                        f"the reachability rule from '{rule.caller.name}' lists the entry "
                        f"member '{entry.name}' in `to`, but the entry member is never "
                        "called: it runs the formation's own task until the formation ends",
                        hint=f"to have '{rule.caller.name}' report to '{entry.name}', let "
                        f"'{entry.name}' call it: `from: {entry.name}` with "
                        f"'{rule.caller.name}' in `to`")
    return entries[0]


def tasks_held_at_once(manifest: Manifest) -> int:
    """How many tasks a member's lifecycle holds at once (running plus waiting).

    ``single`` holds 1; ``queue`` with depth d > 0 holds 1 + d; ``queue`` with depth 0 and
    ``none`` hold 0.
    """
    lc = manifest.lifecycle
    if lc.task_acceptance is TaskAcceptance.SINGLE:
        return 1
    if lc.task_acceptance is TaskAcceptance.QUEUE and lc.queue_depth > 0:
        return 1 + lc.queue_depth
    return 0


def caller_overflows(
    members: tuple[AdmittedMember, ...], edges: tuple[Edge, ...]
) -> tuple[CallerOverflow, ...]:
    """Every member whose callers outnumber the tasks it holds at once, in roster order.

    Each calling member counts once (a member holds at most one unanswered call to a given
    member); a member nothing calls never overflows, the entry member included.
    """
    out: list[CallerOverflow] = []
    for m in members:
        callers = tuple(e.caller for e in edges if e.callee == m.name)
        holds = tasks_held_at_once(m.manifest)
        if len(callers) > holds:
            lc = m.manifest.lifecycle
            out.append(
                CallerOverflow(
                    member=m.name,
                    capsule=m.capsule,
                    version=m.version,
                    callers=callers,
                    task_acceptance=lc.task_acceptance,
                    queue_depth=lc.queue_depth,
                    holds=holds,
                    sufficient_queue_depth=max(len(callers) - 1, 1),
                )
            )
    return tuple(out)


def caller_overflow_message(o: CallerOverflow) -> str:
    """The ``W-ROS-001`` message (after ``warning[W-ROS-001]: ``), link included.

    Shape (``spec/roster.md`` "``W-ROS-001``"): ``roster.yaml lets <n> member(s) call '<m>'
    (<callers>), but it holds <capacity> so <rejection>; <remedy> would hold them all
    (<link>)``.
    """
    count = len(o.callers)
    noun = "member" if count == 1 else "members"
    depth = o.sufficient_queue_depth
    if o.task_acceptance is TaskAcceptance.QUEUE and o.queue_depth > 0:
        capacity = (f"{o.holds} tasks at once (one running, lifecycle.queue_depth: "
                    f"{o.queue_depth} waiting)")
        rejection = "a call arriving while it is full is rejected"
        remedy = f"lifecycle.queue_depth: {depth}"
    elif o.task_acceptance is TaskAcceptance.QUEUE:
        capacity = "no task (lifecycle.queue_depth: 0)"
        rejection = "every call is rejected"
        remedy = f"lifecycle.queue_depth: {depth}"
    elif o.task_acceptance is TaskAcceptance.SINGLE:
        capacity = "1 task at once (lifecycle.task_acceptance: single)"
        rejection = "a call arriving while it is busy is rejected"
        remedy = f"lifecycle.task_acceptance: queue with lifecycle.queue_depth: {depth}"
    else:
        capacity = "no task (lifecycle.task_acceptance: none)"
        rejection = "every call is rejected"
        remedy = f"lifecycle.task_acceptance: queue with lifecycle.queue_depth: {depth}"
    return (
        f"{ROSTER_FILENAME} lets {count} {noun} call '{o.member}' ({', '.join(o.callers)}), "
        f"but it holds {capacity} so {rejection}; {remedy} would hold them all "
        f"({W_ROS_001_LINK})"
    )


# --- check helpers --------------------------------------------------------------------


def _refuse(roster: Roster, code: str, line: int | None, message: str, *,
            hint: str | None = None) -> NoReturn:
    raise DiagnosticError(
        error(code, f"{ROSTER_FILENAME}: {message}", hint=hint, path=roster.path, line=line)
    )


def _resolve_member(roster: Roster, m: RosterMember, resolve: Resolver) -> ResolvedCapsule:
    """Check 6 for one member: installed, packed manifest parses, lock agrees."""
    try:
        return resolve(m.capsule, m.version)
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        if first.code == "E-REG-005":
            _refuse(roster, "E-REG-005", m.line,
                    f"member '{m.name}': murmur.lock disagrees for '{m.capsule}': "
                    f"{first.message}",
                    hint=first.hint or "reinstall the version the lock pins, or update the lock "
                    "with `mur install`")
        hint: str | None
        if first.code == "E-REG-001":
            reason = "not installed in the project or global store"
            short = m.capsule.split("/")[-1]
            hint = (f"install it first: `mur build` its source, then "
                    f"`mur install -g {short}-{m.version}.mur.zip`")
        else:
            reason = f"{first.message} ({first.code})"
            hint = first.hint
        _refuse(roster, "E-ROS-007", m.line,
                f"member '{m.name}' ({m.coordinate}) cannot be admitted: {reason}", hint=hint)
    except OSError as exc:
        _refuse(roster, "E-ROS-007", m.line,
                f"member '{m.name}' ({m.coordinate}) cannot be admitted: "
                f"its artifact cannot be read ({exc.strerror or exc})")


def _expand(
    roster: Roster,
    resolved: list[ResolvedCapsule],
    entry_index: int,
    index: dict[str, int],
) -> tuple[tuple[int, int], ...]:
    """The edge set as sorted ``(caller index, callee index)`` pairs, without repeats."""
    pairs: set[tuple[int, int]] = set()
    if roster.reachability is ReachabilityKind.ALL:
        serving = [i for i, r in enumerate(resolved) if r.manifest.accepts_peer_tasks]
        pairs = {(f, t) for f in serving for t in serving if f != t and t != entry_index}
    elif roster.reachability is ReachabilityKind.RULES:
        for rule in roster.rules:
            f = index[rule.caller.name]
            pairs.update((f, index[c.name]) for c in rule.callees)
    return tuple(sorted(pairs))


def _check_callees_serve(
    roster: Roster, resolved: list[ResolvedCapsule], pairs: tuple[tuple[int, int], ...]
) -> None:
    """Check 7: every member a rule lists in ``to`` declares ``peer_tasks.accept: true``."""
    called = {t for _, t in pairs}
    for i, m in enumerate(roster.members):
        if i in called and not resolved[i].manifest.accepts_peer_tasks:
            line = next(
                c.line for rule in roster.rules for c in rule.callees if c.name == m.name
            )
            _refuse(roster, "E-ROS-005", line,
                    f"member '{m.name}' is listed in a reachability rule's `to`, but its "
                    "manifest does not declare `exports.peer_tasks.accept: true`",
                    hint=f"declare `exports.peer_tasks.accept: true` in {m.capsule}'s "
                    "murmur.yaml and reinstall it, or remove it from the rule")


def _check_authentication(roster: Roster, resolved: list[ResolvedCapsule]) -> None:
    """Check 8: with any edge, every member declares ``network.authentication``."""
    for m, r in zip(roster.members, resolved, strict=True):
        if r.manifest.authentication is None:
            _refuse(roster, "E-ROS-006", m.line,
                    f"member '{m.name}' declares no `network.authentication`, and this roster "
                    "has edges, so every member's door must require authentication",
                    hint=f"declare `network: {{authentication: {{scheme: bearer}}}}` in "
                    f"{m.capsule}'s murmur.yaml and reinstall it")
