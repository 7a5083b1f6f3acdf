"""The inference APIs as a raw ASGI handler in front of the FastAPI application.

FastAPI's request handling (its middleware stack, routing, Request/Response objects) costs a few
hundred microseconds per request, far more than a small model's run. ``POST`` requests whose
path names ``:predict``, ``:classify`` or ``:regress`` are therefore answered here: the body is
read from ``receive`` directly and the answer written with two ``send`` calls, with the same
status, headers and body as the FastAPI route gives (``RestApi.handle``), which still answers
everything else: other methods and paths, malformed paths, probes, status and metadata.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from runtime.errors import InvalidArgumentError, OpError
from serving.rest.gzip_body import gunzip
from serving.rest.http_status import http_status
from serving.rest.json_text import error_body
from serving.rest.routes import Route, parse_route

if TYPE_CHECKING:
    from serving.rest.app import RestApi

log = logging.getLogger("graphserve")

Headers = list[tuple[bytes, bytes]]

_FAST_APIS = frozenset(("predict", "classify", "regress"))
_MAX_ROUTES = 4096  # paths come from clients: forget them all rather than grow without bound
_CORS_HEADERS: Headers = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"POST, GET"),
    (b"access-control-allow-headers", b"Content-Type"),
]
_JSON_HEADER = (b"content-type", b"application/json")


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body; None when the client disconnects first."""
    message = await receive()
    if message["type"] != "http.request":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class FastPath:
    """Answers the inference APIs for ``RestApp``."""

    def __init__(self, api: RestApi, enable_cors: bool) -> None:
        self.api = api
        # In the order Starlette's Response sends them: CORS, content type, then length.
        self._headers: Headers = [*(_CORS_HEADERS if enable_cors else []), _JSON_HEADER]
        self._routes: dict[bytes, Route | None] = {}

    def route(self, scope: Scope) -> Route | None:
        """The inference route a POST names, or None for anything the FastAPI route answers
        (including every malformed path, so its 400 stays in one place)."""
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
        try:
            return self._routes[raw_path]
        except KeyError:
            pass
        try:
            route: Route | None = parse_route("POST", raw_path.decode("latin-1"))
        except InvalidArgumentError:
            route = None
        if route is not None and route.api not in _FAST_APIS:
            route = None
        if len(self._routes) >= _MAX_ROUTES:
            self._routes = {}
        self._routes[raw_path] = route
        return route

    async def serve(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(receive)
        if body is None:
            return  # the client is gone; nobody to answer
        for name, value in scope["headers"]:
            if name == b"content-encoding":  # the first one counts, as in Starlette's headers
                if b"gzip" in value:
                    body = gunzip(body)
                break
        try:
            content, status = await self.api.infer(route, body, receive), 200
        except OpError as err:
            content, status = error_body(err.message), http_status(err.code)
        except Exception as err:  # the outer boundary, as in RestApi.handle
            path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
            log.exception("Unexpected error serving POST %s", path)
            content, status = error_body(f"{type(err).__name__}: {err}"), 500
        headers = [*self._headers, (b"content-length", b"%d" % len(content))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})


class RestApp(FastAPI):
    """The FastAPI application, with the inference APIs answered before it (``FastPath``)."""

    fast_path: FastPath | None = None

    def enable_fast_path(self, api: RestApi, enable_cors: bool) -> None:
        self.fast_path = FastPath(api, enable_cors)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self.fast_path
        if fast is not None and scope["type"] == "http" and scope["method"] == "POST":
            route = fast.route(scope)
            if route is not None:
                await fast.serve(route, scope, receive, send)
                return
        await super().__call__(scope, receive, send)
