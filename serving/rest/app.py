"""The REST transport: TensorFlow Serving's HTTP API as one ASGI application over the dispatcher.

One handler table, written once for every path: the probes, the 404 page outside ``/v1/``,
CORS preflight, then the API (``routes.parse_route``: TensorFlow Serving's routing, which is
not expressible as path templates). Each API is: read the body (at most ``max_body_bytes``,
refused 413 before it is buffered), decode, call the dispatcher, encode. CORS headers, gzip
bodies and the error boundary live here and nowhere else.

Beyond TensorFlow Serving's API: ``GET /v1/models`` lists every model with its versions' states
(upstream answers 400 there), the probes ``GET /healthz`` (the process answers) and
``GET /readyz`` (every configured model has an AVAILABLE version) sit outside ``/v1/``, and
``/v2`` is the Open Inference Protocol's REST API (``v2_api``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError, NotFoundError, OpError
from runtime.saved_model import Signature
from serving.logs import traceback_without_messages
from serving.metrics.requests import OBSERVERS, REST, RequestRecord, drop_reason
from serving.requests.call_context import CallContext
from serving.requests.classify import ClassifyRequest, classify
from serving.requests.dispatcher import DEFAULT_MAX_TENSOR_BYTES, Dispatcher, DispatchOptions
from serving.requests.failure import out_of_memory
from serving.requests.metadata import GetModelMetadataRequest, get_model_metadata
from serving.requests.model_spec import ModelSpec
from serving.requests.regress import RegressRequest, regress
from serving.requests.run_site import INLINE_RUN_S
from serving.requests.status import GetModelStatusRequest, GetModelStatusResponse, get_model_status
from serving.rest.http_status import http_status
from serving.rest.json_codec import PredictBody, decode_inputs, parse_predict_body
from serving.rest.json_encode import encode_predict_response
from serving.rest.json_examples import (
    encode_classify_response,
    encode_regress_response,
    parse_examples_body,
)
from serving.rest.json_status import metadata_json, models_json, probe_json, status_json
from serving.rest.json_text import error_body
from serving.rest.request_body import BodyTooLarge, gunzip, read_body
from serving.rest.routes import API_PATH, Route, parse_route
from serving.rest.v2_api import CORS as V2_CORS
from serving.rest.v2_api import V2Api
from serving.rest.v2_routes import is_v2_path
from serving.servable import ServableManager

log = logging.getLogger("graphserve")

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

HEALTHZ, READYZ = b"/healthz", b"/readyz"
INFERENCE_APIS = ("predict", "classify", "regress")
_PROBE_METHODS = ("GET", "HEAD")
_CORS: Headers = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"POST, GET"),
    (b"access-control-allow-headers", b"Content-Type"),
]
_JSON = (b"content-type", b"application/json")
_ORIGIN = re.compile(rb"https?://")
# libevent's default error page, which TensorFlow Serving sends for paths outside /v1/.
_NOT_FOUND_HTML = (
    b"<HTML><HEAD>\n<TITLE>404 Not Found</TITLE>\n</HEAD><BODY>\n<H1>Not Found</H1>\n"
    b"</BODY></HTML>\n"
)
INLINE_BODY_BYTES = 16 << 10  # larger bodies are parsed and decoded off the loop
INLINE_OUTPUT_VALUES = 512  # larger outputs are written to JSON off the loop (~0.2 ms and up)
_MAX_ROUTES = 4096  # paths come from clients: forget them all rather than grow without bound
# TensorFlow Serving caps an uncompressed gzip body at 100 MiB; a plain body gets the same cap.
DEFAULT_MAX_BODY_BYTES = 100 << 20


@dataclass(frozen=True)
class RestOptions:
    num_threads: int = 4
    timeout_in_ms: int = 30000  # an inference taking longer answers 504; 0 = no limit
    enable_cors: bool = False
    # --enable_signature_method_name_check: classify/regress also require their method name.
    signature_method_name_check: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # larger bodies (sent or inflated) answer 413
    max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES
    inline_run_s: float = INLINE_RUN_S  # see DispatchOptions
    # The Prometheus endpoint's path (--monitoring_config_file); "" = none.
    metrics_path: str = ""


Readiness = Callable[[], list[str]]  # configured models without an AVAILABLE version


def _never() -> bool:
    return False


def _all_ready() -> list[str]:
    return []


class JsonInputs:
    """A parsed JSON body as the dispatcher's input decoder."""

    __slots__ = ("_cheap", "body")

    def __init__(self, body: PredictBody, cheap: bool) -> None:
        self.body = body
        self._cheap = cheap

    def cheap(self) -> bool:
        return self._cheap

    def decode(self, signature: Signature, max_bytes: int | None) -> dict[str, np.ndarray]:
        return decode_inputs(self.body, signature.input_dtypes, max_bytes=max_bytes)

    def unknown_signature(self, key: str) -> OpError:
        # TensorFlow Serving's REST pre-check, before the JSON is typed.
        return InvalidArgumentError(f'Serving signature name: "{key}" not found in signature def')


