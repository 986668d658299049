"""Formation tokens (``mft1.``): one Ed25519-signed credential per reachability edge.

Specification: ``spec/formation-tokens.md`` "Tokens".

The launcher mints one :class:`FormationKey` per launch (OS CSPRNG; the private half lives only
in the launcher's memory) and signs one token for every edge ``from -> to``::

    mft1.<base64url(payload)>.<base64url(signature)>        (base64url without padding)
    payload   = {"formation":"frm_…","from":"<member>","to":"<member>"}
    signed    = b"murmur-formation-token-v1" 0x1F b"mft1" 0x1F <payload base64url text>

Every door gets only the public half (:class:`VerifyKey`), which verifies and cannot sign.
A door checks, in this order, and stops at the first failure (:meth:`VerifyKey.verify`):

1. tag — three ``.``-separated parts, the first ``mft1``, the others canonical base64url;
2. signature — 64 bytes, valid for the signed message under this formation's key;
3. payload — a JSON object with exactly the string keys ``formation``, ``from``, ``to``, the
   last two valid member names;
4. formation id — equal to the door's formation (a door in no formation fails here);
5. ``to`` — this door's member.

Failures 1-4 are ``401 invalid_token`` (one body for every one of them); failure 5 is
``403 not_permitted``. A token that passes is the credential ``member:<from>``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
from typing import TYPE_CHECKING

import attrs

from murmur.formation.roster.schema import MEMBER_NAME_RE
from murmur.ids import is_id

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# cryptography is imported where a signature is made or checked, not with this module: a
# member that no other member calls never pays its import

TAG = "mft1"
"""The first part of every formation token."""

DOMAIN = b"murmur-formation-token-v1"
"""Domain separator at the head of every signed message."""

MAX_TOKEN_CHARS = 4096
"""A longer ``Authorization`` value is refused before any decoding."""

_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]*$")
_PAYLOAD_KEYS = frozenset({"formation", "from", "to"})


class Reason(enum.Enum):
    """Why a formation token was refused, in verification order."""

    MALFORMED = "malformed"  # not mft1.<b64url>.<b64url> (check 1)
    BAD_SIGNATURE = "bad_signature"  # check 2
    BAD_PAYLOAD = "bad_payload"  # check 3
    OTHER_FORMATION = "other_formation"  # check 4 (also: a door in no formation)
    NOT_FOR_THIS_DOOR = "not_for_this_door"  # check 5

    @property
    def error(self) -> str:
        """The door's ``error`` value: ``invalid_token`` or ``not_permitted``."""
        return "not_permitted" if self is Reason.NOT_FOR_THIS_DOOR else "invalid_token"

    @property
    def status(self) -> int:
        """The door's HTTP status: 401 for ``invalid_token``, 403 for ``not_permitted``."""
        return 403 if self is Reason.NOT_FOR_THIS_DOOR else 401


@attrs.frozen
class FormationClaims:
    """What a verified token says.

    Attributes:
        formation (str): the ``frm_`` id it was issued in.
        caller (str): the member that presents it (payload ``from``).
        callee (str): the member whose door it opens (payload ``to``).
    """

    formation: str
    caller: str
    callee: str

    @property
    def credential(self) -> str:
        """The credential name a door serves it as: ``member:<from>``."""
        return f"member:{self.caller}"


class FormationTokenError(Exception):
    """A token a door must refuse.

    Attributes:
        reason (Reason): which check failed (``reason.error`` / ``reason.status`` give the
            door's answer).
        claims (FormationClaims | None): the verified claims, set only for
            :attr:`Reason.NOT_FOR_THIS_DOOR` (the 403 message names the presenting member).
    """

    def __init__(self, reason: Reason, claims: FormationClaims | None = None) -> None:
        self.reason = reason
        self.claims = claims
        super().__init__(reason.value)


def b64url_encode(data: bytes) -> str:
    """base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict base64url without padding: the canonical encoding of its result, or ValueError.

    Rejects padding, characters outside the URL alphabet, impossible lengths, and non-zero
    unused trailing bits (so one byte string has exactly one accepted text).
    """
    if not _B64URL_RE.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not canonical base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not canonical base64url") from exc
    if b64url_encode(data) != text:
        raise ValueError("not canonical base64url")
    return data


def signed_message(payload_b64: str) -> bytes:
    """The bytes a token's signature covers, for its payload's base64url text."""
    return DOMAIN + b"\x1f" + TAG.encode("ascii") + b"\x1f" + payload_b64.encode("ascii")


