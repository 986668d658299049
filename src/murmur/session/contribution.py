"""What one contributor adds to a session, as a value, and the one place such values are merged
(spec/session.md "Extension points").

A session contributor (the formation member side, the process tree, the delegation side)
returns a :class:`Contribution` instead of appending to, inserting into and wrapping the
fields of a :class:`~murmur.session.setup.SessionSetup` itself. :func:`add_contributions`
merges a sequence of them into the setup once, in this stated order:

* ``watchers``, ``end_hooks``, ``wind_down_hooks``, ``after_end``, ``token_verifiers``: appended
  in contribution order;
* ``start_hooks_first`` (a registration that must precede everything the session reports):
  placed before every other start hook, the *later* contribution's first (the delegation
  runtime registers with mur-roost before the tree journals the start); then the setup's own
  start hooks; then each contribution's ``start_hooks`` in contribution order;
* ``services``: each contribution's layer ``f(task, services) -> services`` applied in
  contribution order over what the setup's own factory (or an empty
  :class:`~murmur.workload.TaskServices`) gives;
* ``wrap_workload``: applied in contribution order (the first contribution's wrapper is the
  innermost);
* ``completion_handler``: at most one contribution may give one.

The contributions' data fields (``formation_id``, ``lineage``, ``trace_start_fields`` …) are not
here: those are facts a contributor decides, written on the setup as data before the next
contributor reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from murmur.session.auth import TokenVerifier
from murmur.session.completion_hook import CompletionHandler
from murmur.session.setup import EndHook, SessionSetup, SessionSummary, StartHook, Watcher
from murmur.session.tasks.book import Task
from murmur.session.winddown import WindDown
from murmur.workload import TaskServices, Workload

__all__ = ["Contribution", "ServicesLayer", "add_contributions"]

ServicesLayer = Callable[[Task, TaskServices], TaskServices]
"""``layer(task, services) -> services``: what a contributor adds to one task's services."""


@attrs.frozen
class Contribution:
    """What one contributor adds to a session (immutable; merged by :func:`add_contributions`).

    Attributes:
        watchers (tuple[Watcher, ...]): run for the session's life.
        start_hooks_first (tuple[StartHook, ...]): run before every other start hook.
        start_hooks (tuple[StartHook, ...]): run once the door serves, after the first ones.
        end_hooks (tuple[EndHook, ...]): run after every task has ended.
        wind_down_hooks (tuple[Callable[[WindDown], None], ...]): called when the wind-down begins.
        after_end (tuple[Callable[[SessionSummary], None], ...]): called once ``session_end`` is written.
        token_verifiers (tuple[TokenVerifier, ...]): extra bearer-token kinds for the door.
        services (ServicesLayer | None): this contributor's layer of each task's services.
        wrap_workload (Callable[[Workload], Workload] | None): wraps the workload.
        completion_handler (CompletionHandler | None): decides completion-origin requests.
    """

    watchers: tuple[Watcher, ...] = ()
    start_hooks_first: tuple[StartHook, ...] = ()
    start_hooks: tuple[StartHook, ...] = ()
    end_hooks: tuple[EndHook, ...] = ()
    wind_down_hooks: tuple[Callable[[WindDown], None], ...] = ()
    after_end: tuple[Callable[[SessionSummary], None], ...] = ()
    token_verifiers: tuple[TokenVerifier, ...] = ()
    services: ServicesLayer | None = None
    wrap_workload: Callable[[Workload], Workload] | None = None
    completion_handler: CompletionHandler | None = None


def add_contributions(setup: SessionSetup, contributions: Sequence[Contribution | None]) -> None:
    """Merge ``contributions`` (None: a contributor with nothing to add) into ``setup``, once,
    in the order of the module docstring.

    Raises:
        ValueError: two contributions give a completion handler, or one does and the setup
            has one already.
    """
    given = [c for c in contributions if c is not None]
    for c in given:
        setup.watchers.extend(c.watchers)
        setup.end_hooks.extend(c.end_hooks)
        setup.wind_down_hooks.extend(c.wind_down_hooks)
        setup.after_end.extend(c.after_end)
        setup.token_verifiers.extend(c.token_verifiers)
    firsts = [hook for c in reversed(given) for hook in c.start_hooks_first]
    setup.start_hooks[:0] = firsts
    setup.start_hooks.extend(hook for c in given for hook in c.start_hooks)
    layers = [c.services for c in given if c.services is not None]
    if layers:
        setup.services = _layered(setup.services, layers)
    for c in given:
        if c.wrap_workload is not None:
            setup.workload = c.wrap_workload(setup.workload)
    handlers = [c.completion_handler for c in given if c.completion_handler is not None]
    if len(handlers) + (setup.completion_handler is not None and bool(handlers)) > 1:
        raise ValueError("more than one contribution decides completions")
    if handlers:
        setup.completion_handler = handlers[0]


def _layered(base: Callable[[Task], TaskServices] | None,
             layers: Sequence[ServicesLayer]) -> Callable[[Task], TaskServices]:
    def services(task: Task) -> TaskServices:
        got = base(task) if base is not None else TaskServices()
        for layer in layers:
            got = layer(task, got)
        return got

    return services
