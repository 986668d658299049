"""Tests of the msc1/msa1 HMAC tokens (seed 000, Credentials and approvals)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from hypothesis import given
from hypothesis import strategies as st

from murmur.tokens import MAX_TOKEN_CHARS, ApprovalClaims, CredentialClaims, Keyring

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
