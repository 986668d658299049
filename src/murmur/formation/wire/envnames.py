"""The environment variables that place a ``mur run`` in a formation; pure.

Kept apart from :mod:`murmur.formation.member.member` so that deciding whether a run is a member at
all imports nothing else: a run outside any formation never pays for the member side, its
tokens or cryptography. Specification: ``spec/formation.md`` "What each member is started
with" and "Joining, in this order".
"""

from __future__ import annotations

from collections.abc import Mapping

ID_ENV = "MURMUR_FORMATION_ID"
CHANNEL_ENV = "MURMUR_FORMATION_CHANNEL"
LIFELINE_ENV = "MURMUR_FORMATION_LIFELINE"
PEERS_ENV = "MURMUR_FORMATION_PEERS"


def names_formation(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` says anything about a formation (the member side must then look).

    True when ``MURMUR_FORMATION_PEERS`` is present (even empty: that is refused) or any of
    the id, channel and lifeline variables is non-blank; otherwise the run is in no formation.
    """
    return PEERS_ENV in environ or any(environ.get(v, "").strip() for v in (ID_ENV, CHANNEL_ENV, LIFELINE_ENV))
