"""Live responses of every endpoint and status match spec/roost-openapi.yaml."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import trio.testing
import yaml

from murmur.roost.app import CREDENTIAL_HEADER

from .conftest import StartRoost

SPEC_PATH = Path(__file__).resolve().parents[2] / "spec" / "roost-openapi.yaml"


def load_spec() -> dict[str, Any]:
    """The OpenAPI document."""
    spec: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    return spec


def check(schema: dict[str, Any], value: Any, spec: dict[str, Any], where: str = "$") -> list[str]:
    """Problems of ``value`` against the JSON-Schema subset the spec uses."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return check(spec["components"]["schemas"][name], value, spec, where)
    kinds = {"object": dict, "string": str, "integer": int, "array": list}
    kind = schema.get("type")
    if kind is not None and (not isinstance(value, kinds[kind]) or isinstance(value, bool)):
        return [f"{where}: expected {kind}, got {value!r}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not in {schema['enum']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        problems.append(f"{where}: shorter than {schema['minLength']}")
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(f"{where}: below {schema['minimum']}")
    if kind == "object":
        props = schema.get("properties", {})
        problems += [f"{where}: missing {k}" for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties") is False:
            problems += [f"{where}: unexpected {k}" for k in value if k not in props]
        for k, sub in props.items():
            if k in value:
                problems += check(sub, value[k], spec, f"{where}.{k}")
    return problems


def operation_for(spec: dict[str, Any], method: str, path: str) -> tuple[str, dict[str, Any]]:
    """The spec path template and operation serving ``method path``."""
    for template, ops in spec["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and method.lower() in ops:
            return template, ops[method.lower()]
    raise AssertionError(f"{method} {path} is not in the spec")


class Recorder:
    """Collects every response of a scenario."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, httpx.Response]] = []

    async def __call__(self, response: httpx.Response) -> None:
        await response.aread()
        self.seen.append((response.request.method, response.request.url.path, response))


class TestOpenAPI:
    def test_spec_is_openapi_3_1(self) -> None:
        """The document declares OpenAPI 3.1 and exactly the five endpoints."""
        spec = load_spec()
        assert spec["openapi"].startswith("3.1")
        assert set(spec["paths"]) == {"/health", "/spawn", "/register", "/deregister", "/status/{session_id}"}

    async def test_live_responses_match(self, start_roost: StartRoost, mock_clock: trio.testing.MockClock) -> None:
        """Every documented status of every endpoint is produced live and matches its schema."""
        spec = load_spec()
        roost = await start_roost(max_concurrent=1)
        rec = Recorder()
        roost.client.event_hooks["response"] = [rec]
        c = roost.client
        await c.get("/health")
        sid, cred = await roost.root()
        h = {CREDENTIAL_HEADER: cred}
        await c.post("/spawn", content=b"nope", headers=h)  # 400
        await roost.spawn("msc1.bad", "worker-a")  # 403 identity
        await roost.spawn(cred, "worker-b", version="9.9.9")  # 500
        approval = (await roost.spawn(cred, "worker-a")).json()["approval"]  # 200
        await roost.spawn(cred, "worker-a")  # 403 concurrency
        await c.post("/register", json={"session_id": "", "name": "x", "version": "1"})  # 400
        await roost.register("ghost", approval=approval)  # 500
        await roost.register("worker-b")  # 403 not in --spawn-allow
        child = (await roost.register("worker-a", approval=approval)).json()["credential"]  # 200
        await c.get(f"/status/{sid}")  # 200
        await c.get("/status/ses_nobody")  # 404
        await c.post("/deregister", content=b"{}", headers={CREDENTIAL_HEADER: child})  # 400
        await roost.deregister(child)  # 200
        await roost.deregister(child)  # 403
        mock_clock.jump(61)
        await c.get(f"/status/{sid}")

        covered: set[tuple[str, str, str]] = set()
        for method, path, r in rec.seen:
            template, op = operation_for(spec, method, path)
            status = str(r.status_code)
            assert status in op["responses"], f"{method} {path} answered undocumented {status}"
            assert r.headers["content-type"] == "application/json"
            assert "date" not in r.headers and "server" not in r.headers
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert check(schema, r.json(), spec) == [], (method, path, status, r.text)
            covered.add((template, method.lower(), status))
        documented = {(p, m, s) for p, ops in spec["paths"].items() for m, op in ops.items() for s in op["responses"]}
        assert documented == covered

    def test_checker_catches_mismatches(self) -> None:
        """Control: the checker reports wrong types, missing and extra keys, bad enums."""
        spec = load_spec()
        status = {"$ref": "#/components/schemas/Status"}
        assert check(status, {"status": "running", "depth_remaining": 1, "live_children": 0, "live_capsules": 1}, spec) == []
        assert check(status, {"status": "gone", "depth_remaining": "1", "live_children": 0, "extra": 1}, spec) != []
        assert check({"$ref": "#/components/schemas/SpawnGrant"}, {"approval": "msc1.x.y"}, spec) != []
