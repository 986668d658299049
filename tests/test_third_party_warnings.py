"""The one third-party warning the suite lets through (pyproject.toml ``filterwarnings``).

httpx's ``ByteStream.__aiter__`` is an async generator; when a request body's write fails or
is cancelled, httpcore leaves it unexhausted, and Trio's finalizer warns (``ResourceWarning``)
when the collector finds it -- in whichever test happens to be running then (httpx issue
#3686). A loaded suite run failed an unrelated test that way. This test makes the abandoned
iterator on purpose: it fails (``PytestUnraisableExceptionWarning``) without the filter.
"""

from __future__ import annotations

import gc

import httpx


async def test_an_abandoned_httpx_body_iterator_fails_no_test() -> None:
    stream = httpx.ByteStream(b"body")
    it = stream.__aiter__()
    assert await it.__anext__() == b"body"
    del it
    gc.collect()
