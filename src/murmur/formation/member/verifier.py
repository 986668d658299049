"""The door side of a formation member: recognising ``mft1.`` formation tokens (spec/door.md).

A member's door admits a caller holding a formation token minted for this door; a token for
another member's door is 403 ``not_permitted``; anything else about it is 401 ``invalid_token``.
"""

from __future__ import annotations

import attrs

from murmur.formation.wire.edge_tokens import FormationTokenError, Reason, VerifyKey
from murmur.session import AuthRefusal, Principal, invalid_token

FORMATION_SCOPES = frozenset({"SendMessage", "GetTask", "CancelTask", "ListTasks", "SubscribeToTask"})
"""The five door methods a formation token reaches."""


def not_permitted_for(caller: str) -> AuthRefusal:
    """403 ``not_permitted``: a valid formation token for another door, naming only its holder."""
    return AuthRefusal(
        403,
        "not_permitted",
        f"the formation token presented by member '{caller}' was not issued for this door",
    )


@attrs.frozen
class FormationVerifier:
    """Recognises ``mft1.`` formation tokens at a member's door (``auth.TokenVerifier``).

    Order (``tokens.VerifyKey.verify``): tag, signature, payload, formation id — any failure is
    401 ``invalid_token``, byte-identical to every other invalid token; then a token for
    another member's door is 403 ``not_permitted``. A token that passes is the credential
    ``member:<from>`` with the five formation scopes, seeing only the tasks it started.

    Attributes:
        verify_key (VerifyKey): the formation's public key.
        formation_id (str): this door's formation.
        member (str): this door's member.
        realm (str): the ``www-authenticate`` realm (the capsule name).
    """

    verify_key: VerifyKey
    formation_id: str
    member: str
    realm: str

    def verify(self, token: str) -> Principal | AuthRefusal | None:
        """None for a token that is not ``mft1.``; else the admitted member or the refusal."""
        if not token.startswith("mft1."):
            return None
        try:
            claims = self.verify_key.verify(token, formation=self.formation_id, member=self.member)
        except FormationTokenError as exc:
            if exc.reason is Reason.NOT_FOR_THIS_DOOR and exc.claims is not None:
                return not_permitted_for(exc.claims.caller)
            return invalid_token(self.realm)
        return Principal(claims.credential, FORMATION_SCOPES, member=claims.caller)
