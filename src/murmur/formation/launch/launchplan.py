"""What each member of a launch is started with: command line, environment, channel (pure).

Specification: ``spec/formation.md`` "What each member is started with" and "The launch, step
by step" (steps 3 and 6); the channel's lines: ``spec/formation-tokens.md`` "The formation
channel".

Every member runs ``mur run --capsule <scope>/<name> --capsule-version <v> --json``, bound
to 127.0.0.1 (``mur run``'s default), in the launcher's current directory, with:

* ``--workdir``: a peer's own directory under ``$MURMUR_HOME/formations/``; for the entry
  member, the roster's project directory;
* ``--project-dir``: the roster's project directory, whose stores (project, then global) and
  ``murmur.lock`` every member resolves its artifacts from, wherever it works;
* ``--deadline``: the formation's one moment, as an absolute RFC 3339 time, when given;
* for the entry member, the lifecycle the launch sets (``--task``: single + exit; none:
  queue + sleep, which has no idle timeout) and ``--json`` only when the launcher has it;
* ``--no-env-file`` and ``--containment`` when the launcher was given them.

The environment is the launcher's, with ``MURMUR_FORMATION_ID`` and
``MURMUR_HOST_WARNINGS_REPORTED=1`` set and every other formation or spawner variable
removed (the spawner adds ``MURMUR_FORMATION_CHANNEL`` and ``MURMUR_FORMATION_LIFELINE``
naming the descriptors it makes). No token is ever put in an argument or a variable: tokens
travel only on the channel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from murmur import tracectx
from murmur.formation.launch.supervise import MemberSpec
from murmur.formation.roster.admission import AdmittedMember, AdmittedRoster
from murmur.formation.wire import channel
from murmur.formation.wire.edge_tokens import FormationKey

# Variables a member must never inherit from the launcher: the launcher sets its own
# formation variables, and a spawner handle belongs to the launcher, not its members.
_STRIPPED = (
    "MURMUR_FORMATION_ID",
    "MURMUR_FORMATION_CHANNEL",
    "MURMUR_FORMATION_LIFELINE",
    "MURMUR_FORMATION_PEERS",
    "MURMUR_SPAWNER",
    "MURMUR_SPAWNER_LIFELINE",
)


@attrs.frozen
class RosterOptions:
    """The ``mur run --roster`` flags that shape members' command lines.

    Attributes:
        task (str | None): ``--task`` (text or a path), handed to the entry member.
        json (bool): ``--json``.
        verbose (bool): ``--verbose`` (passed to the entry member).
        no_env_file (bool): ``--no-env-file`` (passed to every member).
        containment (str | None): ``--containment`` (passed to every member).
        budget_tokens (int | None): ``--budget-tokens``, the formation's tree budget, held by
            the launcher's gateway (spec/gateway.md); members are not handed it.
        max_tree_total (int | None), max_same_capsule_chain (int | None): the tree caps'
            flags; with the roster's keys the smaller wins (spec/roster.md "Tree caps").
    """

    task: str | None = None
    json: bool = False
    verbose: bool = False
    no_env_file: bool = False
    containment: str | None = None
    budget_tokens: int | None = None
    max_tree_total: int | None = None
    max_same_capsule_chain: int | None = None


@attrs.frozen
class PeerPlan:
    """One peer to start.

    Attributes:
        member (AdmittedMember): what admission bound it to.
        spec (MemberSpec): how to start it.
        workdir (Path): its work folder.
    """

    member: AdmittedMember
    spec: MemberSpec
    workdir: Path


@attrs.frozen
class LaunchPlan:
    """Everything a launch starts, decided before anything starts.

    Attributes:
        formation_id (str): the launch's ``frm_`` id.
        peers (tuple[PeerPlan, ...]): every peer, in roster order.
        entry (AdmittedMember): the entry member.
        entry_spec (MemberSpec): how to start it; its channel holds only its first line (and
            its callees line, spec/formation-tokens.md)
            until :func:`entry_spec_with_addresses` adds its callees' addresses and its role.
    """

    formation_id: str
    peers: tuple[PeerPlan, ...]
    entry: AdmittedMember
    entry_spec: MemberSpec

    def callees(self, name: str) -> tuple[str, ...]:
        """The members ``name`` may call, in roster order."""
        if name == self.entry.name:
            return self.entry.callees
        for p in self.peers:
            if p.member.name == name:
                return p.member.callees
        raise KeyError(name)


def member_env(base: Mapping[str, str], formation_id: str) -> dict[str, str]:
    """A member's environment: ``base`` minus formation/spawner variables, plus its own
    (``TRACEPARENT`` naming :func:`formation_span`).

    Args:
        base (Mapping[str, str]): the launcher's environment.
        formation_id (str): the launch's ``frm_`` id.
    """
    env = {k: v for k, v in base.items() if k not in _STRIPPED}
    env["MURMUR_FORMATION_ID"] = formation_id
    env["MURMUR_HOST_WARNINGS_REPORTED"] = "1"
    env[tracectx.ENV] = formation_span(base, formation_id).traceparent
    return env


def formation_span(base: Mapping[str, str], formation_id: str) -> tracectx.SpanContext:
    """The formation's span (spec/trace.md "Trace ids"): the trace of the launcher's own
    ``TRACEPARENT`` when it has one, else the formation id's 32 hex digits; the span id is
    the formation id's last 16 hex digits. Every member's ``session_start`` names it."""
    joined = tracectx.from_env(base)
    trace_id = joined.trace_id if joined is not None else formation_id[-32:]
    return tracectx.SpanContext(trace_id, tracectx.span_of(formation_id))


def member_argv(
    mur: Sequence[str],
    member: AdmittedMember,
    *,
    workdir: Path,
    project_dir: Path,
    options: RosterOptions,
    deadline: str | None,
) -> tuple[str, ...]:
    """A member's command line.

    Args:
        mur (Sequence[str]): how to run ``mur`` (:func:`murmur.formation.launch.process.mur_command`).
        member (AdmittedMember): the member.
        workdir (Path): its work folder.
        project_dir (Path): the roster's project directory (its stores and lock).
        options (RosterOptions): the launch's flags.
        deadline (str | None): the formation's moment as RFC 3339, or None.
    """
    argv = [
        *mur,
        "run",
        "--capsule",
        member.capsule,
        "--capsule-version",
        member.version,
        "--workdir",
        str(workdir),
        "--project-dir",
        str(project_dir),
    ]
    if member.entry:
        if options.task is not None:
            argv += [
                "--lifecycle-task-acceptance", "single",
                "--lifecycle-after-task", "exit",
                "--task", options.task,
            ]
        else:
            argv += ["--lifecycle-task-acceptance", "queue", "--lifecycle-after-task", "sleep"]
        if options.json:
            argv.append("--json")
        if options.verbose:
            argv.append("--verbose")
    else:
        argv.append("--json")
    if deadline is not None:
        argv += ["--deadline", deadline]
    if options.no_env_file:
        argv.append("--no-env-file")
    if options.containment:
        argv += ["--containment", options.containment]
    return tuple(argv)


def credentials_line(key: FormationKey, formation_id: str, member: AdmittedMember) -> bytes:
    """A member's first channel line: formation, name, verify key, one token per callee."""
    calls = tuple(
        channel.Call(c, key.mint(formation=formation_id, caller=member.name, callee=c))
        for c in member.callees
    )
    creds = channel.Credentials(formation_id, member.name, key.verify_key(), calls)
    return channel.encode_credentials(creds)


