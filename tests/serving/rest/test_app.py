"""Pieces of the REST app that the end-to-end tests cannot reach cheaply: the request body's
bounds and gzip, CORS preflight, the 404 page outside ``/v1/``, and the REST timeout of the
blocking APIs."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from runtime.errors import DeadlineExceededError
from serving.core.server_core import CoreOptions, ServerCore
from serving.requests.call_context import TIMED_OUT, CallContext, current
from serving.rest.app import RestOptions, create_app
from serving.rest.request_body import BodyTooLarge, gunzip, read_body

WAIT_S = 60.0  # a guard against hanging the suite, never a timing


def test_gunzip() -> None:
    assert gunzip(gzip.compress(b"x" * 100), 100) == b"x" * 100
    assert gunzip(gzip.compress(b"x" * 100), 99) == b""  # over the cap: empty body
    assert gunzip(b"not gzip", 100) == b""


class Receive:
    """An ASGI ``receive`` replaying ``messages``, counting the calls."""

    def __init__(self, *messages: dict[str, Any]) -> None:
        self.messages = list(messages)
        self.calls = 0

    async def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return self.messages.pop(0)


def chunk(body: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


def read(receive: Receive, limit: int, length: bytes | None = None) -> bytes | None:
    return asyncio.run(read_body(receive, limit, length))


def test_read_body_joins_chunks_and_refuses_what_exceeds_the_limit() -> None:
    assert read(Receive(chunk(b"ab", True), chunk(b"c", True), chunk(b"d")), 4) == b"abcd"
    assert read(Receive(chunk(b"")), 0) == b""
    # Announced larger than allowed: refused before any of it is read.
    announced = Receive(chunk(b"abcde"))
    with pytest.raises(BodyTooLarge, match="^Request body is larger than the 4 bytes allowed$"):
        read(announced, 4, b"5")
    assert announced.calls == 0
    # Larger than announced (or not announced): refused once it crosses the limit.
    streamed = Receive(chunk(b"abc", True), chunk(b"de", True), chunk(b"never read"))
    with pytest.raises(BodyTooLarge):
        read(streamed, 4, b"3")
    assert streamed.calls == 2
    with pytest.raises(BodyTooLarge):
        read(Receive(chunk(b"abcde")), 4)
    # A client that leaves before its body is complete: no body.
    assert read(Receive(chunk(b"ab", True), {"type": "http.disconnect"}), 4) is None
    assert read(Receive({"type": "http.disconnect"}), 4) is None


@pytest.fixture(scope="module")
def core() -> Iterator[ServerCore]:
    with ServerCore(CoreOptions()) as core:  # no models: every API answers NOT_FOUND
        yield core


def send(core: ServerCore, options: RestOptions, *requests: tuple[str, str, bytes, dict[str, str]]
         ) -> list[httpx.Response]:
    app = create_app(core, options)

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [await client.request(method, path, content=body, headers=headers)
                    for method, path, body, headers in requests]

    try:
        return asyncio.run(scenario())
    finally:
        app.close()


def test_a_body_over_the_limit_answers_413_and_closes_the_connection(core: ServerCore) -> None:
    options = RestOptions(num_threads=1, max_body_bytes=64)
    path = "/v1/models/m:predict"
    large = b'{"instances": [' + b", ".join([b"[1.0]"] * 100) + b"]}"
    packed = gzip.compress(large)
    assert len(packed) <= 64 < len(large)
    over, within, inflated = send(
        core, options,
        ("POST", path, large, {}),
        ("POST", path, b'{"instances": [[1.0]]}', {}),
        # Small on the wire, larger than the limit once inflated: an empty body, as upstream.
        ("POST", path, packed, {"Content-Encoding": "gzip"}),
    )
    assert over.status_code == 413
    assert over.json() == {"error": "Request body is larger than the 64 bytes allowed"}
    assert over.headers["connection"] == "close"
    # Within the limit, the body reaches the API (no such model here).
    assert within.status_code == 404
    assert within.json() == {"error": "Servable not found for request: Latest(m)"}
    assert inflated.status_code == 400
    assert inflated.json() == {"error": "JSON Parse error: The document is empty"}


def test_cors_preflight_and_paths_outside_the_api(core: ServerCore) -> None:
    origin = {"Origin": "http://example.com"}
    preflight, no_origin, outside, v3 = send(
        core, RestOptions(num_threads=1, enable_cors=True),
        ("OPTIONS", "/v1/models/m:predict", b"", origin),
        ("OPTIONS", "/v1/models/m:predict", b"", {}),
        ("GET", "/", b"", origin),
        ("POST", "/v3/models/m:predict", b"{}", {}),  # /v2 is the Open Inference Protocol
    )
    assert preflight.status_code == 200 and preflight.content == b""
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert preflight.headers["access-control-allow-methods"] == "POST, GET"
    assert no_origin.status_code == 400
    for page in (outside, v3):  # libevent's page, as TensorFlow Serving sends it
        assert page.status_code == 404
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert b"<TITLE>404 Not Found</TITLE>" in page.content


def test_blocking_work_past_the_deadline_answers_deadline_exceeded_and_is_stopped(
    core: ServerCore,
) -> None:
    """The REST timeout of a blocking API (Classify, Regress): the caller hears
    DEADLINE_EXCEEDED at once, and the work, still running, sees its caller stopped."""
    app = create_app(core, RestOptions(num_threads=1))
    started, stopped = threading.Event(), threading.Event()

    def stuck() -> bytes:
        call = current()
        assert call is not None  # the request's caller is current on the worker
        started.set()
        for _ in range(int(WAIT_S / 0.01)):
            if call.cancellation.cancelled:
                stopped.set()
                break
            stopped.wait(0.01)
        return b""

    try:
        with pytest.raises(DeadlineExceededError, match=f"^{TIMED_OUT}$"):
            # Long enough for an idle worker to take the work first: it is not started once
            # the deadline has passed.
            asyncio.run(app.api.dispatcher.blocking(CallContext.with_timeout(0.5), stuck))
        assert started.is_set() and stopped.wait(WAIT_S)
    finally:
        app.close()
