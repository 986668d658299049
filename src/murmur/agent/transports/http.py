"""HTTP plumbing shared by the built-in drivers: endpoints, the provider key, retries.

* :func:`check_endpoint` — ``https://`` to any host, ``http://`` only to loopback
  (``spec/agent.md`` "The ``inference`` block").
* :func:`resolve_api_key` — ``${UPPER_SNAKE}`` resolved from the capsule process's own
  environment at inference time; anything else is a literal.
* :func:`malformed_reply`, :func:`usage_tokens` — what every dialect's reply parser says of
  a malformed reply and reads of its token usage.
* :func:`post_json` — one JSON POST with retries and backoff on 429 / 5xx / connection
  failures, bounded by the attempt budget and by the calling task's deadline; 401 / 403
  fail at once with ``E-RUN-027`` and are never retried.

The provider key appears in exactly one place: the request header the driver builds. Every
message this module produces is built from status codes and the endpoint, and any provider
text quoted in one is passed through :func:`redact` first.

Design: spec/agent.md, "Transports" and "Secrets".
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import attrs
import httpx
import trio

from murmur import tracectx
from murmur.agent.transports import InferenceError
from murmur.manifest import is_loopback_host

__all__ = [
    "JSON_HEADERS",
    "REQUEST_TIMEOUT",
    "RetryPolicy",
    "check_endpoint",
    "is_retryable",
    "key_variable",
    "malformed_reply",
    "parse_retry_after",
    "post_json",
    "redact",
    "resolve_api_key",
    "retry_delay",
    "usage_tokens",
]

# One inference request: connect within 10 s, the reply within 10 minutes (long generations).
REQUEST_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=30.0, pool=10.0)

JSON_HEADERS: Mapping[str, str] = {"content-type": "application/json", "accept": "application/json"}
"""Headers every built-in driver's request carries (it sends and expects JSON)."""

_KEY_REF = re.compile(r"^\$\{([A-Z_][A-Z0-9_]*)\}$")
_HEADER_SAFE = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII: no spaces, newlines or non-ASCII
_SNIPPET = 300  # characters of a provider's error body quoted in a failure message