def callees_line(member: AdmittedMember, members: Sequence[AdmittedMember]) -> bytes:
    """A member's callees line: what each callee's admitted manifest says of its spending
    ceiling (empty bytes for a member that may call nobody)."""
    if not member.callees:
        return b""
    by_name = {m.name: m for m in members}
    facts = []
    for name in member.callees:
        manifest = by_name[name].manifest
        inf = manifest.inference
        facts.append(channel.CalleeFacts(name, manifest.name, inf is not None,
                                         inf.max_turns if inf is not None else 0,
                                         inf.budget_tokens if inf is not None else None))
    return channel.encode_callees(facts)


def addresses_line(callees: Sequence[str], urls: Mapping[str, str]) -> bytes:
    """An ``addresses`` line naming each callee's door (callees without a URL are left out)."""
    return channel.encode_addresses(
        channel.Address(name, urls[name]) for name in callees if name in urls
    )


def build_launch_plan(
    admitted: AdmittedRoster,
    *,
    formation_id: str,
    key: FormationKey,
    project_dir: Path,
    peer_dirs: Mapping[str, Path],
    options: RosterOptions,
    mur: Sequence[str],
    base_env: Mapping[str, str],
    cwd: str,
    deadline: str | None,
) -> LaunchPlan:
    """Plan a launch: each member's command line, environment and channel's first line.

    Args:
        admitted (AdmittedRoster): the admitted roster.
        formation_id (str): the minted ``frm_`` id.
        key (FormationKey): the minted signing key (stays in this process).
        project_dir (Path): the roster's project directory (resolved).
        peer_dirs (Mapping[str, Path]): each peer's work folder (made already).
        options (RosterOptions): the launch's flags.
        mur (Sequence[str]): how to run ``mur``.
        base_env (Mapping[str, str]): the launcher's environment.
        cwd (str): the launcher's current directory (every member's).
        deadline (str | None): the formation's moment as RFC 3339, or None.
    """
    env = member_env(base_env, formation_id)
    peers = []
    for m in admitted.peers:
        workdir = peer_dirs[m.name]
        argv = member_argv(
            mur, m, workdir=workdir, project_dir=project_dir, options=options, deadline=deadline
        )
        spec = MemberSpec(
            name=m.name,
            argv=argv,
            env=env,
            cwd=cwd,
            channel=credentials_line(key, formation_id, m) + callees_line(m, admitted.members),
            peer=True,
        )
        peers.append(PeerPlan(m, spec, workdir))
    entry = admitted.entry
    entry_spec = MemberSpec(
        name=entry.name,
        argv=member_argv(
            mur, entry, workdir=project_dir, project_dir=project_dir, options=options,
            deadline=deadline,
        ),
        env=env,
        cwd=cwd,
        channel=credentials_line(key, formation_id, entry) + callees_line(entry, admitted.members),
        peer=False,
    )
    return LaunchPlan(formation_id, tuple(peers), entry, entry_spec)


def entry_spec_with_addresses(plan: LaunchPlan, urls: Mapping[str, str]) -> MemberSpec:
    """The entry member's spec with its callees' addresses and its role on its channel."""
    extra = b""
    if plan.entry.callees:
        extra += addresses_line(plan.entry.callees, urls)
    extra += channel.encode_entry_role()
    return attrs.evolve(plan.entry_spec, channel=plan.entry_spec.channel + extra)
