"""What the built-in drivers and the agent CLIs are handed under a gateway (spec/gateway.md)."""

from __future__ import annotations

import types

import pytest

from murmur.agent.harness.choose import protocol_for
from murmur.agent.transports import process as harness
from murmur.agent.transports.http import GATEWAY_PLACEHOLDER, via_gateway
from murmur.gateway import PLACEHOLDER_KEY, base_url

GW = "http://127.0.0.1:4100"


@pytest.mark.parametrize(
    "endpoint",
    ["https://api.anthropic.com", "https://api.openai.com/v1", "http://127.0.0.1:8080/v1/", "https://H.example:8443/x"],
)
def test_the_driver_side_address_is_the_gateway_s_own(endpoint: str) -> None:
    assert via_gateway(endpoint, {"MURMUR_GATEWAY_ENDPOINT": GW}) == base_url(GW, endpoint)
    assert via_gateway(endpoint, {}) is None  # no gateway: the endpoint as written
    assert GATEWAY_PLACEHOLDER == PLACEHOLDER_KEY


@pytest.mark.parametrize(
    ("protocol", "upstream"), [("claude-code", "https://api.anthropic.com"), ("codex", "https://api.openai.com/v1")]
)
def test_agent_clis_get_the_gateway_and_a_placeholder(protocol: str, upstream: str) -> None:
    config = types.SimpleNamespace(endpoint=None, api_key_ref="${REAL_KEY}")
    env = {"MURMUR_GATEWAY_ENDPOINT": GW}  # the child does not hold REAL_KEY, and need not
    endpoint, key = harness._endpoint_and_key(config, protocol_for(protocol), env)  # type: ignore[arg-type]
    assert (endpoint, key) == (base_url(GW, upstream), PLACEHOLDER_KEY)
    # negative control: without a gateway the unset reference is refused, as before
    with pytest.raises(Exception, match="REAL_KEY"):
        harness._endpoint_and_key(config, protocol_for(protocol), {})  # type: ignore[arg-type]
