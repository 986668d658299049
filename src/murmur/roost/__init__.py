"""mur-roost: the spawn-authority daemon (``spec/roost.md``).

Layers: :mod:`~murmur.roost.envelope` (pure: lower a manifest, referee two envelopes),
:mod:`~murmur.roost.ledger` (pure, clock-injected decisions), :mod:`~murmur.roost.app` (the
Quart-Trio HTTP layer that only parses, asks the ledger and serialises) and
:mod:`~murmur.roost.client` (the async client a capsule runtime uses).
"""
