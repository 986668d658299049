"""Formation channel lines: encode/decode, first-line checks (E-RUN-046), line splitting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur.errors import DiagnosticError
from murmur.formation.wire.channel import (
    MAX_LINE_BYTES,
    Address,
    Addresses,
    Call,
    ChannelLineError,
    Credentials,
    EntryRole,
    LineSplitter,
    decode_credentials,
    decode_later,
    encode_addresses,
    encode_credentials,
    encode_entry_role,
    is_door_url,
)
from murmur.formation.wire.edge_tokens import FormationKey

FRM = "frm_0199c4e2f1b7712a9d3e4f5061728394"
OTHER_FRM = "frm_0199c4e2f1b7712a9d3e4f5061728395"
KEY = FormationKey.generate()
VK = KEY.verify_key()


def bundle(member: str = "planner", callees: tuple[str, ...] = ("coder", "reviewer"),
           formation: str = FRM, key: FormationKey = KEY) -> Credentials:
    calls = tuple(Call(c, key.mint(formation=formation, caller=member, callee=c)) for c in callees)
    return Credentials(formation, member, key.verify_key(), calls)


def refusal(line: bytes, formation: str = FRM) -> str:
    with pytest.raises(DiagnosticError) as info:
        decode_credentials(line, formation_id=formation)
    d = info.value.diagnostics[0]
    assert d.code == "E-RUN-046"
    return d.message


class TestFirstLine:
    def test_round_trip(self) -> None:
        """A bundle encodes to one JSON line and decodes to the same value."""
        b = bundle()
        line = encode_credentials(b)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert decode_credentials(line, formation_id=FRM) == b
        obj = json.loads(line)
        assert list(obj) == ["formation_id", "member", "verify_key", "calls"]
        assert [c["name"] for c in obj["calls"]] == ["coder", "reviewer"]
        assert b.callees == ("coder", "reviewer")
        assert b.token_for("coder") == b.calls[0].token and b.token_for("x") is None

    def test_no_callees(self) -> None:
        """A member that may call nobody gets calls: []."""
        line = encode_credentials(bundle(callees=()))
        assert json.loads(line)["calls"] == []
        assert decode_credentials(line, formation_id=FRM).calls == ()

    def test_tokens_never_in_repr(self) -> None:
        """A bundle's repr shows no token."""
        b = bundle()
        assert all(c.token not in repr(b) for c in b.calls)

    def test_another_formation(self) -> None:
        """A first line naming another formation than MURMUR_FORMATION_ID."""
        msg = refusal(encode_credentials(bundle()), formation=OTHER_FRM)
        assert "another formation" in msg

    def test_token_issued_to_another_member(self) -> None:
        """A token in the line that was not issued by this member is refused, naming the callee."""
        b = bundle()
        stolen = KEY.mint(formation=FRM, caller="reviewer", callee="coder")
        bad = Credentials(FRM, "planner", VK, (Call("coder", stolen),))
        msg = refusal(encode_credentials(bad))
        assert "'coder' was not issued to this member" in msg and stolen not in msg
        assert b.calls[0].token not in msg

    def test_token_for_another_callee(self) -> None:
        """A token listed under the wrong callee name is refused."""
        t = KEY.mint(formation=FRM, caller="planner", callee="reviewer")
        assert "not issued" in refusal(encode_credentials(
            Credentials(FRM, "planner", VK, (Call("coder", t),))))

    def test_token_from_another_key_or_formation(self) -> None:
        """Tokens signed by another key, or for another formation, are refused."""
        other = FormationKey.generate()
        t = other.mint(formation=FRM, caller="planner", callee="coder")
        assert "not issued" in refusal(encode_credentials(
            Credentials(FRM, "planner", VK, (Call("coder", t),))))
        t2 = KEY.mint(formation=OTHER_FRM, caller="planner", callee="coder")
        assert "not issued" in refusal(encode_credentials(
            Credentials(FRM, "planner", VK, (Call("coder", t2),))))

    @pytest.mark.parametrize("line", [
        b"", b"\n", b"not json\n", b"[]\n", b'"x"\n', b'{"addresses":[]}\n',
        b'{"formation_id":"' + FRM.encode() + b'","member":"a","verify_key":"AAAA","calls":[]}\n',
        b'{"formation_id":"frm_1","member":"a","verify_key":"x","calls":[]}\n',
        b'{"formation_id":"' + FRM.encode() + b'","member":"A","verify_key":"' + VK.to_b64().encode() + b'","calls":[]}\n',
        b'{"formation_id":"' + FRM.encode() + b'","member":"a","verify_key":"' + VK.to_b64().encode() + b'","calls":{}}\n',
        b'{"formation_id":"' + FRM.encode() + b'","member":"a","verify_key":"' + VK.to_b64().encode() + b'","calls":[{"name":"b"}]}\n',
        b'{"formation_id":"' + FRM.encode() + b'","member":"a","verify_key":"' + VK.to_b64().encode() + b'","calls":[],"x":1}\n',
        b'{"formation_id":"' + FRM.encode() + b'","member":"a","member":"a","verify_key":"' + VK.to_b64().encode() + b'","calls":[]}\n',
        b"\xff\n",
    ])
    def test_not_credentials(self, line: bytes) -> None:
        """Anything that is not a member's credentials bundle is E-RUN-046."""
        assert "is not a member's credentials" in refusal(line)

    def test_duplicate_callee(self) -> None:
        """A callee listed twice is not a credentials bundle."""
        t = KEY.mint(formation=FRM, caller="planner", callee="coder")
        line = encode_credentials(Credentials(FRM, "planner", VK, (Call("coder", t), Call("coder", t))))
        assert "listed twice" in refusal(line)

    def test_over_one_mib(self) -> None:
        """A first line over 1 MiB is refused."""
        line = b'{"formation_id":"' + b"x" * MAX_LINE_BYTES + b'"}\n'
        assert "1 MiB" in refusal(line)

    def test_exactly_one_mib_is_allowed_by_the_limit(self) -> None:
        """The limit counts bytes before the newline: 1 MiB exactly passes the length check."""
        filler = b" " * (MAX_LINE_BYTES - len(encode_credentials(bundle())) + 1)
        line = encode_credentials(bundle())[:-1] + filler
        assert len(line) == MAX_LINE_BYTES
        assert decode_credentials(line + b"\n", formation_id=FRM) == bundle()
        assert "1 MiB" in refusal(line + b" \n")


