"""Table tests of door authentication (pure) and the authenticated door in process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from murmur.manifest.model import DoorCredential
from murmur.session.auth import (
    PUBLIC,
    AuthRefusal,
    BearerDoor,
    Principal,
    PublicDoor,
    invalid_token,
    not_permitted,
)
from murmur.session.wire import CAPSULE_EXTENSION

from .helpers import (
    EchoWorkload,
    error_code,
    make_setup,
    manifest,
    result,
    rpc,
    running,
    send_params,
)

CREDS = (DoorCredential("reader", ("GetTask", "ListTasks")), DoorCredential("sender", ("SendMessage",)))


class FakeFormationVerifier:
    """Recognises `mft1.<member>.<to>` tokens: to=me admits member:<from>, else not_permitted."""

    def verify(self, token: str) -> Principal | AuthRefusal | None:
        if not token.startswith("mft1."):
            return None
        parts = token.split(".")
        if len(parts) != 3:
            return invalid_token("echo")
        if parts[2] != "me":
            return not_permitted()
        return Principal(f"member:{parts[1]}", frozenset({"SendMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask"}), member=parts[1])


def door(**kw: object) -> BearerDoor:
    return BearerDoor("echo", CREDS, key=b"k" * 32, **kw)  # type: ignore[arg-type]


class TestPublic:
    def test_everyone_is_public(self) -> None:
        """A public door admits any header, or none, with every scope."""
        d = PublicDoor()
        assert d.authenticate([]) is PUBLIC and d.authenticate(["junk", "more"]) is PUBLIC
        assert d.authorize(PUBLIC, "SendMessage") is None


class TestBearer:
    def test_tokens_minted(self) -> None:
        """One token per credential plus operator, all distinct, none containing whitespace."""
        d = door()
        assert set(d.tokens) == {"operator", "reader", "sender"}
        assert len(set(d.tokens.values())) == 3
        assert all(t.startswith("mdt1.") and " " not in t for t in d.tokens.values())
        assert BearerDoor("echo", CREDS).tokens["operator"] != BearerDoor("echo", CREDS).tokens["operator"]

    @pytest.mark.parametrize(
        ("values", "status", "error", "www"),
        [
            ([], 401, "unauthenticated", 'Bearer realm="echo"'),
            (["Basic abc"], 401, "invalid_token", 'Bearer realm="echo", error="invalid_token"'),
            (["Bearer"], 401, "invalid_token", 'Bearer realm="echo", error="invalid_token"'),
            (["Bearer "], 401, "invalid_token", 'Bearer realm="echo", error="invalid_token"'),
            (["Bearer mdt1.x.y"], 401, "invalid_token", 'Bearer realm="echo", error="invalid_token"'),
            (["Bearer nonsense"], 401, "invalid_token", 'Bearer realm="echo", error="invalid_token"'),
        ],
    )
    def test_refusals(self, values: list[str], status: int, error: str, www: str) -> None:
        """Missing and malformed credentials get the contract's status, code and header."""
        out = door().authenticate(values)
        assert isinstance(out, AuthRefusal)
        assert (out.status, out.error, out.www_authenticate) == (status, error, www)

    def test_valid_tokens(self) -> None:
        """A minted token admits its credential; the scheme is case-insensitive."""
        d = door()
        p = d.authenticate([f"bearer {d.tokens['reader']}"])
        assert isinstance(p, Principal) and p.credential == "reader" and p.scopes == {"GetTask", "ListTasks"}
        op = d.authenticate([f"Bearer {d.tokens['operator']}"])
        assert isinstance(op, Principal) and op.scopes is None and op.allows("Anything")

    def test_token_exactly(self) -> None:
        """Two headers, trailing space, a flipped MAC or another door's token are all invalid."""
        d = door()
        tok = d.tokens["reader"]
        other = BearerDoor("echo", CREDS, key=b"x" * 32).tokens["reader"]
        flipped = tok[:-2] + ("A" if tok[-2] != "A" else "B") + tok[-1]
        cases = [[f"Bearer {tok}", f"Bearer {tok}"], [f"Bearer {tok} "], [f"Bearer {flipped}"], [f"Bearer {other}"]]
        bodies = set()
        for values in cases:
            out = d.authenticate(values)
            assert isinstance(out, AuthRefusal) and out.error == "invalid_token"
            bodies.add(out.body())
        assert len(bodies) == 1  # byte-identical every time

    def test_only_the_canonical_spelling(self) -> None:
        """Padding, the standard alphabet or spare bits in the last MAC character never admit."""
        import base64

        d = door()
        tok = d.tokens["reader"]
        tag, payload, mac = tok.split(".")
        raw_mac = base64.urlsafe_b64decode(mac + "=")
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        last = alphabet.index(mac[-1])
        spare = [alphabet[last ^ bit] for bit in (1, 2, 3)]  # 32-byte MAC: 43 chars, 2 spare bits
        standard = base64.b64encode(raw_mac).rstrip(b"=").decode()
        variants = [f"{tok}=", *(f"{tag}.{payload}.{mac[:-1]}{c}" for c in spare)]
        if standard != mac:
            variants.append(f"{tag}.{payload}.{standard}")
        variants.append(f"{tag}.{payload}.{mac.replace('-', '+').replace('_', '/')}")
        variants.append(f"{tag}.{payload}=.{mac}")
        for variant in {v for v in variants if v != tok}:
            assert base64.urlsafe_b64decode(variant.split(".")[2] + "==") == raw_mac or "=" in variant.split(".")[1]
            out = d.authenticate([f"Bearer {variant}"])
            assert isinstance(out, AuthRefusal) and out.error == "invalid_token", variant
        assert isinstance(d.authenticate([f"Bearer {tok}"]), Principal)

    def test_scope(self) -> None:
        """A missing scope is 403 insufficient_scope naming credential and scope."""
        d = door()
        reader = d.authenticate([f"Bearer {d.tokens['reader']}"])
        assert isinstance(reader, Principal)
        assert d.authorize(reader, "GetTask") is None
        assert d.authorize(reader, "GetExtendedAgentCard") is None
        refusal = d.authorize(reader, "SendMessage")
        assert refusal is not None and refusal.status == 403 and refusal.error == "insufficient_scope"
        assert refusal.www_authenticate == 'Bearer realm="echo", error="insufficient_scope", scope="SendMessage"'
        assert "reader" in refusal.message and "SendMessage" in refusal.message

    def test_verifiers_first(self) -> None:
        """Plugged verifiers decide their own tokens before the door's."""
        d = door(verifiers=[FakeFormationVerifier()])
        p = d.authenticate(["Bearer mft1.lead.me"])
        assert isinstance(p, Principal) and p.member == "lead" and p.credential == "member:lead"
        out = d.authenticate(["Bearer mft1.lead.other"])
        assert isinstance(out, AuthRefusal) and (out.status, out.error) == (403, "not_permitted")
        out = d.authenticate(["Bearer mft1.bad"])
        assert isinstance(out, AuthRefusal) and out.error == "invalid_token"
        assert isinstance(d.authenticate([f"Bearer {d.tokens['sender']}"]), Principal)
        refusal = d.authorize(Principal("member:lead", frozenset({"GetTask"}), member="lead"), "SendMessage")
        assert refusal is not None and "member:lead" in refusal.message


