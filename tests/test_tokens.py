"""Tests of the msc1/msa1 HMAC tokens (seed 000, Credentials and approvals)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from functools import partial

from hypothesis import given
from hypothesis import strategies as st

from murmur.tokens import (
    MAX_TOKEN_CHARS,
    REMEMBERED_TOKENS,
    ApprovalClaims,
    CredentialClaims,
    Keyring,
    TokenKind,
    approval_payload,
    credential_payload,
)

KEYS = Keyring.generate()
CLAIMS = ApprovalClaims("apr_1", "ses_parent", "worker-a", "0.1.0", "ab" * 32, 2, 1_756_531_200_000)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def resign(key: bytes, kind: str, payload: dict[str, object]) -> str:
    """Build a token the way the format says, under an arbitrary key."""
    body = b64(json.dumps(payload, separators=(",", ":")).encode())
    mac = hmac.new(key, f"{kind}.{body}".encode(), hashlib.sha256).digest()
    return f"{kind}.{body}.{b64(mac)}"


class TestRoundTrip:
    def test_credential_round_trips(self) -> None:
        """A minted credential verifies to the session it names."""
        tok = KEYS.mint_credential("ses_abc")
        assert tok.startswith("msc1.eyJ2IjoxLCJz")
        assert KEYS.verify_credential(tok) == CredentialClaims("ses_abc")

    def test_approval_round_trips(self) -> None:
        """A minted approval verifies to every claim sealed in it."""
        tok = KEYS.mint_approval(CLAIMS)
        assert tok.startswith("msa1.eyJ2IjoxLCJz")
        assert KEYS.verify_approval(tok) == CLAIMS

    def test_keys_hidden_from_repr(self) -> None:
        """A keyring's repr never shows key material."""
        assert KEYS.credential_key.hex() not in repr(KEYS)
        assert repr(KEYS) == "Keyring(<keys hidden>)"

    def test_fresh_keyrings_differ(self) -> None:
        """Every process (keyring) draws its own random keys."""
        other = Keyring.generate()
        assert other.credential_key != KEYS.credential_key
        assert other.approval_key != KEYS.approval_key
        assert other.credential_key != other.approval_key


class TestRefusals:
    def test_absent_refused(self) -> None:
        """An absent token verifies to nothing."""
        assert KEYS.verify_credential(None) is None
        assert KEYS.verify_approval(None) is None

    def test_kind_swap_refused(self) -> None:
        """A credential presented as an approval (and the reverse) fails."""
        cred, appr = KEYS.mint_credential("ses_x"), KEYS.mint_approval(CLAIMS)
        assert KEYS.verify_approval(cred) is None
        assert KEYS.verify_credential(appr) is None
        assert KEYS.verify_approval("msa1." + cred.split(".", 1)[1]) is None
        assert KEYS.verify_credential("msc1." + appr.split(".", 1)[1]) is None

    def test_other_process_key_refused(self) -> None:
        """A token minted by another daemon process does not verify here."""
        other = Keyring.generate()
        assert KEYS.verify_credential(other.mint_credential("ses_x")) is None
        assert KEYS.verify_approval(other.mint_approval(CLAIMS)) is None

    def test_edited_payload_refused(self) -> None:
        """An approval whose depth budget was edited fails its MAC."""
        kind, body, mac = KEYS.mint_approval(CLAIMS).split(".")
        payload = json.loads(base64.urlsafe_b64decode(body + "=="))
        payload["d"] = 99
        forged = f"{kind}.{b64(json.dumps(payload, separators=(',', ':')).encode())}.{mac}"
        assert KEYS.verify_approval(forged) is None

    def test_resigned_with_wrong_key_refused(self) -> None:
        """A well-formed token MAC'd under the other kind's key fails."""
        forged = resign(KEYS.credential_key, "msa1", {"v": 1, "s": "x"})
        assert KEYS.verify_approval(forged) is None

    def test_correct_mac_wrong_shape_refused(self) -> None:
        """Even a correctly MAC'd payload with the wrong fields or types is refused."""
        key = KEYS.credential_key
        assert KEYS.verify_credential(resign(key, "msc1", {"v": 1, "s": "ses", "x": 1})) is None
        assert KEYS.verify_credential(resign(key, "msc1", {"v": 1, "s": 5})) is None
        assert KEYS.verify_credential(resign(key, "msc1", {"v": 2, "s": "ses"})) is None
        assert KEYS.verify_credential(resign(key, "msc1", {"v": True, "s": "ses"})) is None
        assert KEYS.verify_credential(resign(key, "msc1", {"v": 1, "s": ""})) is None
        good = resign(key, "msc1", {"v": 1, "s": "ses"})
        assert KEYS.verify_credential(good) == CredentialClaims("ses")

    def test_approval_bool_depth_refused(self) -> None:
        """A boolean where an integer belongs is refused even under a valid MAC."""
        payload = {"v": 1, "s": "p", "a": "a", "n": "n", "r": "r", "h": "h", "d": True, "x": 5}
        assert KEYS.verify_approval(resign(KEYS.approval_key, "msa1", payload)) is None

    def test_non_canonical_base64_refused(self) -> None:
        """Padding or non-canonical trailing bits make a token malformed."""
        kind, body, mac = KEYS.mint_credential("ses_x").split(".")
        assert KEYS.verify_credential(f"{kind}.{body}=.{mac}") is None
        assert KEYS.verify_credential(f"{kind}.{body}.{mac}=") is None

    def test_overlong_refused(self) -> None:
        """A header value past the length bound is refused before decoding."""
        assert KEYS.verify_credential("msc1." + "A" * MAX_TOKEN_CHARS) is None

    @given(st.text(max_size=300))
    def test_arbitrary_text_never_verifies_or_raises(self, text: str) -> None:
        """No arbitrary string verifies, and none raises."""
        assert KEYS.verify_credential(text) is None
        assert KEYS.verify_approval(text) is None

    @given(st.data())
    def test_mutations_never_verify(self, data: st.DataObject) -> None:
        """Truncating or flipping any character of a real token makes it fail."""
        tok = KEYS.mint_credential("ses_" + "a" * 32)
        i = data.draw(st.integers(0, len(tok) - 1))
        truncated = tok[:i]
        ch = data.draw(st.sampled_from("ABCabc019-_.=x"))
        flipped = tok[:i] + ch + tok[i + 1 :]
        assert KEYS.verify_credential(truncated) is None
        if flipped != tok:
            assert KEYS.verify_credential(flipped) is None


