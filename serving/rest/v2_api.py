"""The Open Inference Protocol (KServe v2) REST API, on the REST port beside ``/v1/``.

Each ``/v2`` request: route (``v2_routes``), then for infer read the body (at most
``max_body_bytes``), undo its content coding, parse it (``v2_codec``), run it through the
request layer (``inference_v2.infer``: Predict's dispatcher, so its deadline, cancellation,
batching and tensor-byte limit), and encode the answer, compressed when the client accepts it.
Errors answer ``{"error": message}`` with TensorFlow Serving's code-to-status table; the health
and readiness APIs answer 200 or 400 with no body, as Triton does. Server readiness is
``/readyz``'s: every configured model has an AVAILABLE version, and no drain has begun.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from runtime.errors import OpError
from serving.logs import traceback_without_messages
from serving.metrics.requests import OBSERVERS, drop_reason
from serving.requests.failure import out_of_memory
from serving.requests.inference_v2 import infer, model_metadata, model_ready
from serving.rest.content_coding import accepted, compress, inflate
from serving.rest.http_status import http_status
from serving.rest.json_text import error_body
from serving.rest.request_body import BodyTooLarge, read_body
from serving.rest.v2_codec import (
    InferBody,
    encode_infer_response,
    header_length,
    model_metadata_json,
    output_bytes,
    parse_infer_body,
    server_metadata_json,
)
from serving.rest.v2_routes import V2Route, parse_v2_route

if TYPE_CHECKING:
    from serving.rest.app import RestApi

log = logging.getLogger("graphserve")

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Headers = list[tuple[bytes, bytes]]

INFER_API = "infer"  # the API label of v2 inference in the request metrics
INLINE_BODY_BYTES = 16 << 10  # larger bodies are inflated and parsed off the event loop
INLINE_OUTPUT_BYTES = 64 << 10  # larger outputs are encoded off the event loop
INLINE_COMPRESS_BYTES = 64 << 10  # larger responses are compressed off the event loop
_MAX_ROUTES = 4096  # paths come from clients: forget them all rather than grow without bound

_JSON = (b"content-type", b"application/json")
_BINARY = (b"content-type", b"application/octet-stream")
HEADER_LENGTH = b"inference-header-content-length"
# CORS for /v2: the binary data extension's header travels both ways, and a compressed body.
CORS: Headers = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"POST, GET"),
    (b"access-control-allow-headers",
     b"Content-Type, Content-Encoding, Inference-Header-Content-Length"),
    (b"access-control-expose-headers", b"Content-Encoding, Inference-Header-Content-Length"),
]


class Outcome(Protocol):
    """What the app records of a request (``app._Outcome``)."""

    api: str
    model: str
    code: str
    dropped: str
    request_bytes: int


class _RequestHeaders:
    """The request headers infer reads, in one pass."""

    __slots__ = ("accept_encoding", "content_encoding", "content_length", "header_length")

    def __init__(self, scope: Scope) -> None:
        self.content_length: bytes | None = None
        self.content_encoding: bytes | None = None
        self.header_length: bytes | None = None
        self.accept_encoding: bytes | None = None
        for key, value in scope["headers"]:
            if key == b"content-length":
                self.content_length = bytes(value)
            elif key == b"content-encoding":
                self.content_encoding = bytes(value)
            elif key == HEADER_LENGTH:
                self.header_length = bytes(value)
            elif key == b"accept-encoding":
                self.accept_encoding = bytes(value)


class V2Api:
    """The ``/v2`` requests of a ``RestApi`` (its manager, dispatcher, limits and readiness)."""

    def __init__(self, api: RestApi) -> None:
        self.api = api
        self._routes: dict[str, V2Route | OpError] = {}
        self._server_metadata = server_metadata_json()

    async def handle(
        self, method: str, path: str, scope: Scope, receive: Receive, headers: Headers,
        outcome: Outcome | None,
    ) -> tuple[bytes, int]:
        """The answer to a ``/v2`` request (its headers added to ``headers``); the error
        boundary of the v2 API."""
        try:
            route = self._route(path)
            if outcome is not None:
                outcome.model = route.model_name
                outcome.api = INFER_API if route.api == INFER_API else ""
            if method not in route.methods:
                headers.append((b"allow", ", ".join(route.methods).encode()))
                headers.append(_JSON)
                return error_body(f"Method {method} not allowed on {path}"), 405
            if route.api == INFER_API:
                return await self._infer(route, scope, receive, headers, outcome)
            if route.api == "server_metadata":
                headers.append(_JSON)
                return self._server_metadata, 200
            if route.api == "model_metadata":
                metadata = model_metadata(self.api.manager, route.model_name, route.version)
                headers.append(_JSON)
                return model_metadata_json(metadata), 200
            if route.api == "live":
                ready = True  # the process answers
            elif route.api == "ready":
                ready = self._server_ready()
            else:
                ready = model_ready(self.api.manager, route.model_name, route.version)
            if not ready and outcome is not None:
                outcome.code = "UNAVAILABLE"
            return b"", 200 if ready else 400
        except OpError as err:
            if outcome is not None:
                outcome.code, outcome.dropped = err.code.name, drop_reason(err)
            headers.append(_JSON)
            return error_body(err.message), http_status(err.code)
        except BodyTooLarge as err:
            if outcome is not None:
                outcome.code = "RESOURCE_EXHAUSTED"
            headers.append(_JSON)
            headers.append((b"connection", b"close"))  # the rest of the body is not read
            return error_body(str(err)), 413
        except MemoryError as err:
            error = out_of_memory(err)
            if outcome is not None:
                outcome.code = error.code.name
            headers.append(_JSON)
            return error_body(error.message), http_status(error.code)
        except Exception as err:  # noqa: BLE001 - the outer boundary: log, answer UNKNOWN
            # Not the message: it may quote the request (see traceback_without_messages).
            log.error("Unexpected error serving %s %s:\n%s", method, path,
                      traceback_without_messages(err))
            if outcome is not None:
                outcome.code = "UNKNOWN"
            headers.append(_JSON)
            return error_body(f"{type(err).__name__}: {err}"), 500

    def _route(self, path: str) -> V2Route:
        route = self._routes.get(path)
        if route is None:
            try:
                route = parse_v2_route(path)
            except OpError as err:
                route = err
            if len(self._routes) >= _MAX_ROUTES:
                self._routes = {}
            self._routes[path] = route
        if isinstance(route, OpError):
            raise type(route)(route.message)
        return route

    def _server_ready(self) -> bool:
        api = self.api
        try:
            return not api.draining() and not api.readiness()
        except Exception:  # a failing readiness check means not ready, loudly
            log.exception("Readiness check failed")
            return False

    async def _infer(
        self, route: V2Route, scope: Scope, receive: Receive, headers: Headers,
        outcome: Outcome | None,
    ) -> tuple[bytes, int]:
        api = self.api
        dispatcher = api.dispatcher
        request_headers = _RequestHeaders(scope)
        limit = api.options.max_body_bytes
        body = await read_body(receive, limit, request_headers.content_length)
        if body is None:
            if outcome is not None:
                outcome.code, outcome.dropped = "CANCELLED", "cancelled"
            return b"", 499  # the client is gone; nobody reads this
        if outcome is not None:
            outcome.request_bytes = len(body)
        coding = request_headers.content_encoding
        if coding is not None:
            body = (inflate(body, coding, limit) if len(body) <= INLINE_BODY_BYTES
                    else await dispatcher.offload(inflate, body, coding, limit))
        json_length = header_length(request_headers.header_length, len(body))
        call = api.call(receive)
        if outcome is not None:
            OBSERVERS.begin(route.model_name)
        try:
            small = len(body) <= INLINE_BODY_BYTES
            args = (body, json_length, route.model_name, route.version, small)
            parsed: InferBody = (
                parse_infer_body(*args) if small
                else await dispatcher.offload(parse_infer_body, *args)
            )
            response = await infer(dispatcher, parsed.request, call)
            if output_bytes(response) <= INLINE_OUTPUT_BYTES:
                content, head_length = encode_infer_response(response, parsed)
            else:
                content, head_length = await dispatcher.offload(
                    encode_infer_response, response, parsed
                )
        finally:
            call.leave()
            if outcome is not None:
                OBSERVERS.end(route.model_name)
        if head_length is None:
            headers.append(_JSON)
        else:
            headers.append(_BINARY)
            headers.append((HEADER_LENGTH, b"%d" % head_length))
        answer_coding = accepted(request_headers.accept_encoding)
        if answer_coding is not None:
            if len(content) <= INLINE_COMPRESS_BYTES:
                content = compress(content, answer_coding)
            else:
                content = await dispatcher.offload(compress, content, answer_coding)
            headers.append((b"content-encoding", answer_coding.encode()))
        return content, 200
