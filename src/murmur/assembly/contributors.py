"""The session contributors: the pieces that extend every ``mur run`` before it starts.

Each contributor takes the :class:`~murmur.session.session.SessionSetup` being prepared and the
session's environment, writes the facts it decides on the setup as data (the formation id, the
lineage, ``session_start`` fields) and returns a :class:`~murmur.session.Contribution` — its
watchers, hooks, verifiers, services layer and workload wrapper — or None. :func:`contribute`
runs them in this order and merges what they return once, at the end, in the order
:func:`murmur.session.add_contributions` states:

1. the formation member side (:func:`murmur.formation.member.member.contribute`), when the
   environment names a formation;
2. the process tree (:func:`murmur.tree.contributor.contribute`), always (it reads the formation
   fields and decides the lineage the delegation side reads);
3. the delegated-child side (:func:`murmur.delegation.contributor.contribute`), when the run was
   delegated or its manifest may delegate, and the capsule links of a capsule that may
   delegate (:func:`murmur.links.install_links`, the capability socket);
4. the sandbox (:func:`murmur.assembly.sandboxing.contribute`), last, once the command environment
   is known; under advisory nothing is imported.
5. OpenTelemetry export at the end (:func:`span_export`), when a collector is configured.

The formation, delegation and links sides are imported only when their gate says they have work to
do, so a plain session loads neither (nor the transports, roost client and cryptography they
import; spec/session.md "Start-up").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from murmur.delegation import SPAWNER_ENV, SPAWNER_LIFELINE_ENV, parse_spawner
from murmur.formation import names_formation
from murmur.session import Contribution, SessionSetup, add_contributions
from murmur.stderr import say
from murmur.tree import contribute as tree_contribute

if TYPE_CHECKING:
    from murmur.delegation import DelegationRuntime

Contributor = Callable[[SessionSetup, Mapping[str, str]], "Contribution | None"]
"""``contribute(setup, environ) -> Contribution | None``; a ``DiagnosticError`` refuses the launch."""


def delegation_wanted(setup: SessionSetup, environ: Mapping[str, str]) -> bool:
    """Whether the delegation side can have anything to do: the run was delegated (either
    spawner variable is present) or its manifest may delegate."""
    return SPAWNER_ENV in environ or SPAWNER_LIFELINE_ENV in environ or bool(setup.manifest.spawn_allow)


def formation_member(setup: SessionSetup, environ: Mapping[str, str]) -> Contribution | None:
    """Join the formation the environment names (``E-RUN-044``/``E-RUN-046`` refuse)."""
    if not names_formation(environ):
        return None
    # the member side, only for a run in a formation
    from murmur.formation import contribute as formation_contribute

    return formation_contribute(setup, environ)


def process_tree(setup: SessionSetup, environ: Mapping[str, str]) -> Contribution:
    """Decide the lineage against the spawner handle and hook the tree journal in
    (``E-RUN-020``: an unreadable ``MURMUR_SPAWNER``; ``E-TRE-001``: a bad lineage)."""
    spawner = parse_spawner(environ.get(SPAWNER_ENV))
    return tree_contribute(setup, environ, spawner_session=spawner.session_id if spawner else None,
                           spawner_delegation=spawner.delegation_id if spawner else None)


def delegated_child(setup: SessionSetup, environ: Mapping[str, str]) -> Contribution | None:
    """The delegation side: a delegated child's completion, ``delegate-task`` services, and
    for a capsule that may delegate, its capsule links (:func:`capsule_links`)."""
    if not delegation_wanted(setup, environ):
        return None
    # the delegation side, only when it has work
    from murmur.delegation import contribute as delegation_contribute

    got = delegation_contribute(setup, environ)
    if got is None:
        return None
    given, runtime = got
    if setup.manifest.spawn_allow:
        capsule_links(setup, runtime)
    return given


def capsule_links(setup: SessionSetup, runtime: DelegationRuntime) -> None:
    """Write the session's links and serve its capability socket (spec/links.md); a links
    directory that cannot be written is one line on stderr, never a refused launch."""
    from murmur.links import install_links

    try:
        install_links(setup, runtime)
    except OSError as exc:
        say(f"[capsule-runtime] the capsule links could not be written: {exc.strerror or exc}")


def sandboxed(setup: SessionSetup, environ: Mapping[str, str]) -> None:
    """The sandbox of the session's commands (spec/containment.md); advisory imports nothing.
    It writes the command environment on the setup itself (it has no hooks to contribute)."""
    if setup.containment.value == "advisory":
        return
    from murmur.assembly.sandboxing import contribute as sandbox_contribute

    sandbox_contribute(setup, environ)


def span_export(setup: SessionSetup, environ: Mapping[str, str]) -> Contribution | None:
    """OpenTelemetry export at the session's end, when ``observability.otel_endpoint`` or the
    standard ``OTEL_EXPORTER_OTLP_*ENDPOINT`` names a collector (spec/trace.md); the exporter
    is imported only then."""
    configured = setup.manifest.observability.otel_endpoint if setup.manifest.observability else None
    if not (configured or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
            or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()):
        return None
    from murmur.observe import otlp

    url = otlp.endpoint(configured, environ)
    if url is None:
        return None
    trace, log, bound = setup.records.trace, setup.records.logs / "otel.log", otlp.timeout(environ)

    def after_end(_summary: object) -> None:
        otlp.export_session(trace, url, log=log, timeout=bound)

    return Contribution(after_end=(after_end,))


CONTRIBUTORS: tuple[Contributor, ...] = (
    formation_member, process_tree, delegated_child, sandboxed, span_export,
)
"""Every session contributor, in the order they run."""


def contribute(setup: SessionSetup, environ: Mapping[str, str], *, first: Contribution | None = None) -> None:
    """Run every contributor (:data:`CONTRIBUTORS`) in order, then merge what they returned
    into ``setup`` once (:func:`murmur.session.add_contributions`), after ``first`` (what the
    composition root contributed before them: the tree's inference gateway,
    :func:`murmur.assembly.gatewaying.contribute`, which needs the run's ``--budget-tokens``).

    Raises:
        DiagnosticError: a contributor refuses the launch (e.g. ``E-RUN-046``, ``E-RUN-020``).
    """
    add_contributions(setup, [first, *(contributor(setup, environ) for contributor in CONTRIBUTORS)])
