"""Token usage as the provider reports it, from a reply body or a stream of events.

Specification: ``spec/gateway.md`` "Budgets". Pure. :class:`UsageMeter` is fed the reply's
bytes as they pass (never changing them) and reads:

* Anthropic Messages: ``usage.input_tokens`` / ``output_tokens`` of the reply, or, streamed,
  ``message_start.message.usage`` and each ``message_delta.usage`` (output is cumulative);
* OpenAI Chat Completions: ``usage.prompt_tokens`` / ``completion_tokens`` (streamed: the last
  chunk's, with ``stream_options.include_usage``);
* OpenAI Responses: ``usage.input_tokens`` / ``output_tokens``, streamed in
  ``response.completed``'s ``response``.
"""

from __future__ import annotations

import json

__all__ = ["UsageMeter"]

_MAX_BODY = 8 * 1024 * 1024  # a non-streamed reply larger than this is not parsed for usage


def _ints(usage: object) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None

    def pick(*names: str) -> int | None:
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return None

    return pick("input_tokens", "prompt_tokens"), pick("output_tokens", "completion_tokens")


class UsageMeter:
    """Reads usage from the bytes of one reply. ``streamed``: Server-Sent Events."""

    def __init__(self, *, streamed: bool) -> None:
        self.streamed = streamed
        self.tokens_in = 0
        self.tokens_out = 0
        self.model: str | None = None
        self._buf = bytearray()

    @property
    def total(self) -> int:
        """Tokens in plus out."""
        return self.tokens_in + self.tokens_out

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the reply."""
        self._buf += chunk
        if not self.streamed:
            if len(self._buf) > _MAX_BODY:
                self._buf.clear()
            return
        if b"\n" not in chunk:  # the buffer held no whole line before: it holds none now
            if len(self._buf) > _MAX_BODY:
                self._buf.clear()  # one line this long carries no usage worth reading
            return
        data = bytes(self._buf)
        cut = data.rindex(b"\n")
        self._buf = bytearray(data[cut + 1 :])
        for line in data[:cut].split(b"\n"):
            if line.startswith(b"data:") and (
                b'"usage"' in line or (self.model is None and b'"model"' in line)
            ):  # an event naming neither (a text delta, most of a stream) is not parsed
                self._event(line[5:].strip())

    def close(self) -> None:
        """The reply has ended: read a whole body, or a last unterminated event line."""
        if self.streamed:
            self.feed(b"\n")
            return
        self._event(bytes(self._buf))
        self._buf.clear()

    def _event(self, data: bytes) -> None:
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        for holder in (obj, obj.get("message"), obj.get("response")):
            if not isinstance(holder, dict):
                continue
            if isinstance(holder.get("model"), str) and self.model is None:
                self.model = holder["model"]
            tin, tout = _ints(holder.get("usage"))
            if tin is not None and (tin or not self.tokens_in):
                self.tokens_in = tin
            if tout is not None:
                self.tokens_out = tout