class TestRemembered:
    """The exact-lookup memo (spec/roost.md, "Tokens") answers what full verification answers."""

    @given(st.text(max_size=80), st.text(max_size=40), st.integers(-(2**70), 2**70), st.integers(0, 2**64))
    def test_payloads_are_the_compact_json(self, sid: str, name: str, depth: int, expires: int) -> None:
        """The written-out payloads are byte for byte what the general encoder writes."""
        compact = partial(json.dumps, separators=(",", ":"), ensure_ascii=True)
        assert credential_payload(sid) == compact({"v": 1, "s": sid})
        claims = ApprovalClaims("apr_9", sid, name, "1.0.0", "ab" * 32, depth, expires)
        assert approval_payload(claims) == compact(
            {"v": 1, "s": sid, "a": "apr_9", "n": name, "r": "1.0.0", "h": "ab" * 32, "d": depth, "x": expires}
        )

    def test_a_remembered_token_verifies_as_in_full(self) -> None:
        """A token minted here verifies from the memo to the same claims a fresh keyring with
        the same keys (which remembers nothing) finds by its MAC; a kind swap is still refused."""
        keys = Keyring.generate()
        fresh = Keyring(keys.credential_key, keys.approval_key)
        cred, appr = keys.mint_credential("ses_m"), keys.mint_approval(CLAIMS)
        assert keys.verify_credential(cred) == fresh.verify_credential(cred) == CredentialClaims("ses_m")
        assert keys.verify_approval(appr) == fresh.verify_approval(appr) == CLAIMS
        assert keys.verify_credential(appr) is None and keys.verify_approval(cred) is None
        assert keys.verify_credential(cred + "A") is None and keys.verify_credential(cred[:-1]) is None

    def test_the_memo_is_bounded_and_a_forgotten_token_still_verifies(self) -> None:
        """Past REMEMBERED_TOKENS the oldest is forgotten; presented again, it is verified by its
        MAC (and remembered again)."""
        keys = Keyring.generate()
        first = keys.mint_credential("ses_0")
        for i in range(1, REMEMBERED_TOKENS + 1):
            keys.mint_credential(f"ses_{i}")
        assert len(keys._known) == REMEMBERED_TOKENS and first not in keys._known
        assert keys.verify_credential(first) == CredentialClaims("ses_0")
        assert first in keys._known

    def test_the_mac_is_hmac_sha256_byte_for_byte(self) -> None:
        """The MAC finished from precomputed pads is :func:`hmac.digest`'s, for keys shorter
        than, as long as, and longer than SHA-256's block (which RFC 2104 hashes first)."""
        for size in (0, 1, 32, 63, 64, 65, 200):
            keys = Keyring(bytes(range(size)), bytes(255 - i % 256 for i in range(size)))
            for signed in ("", "msc1.x", "msa1." + "y" * 300):
                for kind, key in ((TokenKind.CREDENTIAL, keys.credential_key), (TokenKind.APPROVAL, keys.approval_key)):
                    assert keys._mac(kind, signed) == hmac.digest(key, signed.encode(), "sha256")
                    assert keys._mac(kind, signed) == keys._mac(kind, signed)  # the pads are not consumed

    def test_nothing_unverified_is_remembered(self) -> None:
        """A refused string leaves no trace in the memo, so it is refused again."""
        keys = Keyring.generate()
        forged = resign(keys.approval_key, "msc1", {"v": 1, "s": "x"})
        assert keys.verify_credential(forged) is None and keys.verify_credential(forged) is None
        assert keys._known == {}
