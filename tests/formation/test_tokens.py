"""mft1 formation tokens: mint, and verification in the documented order."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur.formation.wire.edge_tokens import (
    MAX_TOKEN_CHARS,
    FormationKey,
    FormationTokenError,
    Reason,
    VerifyKey,
    b64url_decode,
    b64url_encode,
    signed_message,
)

FRM = "frm_0199c4e2f1b7712a9d3e4f5061728394"
OTHER_FRM = "frm_0199c4e2f1b7712a9d3e4f5061728395"


def keypair() -> tuple[FormationKey, Ed25519PrivateKey]:
    private = Ed25519PrivateKey.generate()
    return FormationKey(private), private


def sign_raw(private: Ed25519PrivateKey, payload: bytes, *, tag: str = "mft1") -> str:
    """A token over arbitrary payload bytes (to reach the payload checks with a good signature)."""
    p64 = b64url_encode(payload)
    sig = private.sign(signed_message(p64))
    return f"{tag}.{p64}.{b64url_encode(sig)}"


def reason_of(vk: VerifyKey, token: str, *, formation: str | None = FRM,
              member: str = "coder") -> Reason:
    with pytest.raises(FormationTokenError) as info:
        vk.verify(token, formation=formation, member=member)
    return info.value.reason


class TestMint:
    def test_round_trip(self) -> None:
        """A minted token verifies at its callee's door as credential member:<from>."""
        key = FormationKey.generate()
        token = key.mint(formation=FRM, caller="planner", callee="coder")
        claims = key.verify_key().verify(token, formation=FRM, member="coder")
        assert (claims.formation, claims.caller, claims.callee) == (FRM, "planner", "coder")
        assert claims.credential == "member:planner"

    def test_format(self) -> None:
        """mft1.<b64url payload>.<b64url 64-byte signature>, payload exactly three keys."""
        token = FormationKey.generate().mint(formation=FRM, caller="a", callee="b")
        tag, p64, s64 = token.split(".")
        assert tag == "mft1" and "=" not in token
        assert json.loads(b64url_decode(p64)) == {"formation": FRM, "from": "a", "to": "b"}
        assert b64url_decode(p64) == b'{"formation":"' + FRM.encode() + b'","from":"a","to":"b"}'
        assert len(b64url_decode(s64)) == 64

    def test_signed_message_is_domain_separated(self) -> None:
        """The signature covers domain 0x1F tag 0x1F payload-base64url."""
        key, private = keypair()
        token = key.mint(formation=FRM, caller="a", callee="b")
        _, p64, s64 = token.split(".")
        msg = b"murmur-formation-token-v1\x1fmft1\x1f" + p64.encode()
        private.public_key().verify(b64url_decode(s64), msg)  # raises if not

    @pytest.mark.parametrize(("formation", "caller", "callee"), [
        ("frm_xyz", "a", "b"), ("ses_0199c4e2f1b7712a9d3e4f5061728394", "a", "b"),
        (FRM, "A", "b"), (FRM, "a", "b c"), (FRM, "a", "")])
    def test_mint_refuses_bad_inputs(self, formation: str, caller: str, callee: str) -> None:
        """Mint refuses a non-frm id or a non-member name."""
        with pytest.raises(ValueError):
            FormationKey.generate().mint(formation=formation, caller=caller, callee=callee)

    def test_private_half_never_in_repr(self) -> None:
        """The key's repr shows no key material; the verify key is 32 bytes."""
        key = FormationKey.generate()
        assert "Ed25519" not in repr(key) and "_private" not in repr(key)
        assert len(key.verify_key().raw) == 32
        assert VerifyKey.from_b64(key.verify_key().to_b64()) == key.verify_key()

    def test_verify_key_length(self) -> None:
        """A verify key is exactly 32 bytes."""
        with pytest.raises(ValueError):
            VerifyKey(b"\x00" * 31)
        with pytest.raises(ValueError):
            VerifyKey.from_b64("AAAA=")