class TestLaterLines:
    def test_addresses_round_trip(self) -> None:
        """An addresses line round-trips; unknown names are left to the reader to ignore."""
        a = (Address("coder", "http://127.0.0.1:41234"), Address("ghost", "http://127.0.0.1:1"))
        decoded = decode_later(encode_addresses(a))
        assert decoded == Addresses(a)
        assert isinstance(decoded, Addresses) and decoded.known(["coder"]) == {
            "coder": "http://127.0.0.1:41234"}

    def test_entry_role(self) -> None:
        """The role line decodes to EntryRole."""
        assert encode_entry_role() == b'{"role":"entry"}\n'
        assert decode_later(encode_entry_role()) == EntryRole()

    @pytest.mark.parametrize("line", [
        b"garbage", b"{}", b'{"role":"peer"}', b'{"addresses":{}}',
        b'{"addresses":[{"name":"coder"}]}', b'{"addresses":[{"name":"Coder","url":"http://h:1"}]}',
        b'{"addresses":[{"name":"coder","url":"https://h:1"}]}',
        b'{"addresses":[{"name":"coder","url":"http://h"}]}',
        b'{"addresses":[{"name":"coder","url":"http://h:1/path"}]}',
        b'{"addresses":[{"name":"coder","url":"http://u:p@h:1"}]}',
        b'{"addresses":[],"x":1}',
    ])
    def test_bad_later_line(self, line: bytes) -> None:
        """A bad later line raises ChannelLineError (its reader ignores it with a note)."""
        with pytest.raises(ChannelLineError) as info:
            decode_later(line)
        assert info.value.reason

    @pytest.mark.parametrize(("url", "ok"), [
        ("http://127.0.0.1:8000", True), ("http://localhost:1/", True), ("http://[::1]:80", True),
        ("http://h:99999", False), ("http://h:1?x", False), ("http://h:1#f", False),
        ("ftp://h:1", False), ("http:// h:1", False), ("", False)])
    def test_door_url(self, url: str, ok: bool) -> None:
        """Door URLs are http://host:port and nothing else."""
        assert is_door_url(url) is ok


names = st.from_regex(r"[a-z][a-z0-9-]{0,31}", fullmatch=True)
ports = st.integers(1, 65535)
hosts = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "10.0.0.7"])


class TestProperties:
    @settings(max_examples=60, deadline=None)
    @given(names, st.lists(names, unique=True, max_size=6))
    def test_credentials_round_trip(self, member: str, callees: list[str]) -> None:
        """Any member and callees round-trip through a first line and pass its checks."""
        b = bundle(member=member, callees=tuple(callees))
        assert decode_credentials(encode_credentials(b), formation_id=FRM) == b

    @given(st.lists(st.tuples(names, hosts, ports), max_size=8))
    def test_addresses_round_trip(self, items: list[tuple[str, str, int]]) -> None:
        """Any addresses line round-trips."""
        a = tuple(Address(n, f"http://{h}:{p}") for n, h, p in items)
        assert decode_later(encode_addresses(a)) == Addresses(a)

    @given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=10),
           st.lists(st.integers(1, 50), min_size=1, max_size=10))
    def test_splitter_any_chunking(self, lines: list[bytes], cuts: list[int]) -> None:
        """The splitter yields the same lines however the bytes arrive."""
        data = b"".join(ln + b"\n" for ln in lines)
        s = LineSplitter()
        out: list[bytes] = []
        i = 0
        for n in cuts * (len(data) // max(sum(cuts), 1) + 1):
            out += s.feed(data[i:i + n])
            i += n
        out += s.feed(data[i:])
        assert out == lines and s.pending == 0

    def test_splitter_oversized(self) -> None:
        """An over-long line comes out as OVERSIZED once; later lines are intact."""
        s = LineSplitter()
        out = s.feed(b"a\n" + b"x" * (MAX_LINE_BYTES // 2))
        out += s.feed(b"x" * (MAX_LINE_BYTES // 2 + 1))
        assert s.pending == 0
        out += s.feed(b"y" * 10 + b"\nb\n")
        assert out == [b"a", LineSplitter.OVERSIZED, b"b"]