def _caller_gone(receive: Receive) -> Callable[[], bool] | None:
    """Whether the client has gone, read from uvicorn's request cycle (the object behind its
    ``receive``), which marks itself disconnected when the connection drops. Watching
    ``receive()`` for ``http.disconnect`` instead would take a second task per request. Other
    servers: None (not known)."""
    cycle = getattr(receive, "__self__", None)
    if cycle is None or not isinstance(getattr(cycle, "disconnected", None), bool):
        return None
    return lambda: bool(cycle.disconnected)


def _values(outputs: Mapping[str, np.ndarray]) -> int:
    count = 0
    for array in outputs.values():
        count += array.size
    return count


class RestApi:
    """The APIs: bodies in, bodies out; raises ``OpError``."""

    def __init__(
        self,
        manager: ServableManager,
        options: RestOptions,
        readiness: Readiness = _all_ready,
        draining: Callable[[], bool] = _never,
    ) -> None:
        self.manager = manager
        self.options = options
        self.readiness = readiness
        self.draining = draining  # true from the first stop signal: /readyz answers 503
        self.dispatcher = Dispatcher(
            manager,
            DispatchOptions(
                threads=options.num_threads,
                max_tensor_bytes=options.max_tensor_bytes,
                method_name_check=options.signature_method_name_check,
                thread_name_prefix="rest",
                inline_run_s=options.inline_run_s,
            ),
        )
        self._timeout_s = options.timeout_in_ms / 1000 if options.timeout_in_ms > 0 else None

    def close(self) -> None:
        self.dispatcher.close()

    def call(self, receive: Receive) -> CallContext:
        return CallContext.with_timeout(self._timeout_s, _caller_gone(receive))

    async def predict(self, route: Route, body: bytes, call: CallContext) -> bytes:
        small = len(body) <= INLINE_BODY_BYTES
        if small:
            parsed = parse_predict_body(body)
        else:
            parsed = await self.dispatcher.offload(parse_predict_body, body)
        response = await self.dispatcher.predict(
            route.model_name, route.version, route.label, parsed.signature_name,
            JsonInputs(parsed, small), (), call,
        )
        if _values(response.outputs) > INLINE_OUTPUT_VALUES:
            return await self.dispatcher.offload(
                encode_predict_response, response.outputs, parsed.format
            )
        return encode_predict_response(response.outputs, parsed.format)

    async def classify(self, route: Route, body: bytes, call: CallContext) -> bytes:
        return await self.dispatcher.blocking(call, self._classify, route, body)

    async def regress(self, route: Route, body: bytes, call: CallContext) -> bytes:
        return await self.dispatcher.blocking(call, self._regress, route, body)

    def _classify(self, route: Route, body: bytes) -> bytes:
        parsed = parse_examples_body(body)
        spec = ModelSpec(route.model_name, route.version, route.label, parsed.signature_name)
        response = classify(
            self.manager,
            ClassifyRequest(spec, parsed.examples),
            method_name_check=self.options.signature_method_name_check,
        )
        return encode_classify_response(response.classifications)

    def _regress(self, route: Route, body: bytes) -> bytes:
        parsed = parse_examples_body(body)
        spec = ModelSpec(route.model_name, route.version, route.label, parsed.signature_name)
        response = regress(
            self.manager,
            RegressRequest(spec, parsed.examples),
            method_name_check=self.options.signature_method_name_check,
        )
        return encode_regress_response(response.regressions)

    def status(self, route: Route) -> bytes:
        spec = ModelSpec(route.model_name, route.version, route.label)
        return status_json(get_model_status(self.manager, GetModelStatusRequest(spec)))

    def metadata(self, route: Route) -> bytes:
        spec = ModelSpec(route.model_name, route.version, route.label)
        return metadata_json(get_model_metadata(self.manager, GetModelMetadataRequest(spec)))

    def models(self) -> bytes:
        """Every model the manager knows, with its versions (newest first) and their states."""
        listed = []
        for name in self.manager.model_names():
            request = GetModelStatusRequest(ModelSpec(name))
            try:
                listed.append((name, get_model_status(self.manager, request)))
            except NotFoundError:  # known, but no version yet (or forgotten meanwhile)
                listed.append((name, GetModelStatusResponse(())))
        return models_json(listed)

    def probe(self, path: bytes) -> tuple[bytes, int]:
        if path == HEALTHZ:
            return probe_json("alive"), 200
        if self.draining():
            return probe_json("shutting down"), 503
        not_ready = sorted(self.readiness())
        if not_ready:
            return probe_json("not ready", not_ready), 503
        return probe_json("ready"), 200