class TestRefusals:
    """Every documented failure kind gives its reason, status and error."""

    def setup_method(self) -> None:
        self.key, self.private = keypair()
        self.vk = self.key.verify_key()
        self.token = self.key.mint(formation=FRM, caller="planner", callee="coder")

    def test_forged_with_another_key(self) -> None:
        """A token signed by any other key: bad signature, 401 invalid_token."""
        forged = FormationKey.generate().mint(formation=FRM, caller="planner", callee="coder")
        r = reason_of(self.vk, forged)
        assert r is Reason.BAD_SIGNATURE and (r.status, r.error) == (401, "invalid_token")

    def test_forged_signature_bytes(self) -> None:
        """A real payload with made-up signature bytes is refused."""
        tag, p64, _ = self.token.split(".")
        assert reason_of(self.vk, f"{tag}.{p64}.{b64url_encode(bytes(64))}") is Reason.BAD_SIGNATURE
        assert reason_of(self.vk, f"{tag}.{p64}.{b64url_encode(bytes(63))}") is Reason.BAD_SIGNATURE

    @pytest.mark.parametrize("field,value", [("to", "reviewer"), ("from", "reviewer"),
                                             ("formation", OTHER_FRM)])
    def test_altered_payload(self, field: str, value: str) -> None:
        """Changing any payload field under the original signature: bad signature."""
        tag, p64, s64 = self.token.split(".")
        payload = json.loads(b64url_decode(p64))
        payload[field] = value
        altered = f"{tag}.{b64url_encode(json.dumps(payload, separators=(',', ':')).encode())}.{s64}"
        assert reason_of(self.vk, altered) is Reason.BAD_SIGNATURE

    def test_cross_formation_key(self) -> None:
        """Another launch's token (its own id and key) is invalid at this formation's doors."""
        other = FormationKey.generate().mint(formation=OTHER_FRM, caller="planner", callee="coder")
        assert reason_of(self.vk, other).error == "invalid_token"

    def test_cross_formation_id_same_key(self) -> None:
        """Even under the same key, a token naming another formation fails the formation check."""
        other = self.key.mint(formation=OTHER_FRM, caller="planner", callee="coder")
        r = reason_of(self.vk, other)
        assert r is Reason.OTHER_FORMATION and r.status == 401

    def test_door_in_no_formation(self) -> None:
        """Any formation token at a door in no formation is invalid_token."""
        assert reason_of(self.vk, self.token, formation=None) is Reason.OTHER_FORMATION

    @pytest.mark.parametrize("mutate", ["pad-payload", "pad-signature", "std-alphabet",
                                        "signature-spare-bits", "reformatted-json",
                                        "reordered-keys"])
    def test_re_encoded(self, mutate: str) -> None:
        """The same claims re-encoded any other way are refused (one accepted text per token)."""
        tag, p64, s64 = self.token.split(".")
        if mutate == "pad-payload":
            bad = f"{tag}.{p64}{'=' * (-len(p64) % 4) or '===='}.{s64}"
        elif mutate == "pad-signature":
            bad = f"{tag}.{p64}.{s64}=="
        elif mutate == "std-alphabet":
            while not any(c in self.token for c in "-_"):  # most tokens have one already
                # Ed25519 signing is deterministic: only a new key gives another token
                self.setup_method()
            std = str.maketrans("-_", "+/")
            tag, p64, s64 = self.token.split(".")
            bad = f"{tag}.{p64.translate(std)}.{s64.translate(std)}"
        elif mutate == "signature-spare-bits":
            # 64 bytes -> 86 chars; the last char carries 2 data bits and 4 spare bits.
            alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            last = alphabet.index(s64[-1])
            bad = f"{tag}.{p64}.{s64[:-1]}{alphabet[last ^ 0b0001]}"
            assert base64.urlsafe_b64decode(bad.split(".")[2] + "==") == b64url_decode(s64)
        elif mutate == "reformatted-json":
            payload = json.loads(b64url_decode(p64))
            bad = f"{tag}.{b64url_encode(json.dumps(payload).encode())}.{s64}"
        else:
            payload = json.loads(b64url_decode(p64))
            flipped = {"to": payload["to"], "from": payload["from"], "formation": payload["formation"]}
            bad = f"{tag}.{b64url_encode(json.dumps(flipped, separators=(',', ':')).encode())}.{s64}"
        assert bad != self.token
        assert reason_of(self.vk, bad).error == "invalid_token"

    @pytest.mark.parametrize("presented", [
        "", "mft1", "mft1..", "mft1.a.b.c", "mdt1.eyJjcmVkZW50aWFsIjoib3BlcmF0b3IifQ.AAAA",
        "msc1.abc.def", "msa1.abc.def", "Bearer mft1.a.b", "eyJhbGciOiJIUzI1NiJ9.e30.AAAA",
        "MFT1.a.b", " mft1.a.b",
    ])
    def test_kind_confusion_and_garbage(self, presented: str) -> None:
        """Other token kinds and garbage fail the tag check: malformed, invalid_token."""
        assert reason_of(self.vk, presented) is Reason.MALFORMED

    def test_other_tag_same_key(self) -> None:
        """A token with another tag is malformed even when its signature is over mft1's message."""
        _, p64, s64 = self.token.split(".")
        assert reason_of(self.vk, f"mft2.{p64}.{s64}") is Reason.MALFORMED

    def test_signature_without_domain(self) -> None:
        """A signature over the bare payload (no domain separator) does not verify."""
        p64 = self.token.split(".")[1]
        sig = self.private.sign(p64.encode())
        assert reason_of(self.vk, f"mft1.{p64}.{b64url_encode(sig)}") is Reason.BAD_SIGNATURE

    @pytest.mark.parametrize("payload", [
        b"not json", b"[]", b'"x"', b'{"formation":"' + FRM.encode() + b'","from":"a"}',
        b'{"formation":"' + FRM.encode() + b'","from":"a","to":"coder","extra":1}',
        b'{"formation":"' + FRM.encode() + b'","from":1,"to":"coder"}',
        b'{"formation":null,"from":"a","to":"coder"}',
        b'{"formation":"' + FRM.encode() + b'","from":"Bad Name","to":"coder"}',
        b'{"formation":"' + FRM.encode() + b'","from":"a","to":"coder","to":"coder"}',
        b"\xff\xfe",
    ])
    def test_bad_payload_under_good_signature(self, payload: bytes) -> None:
        """A validly signed payload without exactly three string keys and member names."""
        assert reason_of(self.vk, sign_raw(self.private, payload)) is Reason.BAD_PAYLOAD

    def test_payload_checked_before_formation(self) -> None:
        """Order: a bad payload is reported before the formation id is compared."""
        bad = sign_raw(self.private, b'{"formation":"frm_other","from":"A","to":"coder"}')
        assert reason_of(self.vk, bad) is Reason.BAD_PAYLOAD

    def test_signature_checked_before_payload(self) -> None:
        """Order: a bad payload under a bad signature is a signature failure."""
        other = Ed25519PrivateKey.generate()
        assert reason_of(self.vk, sign_raw(other, b"not json")) is Reason.BAD_SIGNATURE

    def test_wrong_to_is_not_permitted(self) -> None:
        """A valid token for another member's door: 403 not_permitted naming the presenter."""
        with pytest.raises(FormationTokenError) as info:
            self.vk.verify(self.token, formation=FRM, member="reviewer")
        r = info.value.reason
        assert r is Reason.NOT_FOR_THIS_DOOR and (r.status, r.error) == (403, "not_permitted")
        assert info.value.claims is not None and info.value.claims.caller == "planner"

    def test_formation_checked_before_to(self) -> None:
        """Order: another formation's token is invalid even at its named door's name."""
        other = self.key.mint(formation=OTHER_FRM, caller="planner", callee="reviewer")
        assert reason_of(self.vk, other, member="coder") is Reason.OTHER_FORMATION

    def test_too_long(self) -> None:
        """An over-long value is refused before decoding."""
        assert reason_of(self.vk, "mft1." + "A" * MAX_TOKEN_CHARS + ".A") is Reason.MALFORMED

    def test_exception_text_names_only_the_reason(self) -> None:
        """The error's text is the reason, never the token."""
        with pytest.raises(FormationTokenError) as info:
            self.vk.verify(self.token, formation=FRM, member="reviewer")
        assert self.token not in str(info.value) and str(info.value) == "not_for_this_door"


