"""Door authentication: who is calling, and may they call this method (spec/door.md "Authentication").

Pure decisions, no I/O. A door holds one :class:`Authenticator`:

* :class:`PublicDoor` (no ``network.authentication``) admits every request as
  :data:`PUBLIC` and ignores ``Authorization``.
* :class:`BearerDoor` mints an ``operator`` token (every scope) and one token per declared
  credential at launch, and checks ``Authorization: Bearer <token>``. Extra
  :class:`TokenVerifier` objects recognise other token kinds first (the formation helper plugs
  in ``mft1.`` formation tokens); each answers ``None`` for a token that is not its kind.

Refusals are HTTP answers with the body ``{"error":"<code>","message":"<sentence>"}`` and the
``www-authenticate`` values of spec/door.md "Authentication"; every refusal of one kind is
byte-identical. Order: no header → 401 ``unauthenticated``; malformed, several headers,
unknown or unverifiable token → 401 ``invalid_token``; a verifier's 403 ``not_permitted``;
then (after request parsing) a missing scope → 403 ``insufficient_scope``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs

from murmur.manifest import DoorCredential

OPERATOR = "operator"
TOKEN_TAG = "mdt1"
# Methods that need no scope once a caller is authenticated.
UNSCOPED_METHODS = frozenset({"GetExtendedAgentCard"})


@attrs.frozen
class Principal:
    """An admitted caller.

    Attributes:
        credential (str): ``operator``, a declared credential's name, ``member:<name>`` for a
            formation token, or ``public`` on a public door.
        scopes (frozenset[str] | None): door methods it may call; ``None`` means every one.
        member (str | None): the calling formation member (formation tokens only); such a
            caller sees only the tasks it started.
    """

    credential: str
    scopes: frozenset[str] | None = None
    member: str | None = None

    @property
    def is_formation_member(self) -> bool:
        """Whether admitted on a formation token."""
        return self.member is not None

    def allows(self, method: str) -> bool:
        """Whether this principal's scopes cover ``method``."""
        return self.scopes is None or method in UNSCOPED_METHODS or method in self.scopes


PUBLIC = Principal("public")


@attrs.frozen
class AuthRefusal:
    """An HTTP-level refusal (never a JSON-RPC error).

    Attributes:
        status (int): 401 or 403.
        error (str): ``unauthenticated`` | ``invalid_token`` | ``not_permitted`` |
            ``insufficient_scope`` | ``peer_not_accepted``.
        message (str): one sentence (names reasons, never a token).
        www_authenticate (str | None): the ``www-authenticate`` header value, if any.
    """

    status: int
    error: str
    message: str
    www_authenticate: str | None = None

    def body(self) -> bytes:
        """The response body, byte-identical for identical refusals."""
        return json.dumps({"error": self.error, "message": self.message}, separators=(",", ":")).encode()


def unauthenticated(realm: str) -> AuthRefusal:
    """401: no ``Authorization`` header."""
    return AuthRefusal(401, "unauthenticated", "this door requires a bearer token", f'Bearer realm="{realm}"')


def invalid_token(realm: str) -> AuthRefusal:
    """401: the token is malformed, unknown, or does not verify (same bytes every time)."""
    return AuthRefusal(
        401,
        "invalid_token",
        "the bearer token is not valid for this door",
        f'Bearer realm="{realm}", error="invalid_token"',
    )


def not_permitted() -> AuthRefusal:
    """403: a valid formation token issued for another member's door."""
    return AuthRefusal(403, "not_permitted", "this formation token was issued for another member's door")


def insufficient_scope(realm: str, credential: str, scope: str) -> AuthRefusal:
    """403: the credential's scopes do not include ``scope``."""
    return AuthRefusal(
        403,
        "insufficient_scope",
        f"credential '{credential}' does not grant the scope '{scope}'",
        f'Bearer realm="{realm}", error="insufficient_scope", scope="{scope}"',
    )


def peer_not_accepted() -> AuthRefusal:
    """403: a ``peer`` request to a capsule without ``exports.peer_tasks.accept`` (no header)."""
    return AuthRefusal(403, "peer_not_accepted", "this capsule does not accept peer tasks")


class TokenVerifier(Protocol):
    """Recognises one kind of bearer token (e.g. ``mft1.`` formation tokens)."""

    def verify(self, token: str) -> Principal | AuthRefusal | None:
        """``None`` when ``token`` is not this verifier's kind; else admit or refuse it."""
        ...


