"""mur-roost's two MAC'd tokens: spawn credentials (``msc1.``) and spawn approvals (``msa1.``).

Specification: ``spec/roost.md``, "Tokens". A token is three dot-separated parts::

    <kind>.<base64url(JSON payload)>.<base64url(HMAC-SHA256)>

* ``kind`` is ``msc1`` (credential) or ``msa1`` (approval).
* The MAC covers ``<kind>.<payload>`` -- the kind is bound into what is MAC'd -- and each kind
  has its own key, so a credential presented as an approval (or the reverse) never verifies.
* Both keys are random per process and live only in memory (:class:`Keyring`); a restart
  invalidates every token minted before it.
* Verification is strict and total: any string that is not exactly a token this keyring
  minted yields ``None`` (never an exception), compared with :func:`hmac.compare_digest`.
* A token this keyring minted or verified lately is recognised by exact lookup first (the
  last :data:`REMEMBERED_TOKENS`, in a ``dict`` keyed by the whole token string): the same
  string verifies to the same claims, so its MAC is not computed again. Any other string is
  verified in full. The lookup compares whole strings only after their (per-process, keyed)
  hashes agree, so its timing tells a caller nothing about a token it does not hold.

A credential names one session. An approval names the granting session, one artifact (name,
version, sha256), the child's depth budget and its absolute expiry in unix milliseconds.
Formation tokens (``mft1``, Ed25519) are not here; see ``murmur.formation.wire.edge_tokens``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
import re
import secrets
from collections import OrderedDict
from typing import Any

import attrs

__all__ = [
    "MAX_TOKEN_CHARS",
    "REMEMBERED_TOKENS",
    "ApprovalClaims",
    "CredentialClaims",
    "Keyring",
    "TokenKind",
    "approval_payload",
    "credential_payload",
]

MAX_TOKEN_CHARS = 4096  # longer header values are refused before any decoding
REMEMBERED_TOKENS = 4096  # tokens whose claims a keyring remembers (the oldest forgotten first)
_KEY_BYTES = 32
_MAC_B64_CHARS = 43  # 32 bytes of HMAC-SHA256, base64url without padding
_B64URL = re.compile(r"^[A-Za-z0-9_-]+$")
_VERSION = 1
_BLOCK = 64  # SHA-256's block size in bytes (RFC 2104's B)
_IPAD = bytes(x ^ 0x36 for x in range(256))  # RFC 2104's ipad, as a bytes.translate table
_OPAD = bytes(x ^ 0x5C for x in range(256))  # and opad


class TokenKind(enum.Enum):
    """The two token kinds and their wire prefixes."""

    CREDENTIAL = "msc1"
    APPROVAL = "msa1"


@attrs.frozen
class CredentialClaims:
    """What a verified credential says: the session it was minted for.

    Attributes:
        session_id (str): the registered session this credential speaks for.
    """

    session_id: str


@attrs.frozen
class ApprovalClaims:
    """What a verified approval says (all sealed under the approval key).

    Attributes:
        approval_id (str): unique per approval within one daemon process.
        granted_by (str): session id of the session whose ``POST /spawn`` was granted.
        name (str): the approved artifact's name.
        version (str): the approved artifact's version.
        sha256 (str): the approved artifact's content hash (lowercase hex).
        depth_remaining (int): the child's depth budget (one less than its parent's).
        expires_at_ms (int): absolute expiry, unix milliseconds.
    """

    approval_id: str
    granted_by: str
    name: str
    version: str
    sha256: str
    depth_remaining: int
    expires_at_ms: int


_QUOTE = json.encoder.encode_basestring_ascii
"""What ``json.dumps`` writes for a ``str`` (quoted, ASCII escapes), called directly."""


def credential_payload(session_id: str) -> str:
    """A credential's payload JSON: ``{"v":1,"s":...}``, exactly as ``json.dumps`` writes that
    object compactly with ASCII escapes (written out, not through the general encoder)."""
    return f'{{"v":{_VERSION},"s":{_QUOTE(session_id)}}}'


def approval_payload(claims: ApprovalClaims) -> str:
    """An approval's payload JSON (``v s a n r h d x``), as :func:`credential_payload` writes."""
    q = _QUOTE
    return (
        f'{{"v":{_VERSION},"s":{q(claims.granted_by)},"a":{q(claims.approval_id)},'
        f'"n":{q(claims.name)},"r":{q(claims.version)},"h":{q(claims.sha256)},'
        f'"d":{int(claims.depth_remaining)},"x":{int(claims.expires_at_ms)}}}'
    )


def _hmac_pads(key: bytes) -> tuple[Any, Any]:
    """SHA-256 states that have absorbed ``key XOR ipad`` and ``key XOR opad`` (RFC 2104).

    HMAC(K, m) = H((K ^ opad) || H((K ^ ipad) || m)); both pads are one block, so a copy of
    these states finishes a MAC with two short updates -- the same bytes as
    :func:`hmac.digest`, without OpenSSL setting up a new MAC context for each token.
    """
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    return hashlib.sha256(key.translate(_IPAD)), hashlib.sha256(key.translate(_OPAD))