@attrs.frozen
class VerifyKey:
    """The public half of a formation's signing key: verifies tokens, cannot sign.

    Attributes:
        raw (bytes): the 32-byte Ed25519 public key.
    """

    raw: bytes = attrs.field()

    @raw.validator
    def _check(self, _attr: object, value: bytes) -> None:
        if len(value) != 32:
            raise ValueError("an Ed25519 verify key is 32 bytes")

    @classmethod
    def from_b64(cls, text: str) -> VerifyKey:
        """From its base64url text (the channel's ``verify_key``); ValueError if malformed."""
        return cls(b64url_decode(text))

    def to_b64(self) -> str:
        """Its base64url text."""
        return b64url_encode(self.raw)

    def verify(self, token: str, *, formation: str | None, member: str) -> FormationClaims:
        """Check ``token`` at ``member``'s door of ``formation`` in the documented order.

        Args:
            token (str): the bearer token as presented.
            formation (str | None): the door's formation id; ``None`` for a door in no
                formation (every formation token fails check 4 there).
            member (str): the door's member name.

        Returns:
            FormationClaims: the verified claims (``callee == member``).

        Raises:
            FormationTokenError: the first failing check's :class:`Reason`.
        """
        claims = self.verify_issued(token, formation=formation)
        if claims.callee != member:
            raise FormationTokenError(Reason.NOT_FOR_THIS_DOOR, claims)
        return claims

    def verify_issued(self, token: str, *, formation: str | None) -> FormationClaims:
        """Checks 1-4 (tag, signature, payload, formation id), not the door check.

        Raises:
            FormationTokenError: ``MALFORMED``, ``BAD_SIGNATURE``, ``BAD_PAYLOAD`` or
                ``OTHER_FORMATION``.
        """
        if len(token) > MAX_TOKEN_CHARS:
            raise FormationTokenError(Reason.MALFORMED)
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != TAG or not parts[1] or not parts[2]:
            raise FormationTokenError(Reason.MALFORMED)
        _, payload_b64, sig_b64 = parts
        try:
            payload_bytes = b64url_decode(payload_b64)
            signature = b64url_decode(sig_b64)
        except ValueError:
            raise FormationTokenError(Reason.MALFORMED) from None
        if len(signature) != 64:
            raise FormationTokenError(Reason.BAD_SIGNATURE)
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(
                signature, signed_message(payload_b64)
            )
        except (InvalidSignature, ValueError):
            raise FormationTokenError(Reason.BAD_SIGNATURE) from None
        claims = _parse_payload(payload_bytes)
        if formation is None or claims.formation != formation:
            raise FormationTokenError(Reason.OTHER_FORMATION)
        return claims


@attrs.frozen
class FormationKey:
    """A formation's signing key pair. Lives only in the launcher's memory; never printed.

    Create one per launch with :meth:`generate`; hand :meth:`verify_key` to every door.
    """

    _private: Ed25519PrivateKey = attrs.field(repr=False, eq=False)

    @classmethod
    def generate(cls) -> FormationKey:
        """A fresh key pair from the OS CSPRNG."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return cls(Ed25519PrivateKey.generate())

    def verify_key(self) -> VerifyKey:
        """The public half."""
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        raw = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return VerifyKey(raw)

    def mint(self, *, formation: str, caller: str, callee: str) -> str:
        """Sign the token for the edge ``caller -> callee`` of ``formation``.

        Args:
            formation (str): the ``frm_`` id of this launch.
            caller (str): the member that will present it (payload ``from``).
            callee (str): the member whose door it opens (payload ``to``).

        Returns:
            str: ``mft1.<payload>.<signature>``.

        Raises:
            ValueError: ``formation`` is not a ``frm_`` id, or a name is not a member name.
        """
        if not is_id(formation, "frm"):
            raise ValueError("formation must be frm_ followed by 32 lowercase hex digits")
        for name in (caller, callee):
            if not MEMBER_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a member name")
        payload = json.dumps(
            {"formation": formation, "from": caller, "to": callee}, separators=(",", ":")
        ).encode("utf-8")
        payload_b64 = b64url_encode(payload)
        signature = self._private.sign(signed_message(payload_b64))
        return f"{TAG}.{payload_b64}.{b64url_encode(signature)}"


def _parse_payload(data: bytes) -> FormationClaims:
    def no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate key")
        return dict(pairs)

    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise FormationTokenError(Reason.BAD_PAYLOAD) from None
    if not isinstance(obj, dict) or set(obj) != _PAYLOAD_KEYS:
        raise FormationTokenError(Reason.BAD_PAYLOAD)
    formation, caller, callee = obj["formation"], obj["from"], obj["to"]
    if not (isinstance(formation, str) and isinstance(caller, str) and isinstance(callee, str)):
        raise FormationTokenError(Reason.BAD_PAYLOAD)
    if not (MEMBER_NAME_RE.fullmatch(caller) and MEMBER_NAME_RE.fullmatch(callee)):
        raise FormationTokenError(Reason.BAD_PAYLOAD)
    return FormationClaims(formation, caller, callee)