class Authenticator(Protocol):
    """The door's authentication policy."""

    @property
    def authenticated(self) -> bool:
        """Whether the door requires a token (drives the card's security fields)."""
        ...

    def authenticate(self, authorization: Sequence[str]) -> Principal | AuthRefusal:
        """Admit or refuse a request from its ``Authorization`` header values (0, 1 or more)."""
        ...

    def authorize(self, principal: Principal, method: str) -> AuthRefusal | None:
        """``None`` when ``principal`` may call ``method``; else the 403 refusal."""
        ...


class PublicDoor:
    """A door without ``network.authentication``: everyone is :data:`PUBLIC`."""

    authenticated = False

    def authenticate(self, authorization: Sequence[str]) -> Principal | AuthRefusal:
        """Always :data:`PUBLIC` (``Authorization`` is ignored)."""
        return PUBLIC

    def authorize(self, principal: Principal, method: str) -> AuthRefusal | None:
        """Always allowed."""
        return None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Decode unpadded base64url, accepting only the one spelling :func:`_b64` produces.

    Raises:
        ValueError: padding, the standard alphabet, spare bits set, or anything not base64url.
    """
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not canonical base64url")
    return data


class BearerDoor:
    """An authenticated door: tokens minted at launch, valid until the session ends.

    Token shape: ``mdt1.<b64url JSON {"c": credential}>.<b64url HMAC-SHA256>`` under a key that
    exists only in this process's memory.

    Args:
        realm (str): the ``realm`` of ``www-authenticate`` (the capsule name).
        credentials (Iterable[DoorCredential]): declared credentials (name + scopes).
        verifiers (Sequence[TokenVerifier]): other token kinds, tried first in order.
        key (bytes | None): the MAC key (random when None; tests pass one).
    """

    authenticated = True

    def __init__(
        self,
        realm: str,
        credentials: Iterable[DoorCredential] = (),
        *,
        verifiers: Sequence[TokenVerifier] = (),
        key: bytes | None = None,
    ) -> None:
        self.realm = realm
        self._key = key if key is not None else os.urandom(32)
        self._scopes: dict[str, frozenset[str] | None] = {OPERATOR: None}
        for cred in credentials:
            self._scopes[cred.name] = frozenset(cred.scopes)
        self.verifiers: list[TokenVerifier] = list(verifiers)
        self.tokens: dict[str, str] = {name: self._mint(name) for name in self._scopes}

    def _mac(self, payload_b64: str) -> bytes:
        return hmac.new(self._key, f"{TOKEN_TAG}.{payload_b64}".encode(), hashlib.sha256).digest()

    def _mint(self, name: str) -> str:
        payload = _b64(json.dumps({"c": name}, separators=(",", ":")).encode())
        return f"{TOKEN_TAG}.{payload}.{_b64(self._mac(payload))}"

    def _check_own(self, token: str) -> Principal | None:
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != TOKEN_TAG:
            return None
        try:
            mac = _unb64(parts[2])
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, UnicodeDecodeError):
            return None
        if not hmac.compare_digest(mac, self._mac(parts[1])):
            return None
        name = claims.get("c") if isinstance(claims, dict) else None
        if not isinstance(name, str) or name not in self._scopes:
            return None
        return Principal(name, self._scopes[name])

    def authenticate(self, authorization: Sequence[str]) -> Principal | AuthRefusal:
        """Admit a request carrying exactly one valid ``Bearer`` token.

        Returns:
            Principal | AuthRefusal: the caller, or 401 ``unauthenticated`` (no header) /
            401 ``invalid_token`` (anything else wrong) / a verifier's own refusal.
        """
        if not authorization:
            return unauthenticated(self.realm)
        if len(authorization) > 1:
            return invalid_token(self.realm)
        scheme, _, token = authorization[0].partition(" ")
        if scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
            return invalid_token(self.realm)
        for verifier in self.verifiers:
            verdict = verifier.verify(token)
            if verdict is not None:
                return verdict
        return self._check_own(token) or invalid_token(self.realm)

    def authorize(self, principal: Principal, method: str) -> AuthRefusal | None:
        """403 ``insufficient_scope`` naming the credential and the method, else None."""
        if principal.allows(method):
            return None
        return insufficient_scope(self.realm, principal.credential, method)


def make_authenticator(
    realm: str,
    credentials: Iterable[DoorCredential] | None,
    *,
    verifiers: Sequence[TokenVerifier] = (),
) -> PublicDoor | BearerDoor:
    """A :class:`BearerDoor` when ``credentials`` is not None (authentication declared)."""
    if credentials is None:
        return PublicDoor()
    return BearerDoor(realm, credentials, verifiers=verifiers)