class TestAuthenticatedDoor:
    async def test_card_and_refusals(self, tmp_path: Path) -> None:
        """The card stays public and declares bearer; requests need a token and a scope."""
        setup = make_setup(tmp_path, manifest(auth={"reader": ("GetTask", "ListTasks")}), EchoWorkload())
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            card = (await c.get("/.well-known/agent-card.json")).json()
            assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
            assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
            assert card["capabilities"]["extendedAgentCard"] is True
            caps = {e["uri"]: e["params"] for e in card["capabilities"]["extensions"]}
            assert caps[CAPSULE_EXTENSION] == {"sessionId": h.session.session_id}
            r = await rpc(c, "GetTask", {"id": "x"})
            assert r.status_code == 401 and r.json()["error"] == "unauthenticated"
            assert r.headers["www-authenticate"] == 'Bearer realm="echo"'
            r = await rpc(c, "GetTask", {"id": "x"}, headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401 and r.json() == {"error": "invalid_token", "message": "the bearer token is not valid for this door"}
            reader = {"Authorization": f"Bearer {h.ready['tokens']['reader']}"}
            operator = {"Authorization": f"Bearer {h.ready['tokens']['operator']}"}
            r = await rpc(c, "SendMessage", send_params("x"), headers=reader)
            assert r.status_code == 403 and r.json()["error"] == "insufficient_scope"
            assert 'scope="SendMessage"' in r.headers["www-authenticate"]
            tid = (await result(c, "SendMessage", send_params("x"), headers=operator))["task"]["id"]
            assert (await result(c, "GetTask", {"id": tid}, headers=reader))["id"] == tid
            ext = await result(c, "GetExtendedAgentCard", {}, headers=reader)
            ext_caps = {e["uri"]: e["params"] for e in ext["capabilities"]["extensions"]}
            assert "shell" in ext_caps[CAPSULE_EXTENSION]

    async def test_formation_member_sees_own_tasks(self, tmp_path: Path) -> None:
        """A formation principal sees only the tasks it started; others are not found."""
        setup = make_setup(tmp_path, manifest(auth={}), EchoWorkload(), token_verifiers=[FakeFormationVerifier()])
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            lead = {"Authorization": "Bearer mft1.lead.me"}
            other = {"Authorization": "Bearer mft1.scout.me"}
            operator = {"Authorization": f"Bearer {h.ready['tokens']['operator']}"}
            mine = (await result(c, "SendMessage", send_params("a"), headers=lead))["task"]["id"]
            theirs = (await result(c, "SendMessage", send_params("b"), headers=other))["task"]["id"]
            assert await error_code(c, "GetTask", {"id": theirs}, headers=lead) == -32001
            assert (await result(c, "GetTask", {"id": mine}, headers=lead))["id"] == mine
            listed = await result(c, "ListTasks", {}, headers=lead)
            assert [t["id"] for t in listed["tasks"]] == [mine]
            assert (await result(c, "ListTasks", {}, headers=operator))["totalSize"] == 2
            r = await rpc(c, "GetTask", {"id": mine}, headers={"Authorization": "Bearer mft1.lead.elsewhere"})
            assert r.status_code == 403 and r.json()["error"] == "not_permitted"
        received = [line for line in setup.records.trace.read_text().splitlines() if '"a2a_task_received"' in line]
        assert '"caller_member":"lead"' in received[0]


class TestCompletion:
    async def test_misaddressed(self, tmp_path: Path) -> None:
        """A completion for another session is -31001 with the seed's sentence."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            headers = {"x-murmur-task-origin": "completion", "x-murmur-completion-session": "ses_other"}
            r = (await rpc(c, "SendMessage", send_params("done"), headers=headers)).json()
            assert r["error"]["code"] == -31001
            assert r["error"]["message"] == "completion is addressed to session ses_other, which is not the session running here"
            assert r["error"]["data"][0]["domain"] == "murmur.nexus"

    async def test_accepted_runs_in_bg_lane(self, tmp_path: Path) -> None:
        """An addressed completion is answered with a message and runs as a completion task."""
        async with running(make_setup(tmp_path, manifest(), EchoWorkload())) as h, httpx.AsyncClient(base_url=h.url) as c:
            headers = {
                "x-murmur-task-origin": "completion", "x-murmur-task-trust": "trusted",
                "x-murmur-completion-session": h.session.session_id, "x-murmur-delegation-id": "dlg_1",
            }
            res = await result(c, "SendMessage", send_params('{"status":"ok"}'), headers=headers)
            assert res["message"]["role"] == "ROLE_AGENT"
            task = h.session.get_task(res["message"]["taskId"])
            assert task is not None and (task.origin, task.trust, task.lane) == ("completion", "trusted", "bg")

    async def test_handler_refuses(self, tmp_path: Path) -> None:
        """A completion handler can refuse (-31002 by default)."""
        from murmur.session.completion_hook import CompletionVerdict

        setup = make_setup(tmp_path, manifest(), EchoWorkload(), completion_handler=lambda req: CompletionVerdict(accept=False))
        async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
            headers = {"x-murmur-task-origin": "completion", "x-murmur-completion-session": h.session.session_id}
            assert await error_code(c, "SendMessage", send_params("x"), headers=headers) == -31002
