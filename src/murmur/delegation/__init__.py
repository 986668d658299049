"""Delegation: a capsule spawns a child capsule under mur-roost, watches it, hears its outcome.

Specification: ``spec/delegation.md``.

Modules::

    spawner       MURMUR_SPAWNER: the handle a child reports to (E-RUN-020)          pure
    environment   the child's environment, built from nothing                      pure
    watch         the delegation bound; what the launcher reports, and when        pure
    book          the delegating session's delegations; its door's completion rule
    completion    completion.json (one reporter) and the completion post
    approval      the approval on a child's stdin
    launcher      POST /spawn → directory → `mur run` → readiness → task → watch
    child_process the child's process: its command, start, readiness line, terminate
    delivery      the task's SendMessage and the answer's GetTask (murmur.a2a)
    reporting     exactly one report per delegation, from the launcher's side
    runtime       registration, hooks and services of one session
    child         the session contributor (called for every `mur run`)
"""
