"""The session side of the inference gateway (spec/gateway.md "One gateway per root").

:func:`contribute` runs before the other contributors (so the command environment names the
gateway) and returns a :class:`~murmur.session.Contribution`, merged with theirs once
(:mod:`murmur.assembly.contributors`):

* a **root** whose tree can call models (:func:`tree_calls_models`: an ``inference`` block, a
  ``spawn.allow`` entry, or ``--budget-tokens``) and that is neither a delegated child nor a
  formation member, unless ``MURMUR_GATEWAY=off``, binds a loopback socket now, names it in
  ``MURMUR_GATEWAY_ENDPOINT`` of the session's environment (so its driver and every
  delegated descendant find it), and serves the gateway from its watcher for the session's life. The
  key table holds the root's ``inference.api_key`` reference, resolved from its own
  environment; the tree's root node is this process, with its ``network.allow`` plus its own
  inference endpoint, and the ``--budget-tokens`` ceiling;
* a **descendant** (``MURMUR_GATEWAY_ENDPOINT`` already set) registers itself from its start hook, so its
  calls are charged to its own node (its ceiling: the smaller of ``--budget-tokens`` and what
  its parent has left) and carry its key: the registration names its ``inference.api_key``
  reference and endpoint, and the reference's value when its own environment holds it (then
  the gateway attaches that value to its calls; otherwise the tree's).

It returns a :class:`~murmur.session.Contribution` (the serving watcher, the registration
start hook) that the composition root merges with the other contributors'; the facts it
decides (the ``gateway`` field of ``session_start``, the URL in the session's environment) it
writes as data. A plan session without ``spawn.allow`` or ``--budget-tokens`` imports nothing
of the gateway.
"""

from __future__ import annotations

import socket
import sys
import weakref
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from murmur.delegation import SPAWNER_ENV, SPAWNER_LIFELINE_ENV
from murmur.formation import names_formation
from murmur.manifest import Manifest
from murmur.session import Contribution, SessionSetup

__all__ = ["OPT_IN_ENV", "contribute", "reach_of", "tree_calls_models", "wanted"]

_ENDPOINT_ENV = "MURMUR_GATEWAY_ENDPOINT"
OPT_IN_ENV = "MURMUR_GATEWAY"
"""``off`` (or ``0``, ``no``) sends a root's model calls straight to the provider; by default a
root whose tree can call models runs the gateway (spec/gateway.md "When a root runs one"). A
budget is held only by the gateway, so ``--budget-tokens`` runs it whatever this says."""


def tree_calls_models(manifests: Sequence[Manifest]) -> bool:
    """Whether a tree rooted at ``manifests`` can call models (pure): one has an ``inference``
    block, or a ``spawn.allow`` entry (a delegated child may be an agent capsule)."""
    return any(m.inference is not None or bool(m.spawn_allow) for m in manifests)


def wanted(budget_tokens: int | None, calls_models: bool, environ: Mapping[str, str]) -> bool:
    """Whether a root runs the tree's gateway (pure): a budget was given, or the root's tree
    calls models and :data:`OPT_IN_ENV` does not say ``off``."""
    if budget_tokens is not None:
        return True
    return calls_models and environ.get(OPT_IN_ENV, "").strip().lower() not in ("0", "off", "no", "false")


def reach_of(setup: SessionSetup) -> list[str]:
    """The session's reach: ``network.allow`` and its own inference endpoint (scheme://host:port)."""
    from murmur.gateway.root import reach

    return reach(setup.manifest)


def contribute(
    setup: SessionSetup, environ: Mapping[str, str], *, budget_tokens: int | None
) -> Contribution | None:
    """Start (a root) or join (a descendant) the tree's gateway.

    Returns:
        Contribution | None: a root's serving watcher, or a descendant's registration start
        hook; None for a session that calls no models and has no budget, or a root under
        ``MURMUR_GATEWAY=off`` (nothing of the gateway is imported).
    """
    if not tree_calls_models([setup.manifest]) and budget_tokens is None:
        return None
    if environ.get(_ENDPOINT_ENV):
        return Contribution(start_hooks=(_registration(setup, environ, budget_tokens),))
    if SPAWNER_ENV in environ or SPAWNER_LIFELINE_ENV in environ or names_formation(environ):
        return None
    if wanted(budget_tokens, True, environ):
        return _root(setup, environ, budget_tokens)
    return None


def _root(setup: SessionSetup, environ: Mapping[str, str], budget_tokens: int | None) -> Contribution:
    from murmur.gateway import ENDPOINT_ENV, Gateway, run_gateway, write_spend
    from murmur.gateway.root import root_tree

    tree, keys = root_tree(setup.session_id, [setup.manifest], environ, budget_tokens)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    # the serving watcher closes it; a setup that is never run (a later contributor refused
    # the launch, or only the composition was asked for) closes it when it is dropped
    weakref.finalize(setup, sock.close)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    if isinstance(environ, dict):
        # The session's environment (the workload's and its children's source); never this
        # process's own os.environ, which a test's in-process sessions share.
        environ[ENDPOINT_ENV] = url
    setup.trace_start_fields["gateway"] = {
        "endpoint": url,
        "keys": keys.describe(),
        "budget_tokens": budget_tokens,
    }

    async def serve(ctl: object) -> None:
        trace = getattr(getattr(ctl, "session", None), "trace", None)

        def emit(record: dict[str, object]) -> None:
            fields = dict(record)
            kind = str(fields.pop("type"))
            if trace is not None:
                trace.emit(kind, parent_id=None, **fields)

        root = setup.session_id  # the tree's root id (spec/tree.md): spend files go under it
        write_spend(root, tree.nodes.values())
        gateway = Gateway(tree, keys, emit, on_spend=partial(write_spend, root))
        try:
            await run_gateway(gateway, sock=sock)
        finally:
            sock.close()

    return Contribution(watchers=(serve,))


def _registration(setup: SessionSetup, environ: Mapping[str, str], budget_tokens: int | None) -> Any:
    url = environ[_ENDPOINT_ENV]

    async def register(session: object) -> None:
        import httpx

        from murmur.gateway.keys import claim_of

        inference = setup.manifest.inference
        # what the manifest names for its own provider, with the value when this session's
        # own environment holds it (granted through env.allow): the gateway attaches it to
        # this session's calls (spec/gateway.md "Keys"); it travels only in this body
        claim = claim_of(inference.endpoint, inference.api_key, environ) if inference is not None else None
        body: dict[str, object] = {
            "session": setup.session_id,
            "network_allow": reach_of(setup),
            "budget_tokens": budget_tokens,
            "key": claim.wire() if claim is not None else None,
        }
        try:
            async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
                reply = await client.post(url.rstrip("/") + "/_murmur/sessions", json=body)
        except httpx.HTTPError as exc:
            print(
                f"murmur: the tree's inference gateway cannot be reached ({type(exc).__name__});"
                " model calls will be refused",
                file=sys.stderr,
                flush=True,
            )
            return
        if reply.status_code != 200:
            print(
                f"murmur: the tree's inference gateway refused this session ({reply.status_code})",
                file=sys.stderr,
                flush=True,
            )

    return register