_KEY = FormationKey.generate()
_VK = _KEY.verify_key()
_TOKEN = _KEY.mint(formation=FRM, caller="planner", callee="coder")


class TestProperties:
    @settings(max_examples=300, deadline=None)
    @given(st.data())
    def test_any_mutation_is_invalid(self, data: st.DataObject) -> None:
        """Any edit of a valid token (replace, insert or delete characters) is invalid_token."""
        token = _TOKEN
        for _ in range(data.draw(st.integers(1, 3))):
            op = data.draw(st.sampled_from(["replace", "insert", "delete"]))
            i = data.draw(st.integers(0, len(token) - (0 if op == "insert" else 1)))
            ch = data.draw(st.characters(codec="ascii"))
            if op == "replace":
                token = token[:i] + ch + token[i + 1:]
            elif op == "insert":
                token = token[:i] + ch + token[i:]
            else:
                token = token[:i] + token[i + 1:]
        if token == _TOKEN:
            return
        with pytest.raises(FormationTokenError) as info:
            _VK.verify(token, formation=FRM, member="coder")
        assert info.value.reason.error == "invalid_token"

    @given(st.binary(max_size=200))
    def test_b64url_round_trip(self, data: bytes) -> None:
        """decode(encode(b)) == b, and the encoding has no padding."""
        text = b64url_encode(data)
        assert "=" not in text and b64url_decode(text) == data

    @given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/ ",
                   max_size=40))
    def test_b64url_accepts_only_canonical(self, text: str) -> None:
        """A string decodes only when it is exactly the encoding of its bytes."""
        try:
            data = b64url_decode(text)
        except ValueError:
            return
        assert b64url_encode(data) == text

    @settings(max_examples=50, deadline=None)
    @given(st.from_regex(r"[a-z][a-z0-9-]{0,31}", fullmatch=True),
           st.from_regex(r"[a-z][a-z0-9-]{0,31}", fullmatch=True))
    def test_mint_verify_any_names(self, caller: str, callee: str) -> None:
        """Any pair of member names round-trips, and opens only the callee's door."""
        token = _KEY.mint(formation=FRM, caller=caller, callee=callee)
        assert _VK.verify(token, formation=FRM, member=callee).caller == caller
        if caller != callee:
            with pytest.raises(FormationTokenError):
                _VK.verify(token, formation=FRM, member=caller)