async def _respond(send: Send, status: int, headers: Headers, body: bytes) -> None:
    headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Outcome:
    """What ``_api`` learnt about a request, for its ``RequestRecord``."""

    __slots__ = ("api", "code", "dropped", "model", "request_bytes")

    def __init__(self) -> None:
        self.api = ""
        self.model = ""
        self.code = ""  # "": from the HTTP status
        self.dropped = ""
        self.request_bytes = 0


# Code names of the answers given outside the API's error boundary.
_HTTP_CODES = {200: "OK", 400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "UNIMPLEMENTED",
               503: "UNAVAILABLE"}


class RestApp:
    """The ASGI application. ``api`` is the ``RestApi``; ``close`` stops its worker pool.
    ``scrape`` answers the Prometheus endpoint (``RestOptions.metrics_path``)."""

    def __init__(self, api: RestApi, scrape: Callable[[], bytes] | None = None) -> None:
        self.api = api
        self._cors: Headers = list(_CORS) if api.options.enable_cors else []
        self._v2_cors: Headers = list(V2_CORS) if api.options.enable_cors else []
        self._v2 = V2Api(api)
        self._routes: dict[tuple[str, bytes], Route | OpError] = {}
        self._scrape = scrape
        metrics_path = api.options.metrics_path
        self._metrics_path = metrics_path.encode() if scrape is not None and metrics_path else None

    def close(self) -> None:
        self.api.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; no websockets
        path: bytes = scope.get("raw_path") or scope["path"].encode()
        path = path.split(b"?", 1)[0]
        method: str = scope["method"]
        observers = OBSERVERS
        outcome = _Outcome() if observers.active else None
        start = time.perf_counter()
        v2 = is_v2_path(path)
        headers = [*self._v2_cors] if v2 else [*self._cors]
        if path in (HEALTHZ, READYZ):
            content, status = self._probe(method, path, headers)
        elif path == self._metrics_path and self._scrape is not None:
            headers = [(b"content-type", b"text/plain")]
            content, status = self._scrape(), 200
        elif not v2 and not API_PATH.fullmatch(path.decode("latin-1")):
            headers = [(b"content-type", b"text/html; charset=utf-8")]
            content, status = _NOT_FOUND_HTML, 404
        elif method == "OPTIONS":
            origin = _header(scope, b"origin")
            ok = origin is not None and _ORIGIN.search(origin) is not None
            content, status = b"", 200 if ok else 400
        elif v2:
            content, status = await self._v2.handle(
                method, path.decode("latin-1"), scope, receive, headers, outcome
            )
        else:
            headers.append(_JSON)
            content, status = await self._api(method, path, scope, receive, headers, outcome)
        await _respond(send, status, headers, content)
        if outcome is not None:
            observers.emit(RequestRecord(
                REST, outcome.api, outcome.model,
                outcome.code or _HTTP_CODES.get(status, "UNKNOWN"),
                time.perf_counter() - start, outcome.request_bytes, len(content), method,
                path.decode("latin-1"), status, outcome.dropped,
            ))

    async def _api(
        self,
        method: str,
        path: bytes,
        scope: Scope,
        receive: Receive,
        headers: Headers,
        outcome: _Outcome | None = None,
    ) -> tuple[bytes, int]:
        """The answer of a ``/v1/`` request; the error boundary of every API. ``outcome``
        (when requests are observed) hears the route and how the request ended."""
        api = self.api
        try:
            route = self._route(method, path)
            if outcome is not None:
                outcome.model = route.model_name
                outcome.api = route.api if route.api in INFERENCE_APIS else ""
            limit = api.options.max_body_bytes
            body = await read_body(receive, limit, _header(scope, b"content-length"))
            if body is None:
                if outcome is not None:
                    outcome.code, outcome.dropped = "CANCELLED", "cancelled"
                return b"", 499  # the client is gone; nobody reads this
            if outcome is not None:
                outcome.request_bytes = len(body)
            encoding = _header(scope, b"content-encoding")
            if encoding is not None and b"gzip" in encoding:
                body = gunzip(body, limit)
            if route.api in INFERENCE_APIS:
                call = api.call(receive)
                if outcome is not None:
                    OBSERVERS.begin(route.model_name)
                try:
                    if route.api == "predict":
                        return await api.predict(route, body, call), 200
                    if route.api == "classify":
                        return await api.classify(route, body, call), 200
                    return await api.regress(route, body, call), 200
                finally:
                    call.leave()
                    if outcome is not None:
                        OBSERVERS.end(route.model_name)
            if route.api == "metadata":
                return api.metadata(route), 200
            if route.api == "models":
                return api.models(), 200
            return api.status(route), 200
        except OpError as err:
            if outcome is not None:
                outcome.code, outcome.dropped = err.code.name, drop_reason(err)
            return error_body(err.message), http_status(err.code)
        except BodyTooLarge as err:
            if outcome is not None:
                outcome.code = "RESOURCE_EXHAUSTED"
            headers.append((b"connection", b"close"))  # the rest of the body is not read
            return error_body(str(err)), 413
        except MemoryError as err:
            error = out_of_memory(err)
            if outcome is not None:
                outcome.code = error.code.name
            return error_body(error.message), http_status(error.code)
        except Exception as err:  # noqa: BLE001 - the outer boundary: log, answer UNKNOWN
            # Not the message: it may quote the request (see traceback_without_messages).
            log.error("Unexpected error serving %s %s:\n%s", method, path.decode("latin-1"),
                      traceback_without_messages(err))
            if outcome is not None:
                outcome.code = "UNKNOWN"
            return error_body(f"{type(err).__name__}: {err}"), 500

    def _route(self, method: str, path: bytes) -> Route:
        key = (method, path)
        route = self._routes.get(key)
        if route is None:
            try:
                route = parse_route(method, path.decode("latin-1"))
            except OpError as err:
                route = err
            if len(self._routes) >= _MAX_ROUTES:
                self._routes = {}
            self._routes[key] = route
        if isinstance(route, OpError):
            raise type(route)(route.message)
        return route

    def _probe(self, method: str, path: bytes, headers: Headers) -> tuple[bytes, int]:
        headers.append(_JSON)
        if method not in _PROBE_METHODS:
            headers.append((b"allow", ", ".join(_PROBE_METHODS).encode()))
            message = f"Method {method} not allowed on {path.decode('latin-1')}"
            return error_body(message), 405
        try:
            return self.api.probe(path)
        except Exception as err:  # a failing readiness check means not ready, loudly
            log.exception("Readiness check failed")
            return error_body(f"{type(err).__name__}: {err}"), 503


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), as Starlette's headers give it."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def create_app(
    manager: ServableManager,
    options: RestOptions | None = None,
    readiness: Readiness = _all_ready,
    draining: Callable[[], bool] = _never,
    scrape: Callable[[], bytes] | None = None,
) -> RestApp:
    return RestApp(RestApi(manager, options or RestOptions(), readiness, draining), scrape)