def _b64e(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes | None:
    """Decode canonical unpadded base64url, or None (non-canonical encodings are refused)."""
    if not _B64URL.match(text) or len(text) % 4 == 1:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if _b64e(raw) == text else None


@attrs.frozen(repr=False)
class Keyring:
    """The daemon's two in-memory MAC keys; mints and verifies tokens.

    Build one per process with :meth:`generate`. Keys never appear in ``repr``.

    Attributes:
        credential_key (bytes): HMAC key for ``msc1`` tokens.
        approval_key (bytes): HMAC key for ``msa1`` tokens.
    """

    credential_key: bytes
    approval_key: bytes
    # an OrderedDict: dropping the oldest is O(1) (a dict's first live entry is found by
    # scanning past every slot deleted before it)
    _known: OrderedDict[str, CredentialClaims | ApprovalClaims] = attrs.field(
        factory=OrderedDict, init=False, eq=False, repr=False
    )
    _pads: dict[TokenKind, tuple[Any, Any]] = attrs.field(
        default=attrs.Factory(
            lambda self: {
                TokenKind.CREDENTIAL: _hmac_pads(self.credential_key),
                TokenKind.APPROVAL: _hmac_pads(self.approval_key),
            },
            takes_self=True,
        ),
        init=False,
        eq=False,
        repr=False,
    )

    def __repr__(self) -> str:
        return "Keyring(<keys hidden>)"

    @classmethod
    def generate(cls) -> Keyring:
        """A keyring with two fresh random 32-byte keys."""
        return cls(secrets.token_bytes(_KEY_BYTES), secrets.token_bytes(_KEY_BYTES))

    # --- minting ---------------------------------------------------------------------

    def mint_credential(self, session_id: str) -> str:
        """An ``msc1.`` credential naming ``session_id``."""
        token = self._seal(TokenKind.CREDENTIAL, credential_payload(session_id))
        self._remember(token, CredentialClaims(session_id))
        return token

    def mint_approval(self, claims: ApprovalClaims) -> str:
        """An ``msa1.`` approval sealing every field of ``claims``."""
        token = self._seal(TokenKind.APPROVAL, approval_payload(claims))
        self._remember(token, claims)
        return token

    # --- verification ----------------------------------------------------------------

    def verify_credential(self, token: str | None) -> CredentialClaims | None:
        """The claims of a credential this keyring minted, else None.

        Args:
            token (str | None): the presented header value (None when absent).

        Returns:
            CredentialClaims | None: None for anything absent, malformed, mis-kinded or
            unverifiable.
        """
        known = self._known.get(token) if token is not None else None
        if type(known) is CredentialClaims:
            return known
        payload = self._open(TokenKind.CREDENTIAL, token)
        if payload is None or set(payload) != {"v", "s"}:
            return None
        sid = payload["s"]
        if not isinstance(sid, str) or not sid:
            return None
        claims = CredentialClaims(sid)
        self._remember(token, claims)
        return claims

    def verify_approval(self, token: str | None) -> ApprovalClaims | None:
        """The claims of an approval this keyring minted, else None (see verify_credential)."""
        known = self._known.get(token) if token is not None else None
        if type(known) is ApprovalClaims:
            return known
        payload = self._open(TokenKind.APPROVAL, token)
        if payload is None or set(payload) != {"v", "s", "a", "n", "r", "h", "d", "x"}:
            return None
        sid, aid, name, ver, sha = (payload[k] for k in ("s", "a", "n", "r", "h"))
        depth, expires = payload["d"], payload["x"]
        if not (
            isinstance(sid, str)
            and isinstance(aid, str)
            and isinstance(name, str)
            and isinstance(ver, str)
            and isinstance(sha, str)
            and isinstance(depth, int)
            and isinstance(expires, int)
            and not isinstance(depth, bool)
            and not isinstance(expires, bool)
        ):
            return None
        claims = ApprovalClaims(aid, sid, name, ver, sha, depth, expires)
        self._remember(token, claims)
        return claims

    # --- internals -------------------------------------------------------------------

    def _remember(self, token: str | None, claims: CredentialClaims | ApprovalClaims) -> None:
        """Note ``token`` as verifying to ``claims`` (only ever a token this keyring sealed)."""
        if token is None:
            return
        known = self._known
        known[token] = claims
        if len(known) > REMEMBERED_TOKENS:
            known.popitem(last=False)

    def _mac(self, kind: TokenKind, signed: str) -> bytes:
        """HMAC-SHA256 of ``signed`` under ``kind``'s key (byte for byte :func:`hmac.digest`)."""
        inner_pad, outer_pad = self._pads[kind]
        inner = inner_pad.copy()
        inner.update(signed.encode("ascii"))
        outer = outer_pad.copy()
        outer.update(inner.digest())
        return bytes(outer.digest())

    def _seal(self, kind: TokenKind, payload: str) -> str:
        body = _b64e(payload.encode("ascii"))
        signed = f"{kind.value}.{body}"
        return f"{signed}.{_b64e(self._mac(kind, signed))}"

    def _open(self, kind: TokenKind, token: str | None) -> dict[str, object] | None:
        if token is None or len(token) > MAX_TOKEN_CHARS or not token.isascii():
            return None
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != kind.value or len(parts[2]) != _MAC_B64_CHARS:
            return None
        # The MAC is compared in its canonical encoding: a non-canonical spelling of the right
        # MAC differs from it, so it is refused as before, without decoding the presented one.
        expected = _b64e(self._mac(kind, f"{parts[0]}.{parts[1]}"))
        if not hmac.compare_digest(parts[2], expected):
            return None
        # Only a payload this keyring sealed gets here, and it sealed only canonical ones; the
        # canonical check stays, as a second line.
        raw = _b64d(parts[1])
        if raw is None:
            return None
        try:
            payload = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(payload, dict) or type(payload.get("v")) is not int:
            return None
        return payload if payload["v"] == _VERSION else None