def check_endpoint(url: str) -> str | None:
    """Why ``url`` is not an acceptable inference endpoint, or None when it is.

    Pure. ``https://`` with any host is accepted; ``http://`` only with ``localhost`` or a
    loopback IP literal (``127.0.0.0/8``, ``::1``); a schemeless or other-scheme URL, or one
    with a query or fragment, is refused.

    Args:
        url (str): ``inference.endpoint`` as written.

    Returns:
        str | None: one sentence naming the problem, or None.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"inference.endpoint {url!r} is not an http(s) URL with a host"
    if parts.query or parts.fragment:
        return f"inference.endpoint {url!r} carries a query or fragment"
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        return (
            f"inference.endpoint {url!r} uses http to a host that is not loopback; "
            "use https, or http only for localhost / 127.0.0.1 / ::1"
        )
    return None


def key_variable(raw: str | None) -> str | None:
    """The variable name in a ``${UPPER_SNAKE_CASE}`` key reference, or None for a literal."""
    if raw is None:
        return None
    m = _KEY_REF.match(raw)
    return m.group(1) if m else None


def resolve_api_key(raw: str | None, environ: Mapping[str, str]) -> str | None:
    """The provider key for one task, read from the capsule's own environment.

    Args:
        raw (str | None): ``inference.api_key`` as written: ``${VAR}`` or a literal.
        environ (Mapping[str, str]): this process's environment.

    Returns:
        str | None: the key; None when no key is configured (keyless local servers).

    Raises:
        InferenceError: (``runtime_error``) the named variable is unset or blank, or the key
            holds characters an HTTP header cannot carry; the message names the variable,
            never a value.
    """
    if raw is None:
        return None
    var = key_variable(raw)
    value = raw if var is None else environ.get(var, "")
    where = "inference.api_key" if var is None else f"${{{var}}}"
    if var is not None and not value.strip():
        raise InferenceError(
            "runtime_error",
            f"inference.api_key names ${{{var}}}, which is not set in the capsule's environment",
        )
    if not _HEADER_SAFE.match(value):
        raise InferenceError(
            "runtime_error",
            f"the key in {where} holds characters that cannot be sent in an HTTP header "
            "(only visible ASCII is allowed)",
        )
    return value


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``[redacted]``."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "[redacted]")
    return text


@attrs.frozen
class RetryPolicy:
    """How a driver retries 429 / 5xx / connection failures (seconds).

    Attributes:
        max_attempts (int): requests made at most, the first included.
        base_delay (float): wait after the first failure; doubles per failure.
        max_delay (float): cap on one computed wait.
        jitter (float): up to this much is added at random to each wait.
        max_retry_after (float): cap on a provider's ``Retry-After``.
    """

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.25
    max_retry_after: float = 60.0


def is_retryable(status: int) -> bool:
    """True for the statuses a driver retries: 429 and every 5xx."""
    return status == 429 or 500 <= status <= 599


def parse_retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds form only), or None."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def retry_delay(
    policy: RetryPolicy, failures: int, retry_after: float | None, jitter: float
) -> float:
    """Seconds to wait before the next attempt (pure).

    Args:
        policy (RetryPolicy): the bounds.
        failures (int): failed attempts so far (>= 1).
        retry_after (float | None): the provider's ``Retry-After``, seconds.
        jitter (float): a number in [0, 1) scaling ``policy.jitter``.

    Returns:
        float: ``min(base * 2**(failures-1), max_delay)``, or the provider's ``Retry-After``
        (capped at ``max_retry_after``) when that is longer, plus jitter.
    """
    computed: float = min(policy.base_delay * 2.0 ** (failures - 1), policy.max_delay)
    if retry_after is not None:
        computed = max(computed, min(retry_after, policy.max_retry_after))
    return computed + policy.jitter * jitter


def _snippet(resp: httpx.Response, secret: str | None) -> str:
    try:
        text = resp.text
    except Exception:  # an undecodable body says nothing useful
        return ""
    text = " ".join(text.split())[:_SNIPPET]
    return redact(text, secret)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, object],
    secret: str | None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[None]] = trio.sleep,
    rng: Callable[[], float] = random.random,
    key_name: str | None = None,
) -> Mapping[str, object]:
    """POST ``body`` as JSON and return the JSON object answered, retrying what is retryable.

    Retries 429, 5xx and connection / timeout failures with exponential backoff
    (:func:`retry_delay`) while attempts remain and the next attempt would start before the
    calling task's deadline (``trio.current_effective_deadline()``). Cancellation abandons
    the request in flight (httpx closes the connection) and propagates.

    Args:
        client (httpx.AsyncClient): the task's client.
        url (str): the full request URL.
        headers (Mapping[str, str]): request headers (the key header included); the
            calling work's ``traceparent`` is added (spec/trace.md "Trace ids").
        body (Mapping[str, object]): the JSON body.
        secret (str | None): the provider key, redacted from any quoted provider text.
        policy (RetryPolicy | None): attempt budget and backoff (default: RetryPolicy()).
        sleep: the waiting function (tests record the waits).
        rng: a source of numbers in [0, 1) for jitter.
        key_name (str | None): the variable ``inference.api_key`` names, for the hint.

    Returns:
        Mapping[str, object]: the parsed JSON object of a 2xx reply.

    Raises:
        InferenceError: ``credential_rejected`` (401 / 403, ``E-RUN-027``, not retried);
            ``driver_error`` (another 4xx, or retries exhausted / past the deadline);
            ``malformed_response`` (a 2xx whose body is not a JSON object).
    """
    policy = policy or RetryPolicy()
    failures = 0
    while True:
        retry_after: float | None = None
        try:
            resp = await client.post(url, json=dict(body), headers=tracectx.inject(dict(headers)))
        except httpx.TransportError as exc:
            failure = f"{type(exc).__name__} reaching {url}"
        except httpx.RequestError as exc:  # e.g. an undecodable body: not worth retrying
            raise InferenceError(
                "malformed_response",
                f"the inference provider's reply from {url} could not be read ({type(exc).__name__})",
            ) from None
        else:
            status = resp.status_code
            if status in (401, 403):
                raise _credential_rejected(status, url, key_name)
            if 200 <= status < 300:
                return _parse_body(resp, url)
            if not is_retryable(status):
                detail = _snippet(resp, secret)
                raise InferenceError(
                    "driver_error",
                    f"the inference provider answered HTTP {status} from {url}"
                    + (f": {detail}" if detail else ""),
                    status=status,
                )
            failure = f"HTTP {status} from {url}"
            retry_after = parse_retry_after(resp.headers.get("retry-after"))
        failures += 1
        if failures >= policy.max_attempts:
            raise InferenceError(
                "driver_error",
                f"inference failed after {failures} attempts; last: {failure}",
            )
        delay = retry_delay(policy, failures, retry_after, rng())
        if trio.current_time() + delay >= trio.current_effective_deadline():
            raise InferenceError(
                "driver_error",
                f"inference failed after {failures} attempt(s); last: {failure}; "
                "retrying would pass the task's deadline",
            )
        await sleep(delay)


def malformed_reply(dialect: str, why: str) -> InferenceError:
    """The ``malformed_response`` failure of a reply a driver cannot read.

    Args:
        dialect (str): the API dialect, e.g. ``OpenAI`` or ``Anthropic``.
        why (str): what is wrong with the reply (no provider text: it is not redacted).

    Returns:
        InferenceError: ``the <dialect>-compatible provider's reply is malformed: <why>``.
    """
    return InferenceError("malformed_response", f"the {dialect}-compatible provider's reply is malformed: {why}")


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_tokens(data: Mapping[str, object], input_key: str, output_key: str) -> tuple[int, int]:
    """``(input, output)`` token counts from a reply's ``usage`` object (pure).

    Args:
        data (Mapping): the JSON object answered.
        input_key (str): the usage field counting prompt tokens.
        output_key (str): the usage field counting generated tokens.

    Returns:
        tuple[int, int]: each count, or 0 where ``usage`` or the field is missing or is not a
        whole number.
    """
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    return _count(usage.get(input_key)), _count(usage.get(output_key))


def _credential_rejected(status: int, url: str, key_name: str | None) -> InferenceError:
    where = f"the key in ${{{key_name}}}" if key_name else "the key in inference.api_key"
    return InferenceError(
        "credential_rejected",
        f"E-RUN-027: the inference provider rejected the credential (HTTP {status} from {url}); "
        f"check {where}; not retried",
        status=status,
        code="E-RUN-027",
    )


def _parse_body(resp: httpx.Response, url: str) -> Mapping[str, object]:
    try:
        data = json.loads(resp.content)
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        raise InferenceError(
            "malformed_response",
            f"the inference provider at {url} answered HTTP {resp.status_code} "
            "with a body that is not a JSON object",
            status=resp.status_code,
        )
    return data


GATEWAY_ENV = "MURMUR_GATEWAY_ENDPOINT"
"""The tree's inference gateway (spec/gateway.md); its value carries no key."""
GATEWAY_PLACEHOLDER = "murmur-gateway-placeholder"
"""The key a client under the gateway sends: the gateway drops it and attaches the real one."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


def via_gateway(endpoint: str, environ: Mapping[str, str]) -> str | None:
    """``endpoint`` as reached through the tree's gateway, or None when no gateway is set.

    ``https://api.anthropic.com/v1`` under ``MURMUR_GATEWAY_ENDPOINT=http://127.0.0.1:9`` is
    ``http://127.0.0.1:9/up/https/api.anthropic.com:443/v1`` (spec/gateway.md "Addresses";
    :func:`murmur.gateway.route.base_url` is the same rule, and a test holds them equal).
    """
    gateway = environ.get(GATEWAY_ENV, "").strip()
    if not gateway:
        return None
    parts = urlsplit(endpoint)
    try:
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    shown = f"[{host}]" if ":" in host else host
    authority = f"{shown}:{port or _DEFAULT_PORTS[scheme]}"
    return f"{gateway.rstrip('/')}/up/{scheme}/{authority}{parts.path.rstrip('/')}"
