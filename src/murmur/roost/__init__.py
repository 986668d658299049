"""mur-roost: the spawn-authority daemon (``spec/roost.md``).

Layers: :mod:`~murmur.roost.envelope` (pure: lower a manifest, referee two envelopes),
:mod:`~murmur.roost.ledger` (pure, clock-injected decisions), :mod:`~murmur.roost.app` (the
Quart-Trio HTTP layer that only parses, asks the ledger and serialises) and
:mod:`~murmur.roost.client` (the async client a capsule runtime uses).

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (the client needs httpx and the app Quart, which most commands never load).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.roost.app import create_app, hypercorn_config, serve
    from murmur.roost.client import (
        ROOST_URL_ENV,
        RoostClient,
        RoostError,
        RoostRefused,
        SpawnApproval,
        roost_url_fault,
        roost_url_from_env,
    )
    from murmur.roost.envelope import Envelope, lower, referee
    from murmur.roost.ledger import IDENTITY_MESSAGE, Bounds
    from murmur.roost.registry import StoreRegistry
    from murmur.roost.watch import ProcessWatch

__all__ = [
    "IDENTITY_MESSAGE",
    "ROOST_URL_ENV",
    "Bounds",
    "Envelope",
    "ProcessWatch",
    "RoostClient",
    "RoostError",
    "RoostRefused",
    "SpawnApproval",
    "StoreRegistry",
    "create_app",
    "hypercorn_config",
    "lower",
    "referee",
    "roost_url_fault",
    "roost_url_from_env",
    "serve",
]

__getattr__ = lazy.face(__name__, {
    "app": ["create_app", "hypercorn_config", "serve"],
    "client": ["ROOST_URL_ENV", "RoostClient", "RoostError", "RoostRefused", "SpawnApproval", "roost_url_fault", "roost_url_from_env"],
    "envelope": ["Envelope", "lower", "referee"],
    "ledger": ["IDENTITY_MESSAGE", "Bounds"],
    "registry": ["StoreRegistry"],
    "watch": ["ProcessWatch"],
})
