"""The REST transport: TensorFlow Serving's HTTP API as a thin adapter over the request layer.

One catch-all route takes every request, because TensorFlow Serving's routing (case-insensitive
``/v1/``, ``:predict`` suffixes, 400 ``Malformed request`` for a wrong method) is not
expressible as path templates. Each API is: decode the body, call the request layer, encode.
The inference APIs (``POST ...:predict``, ``:classify``, ``:regress``) are answered by a raw
ASGI handler in front of FastAPI (``fast_path``), which calls the same ``RestApi.infer``.
Model runs that are not known to be short go off the event loop (``run_site``: a batching
version's queue, or a bounded thread pool), so the loop keeps answering while models compute.

Beyond TensorFlow Serving's API: ``GET /v1/models`` lists every model with its versions' states
(upstream answers 400 there), and the probes ``GET /healthz`` (the process answers) and
``GET /readyz`` (every configured model has an AVAILABLE version) sit outside ``/v1/``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from runtime.errors import DeadlineExceededError, NotFoundError, OpError, ResourceExhaustedError
from serving.requests.call_context import CallContext, calling
from serving.requests.classify import ClassifyRequest, classify
from serving.requests.metadata import GetModelMetadataRequest, get_model_metadata
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import PredictRequest, predict, predict_outputs_async
from serving.requests.regress import RegressRequest, regress
from serving.requests.run_site import (
    INLINE_BODY_BYTES,
    INLINE_OUTPUT_VALUES,
    RunSites,
)
from serving.requests.status import GetModelStatusRequest, GetModelStatusResponse, get_model_status
from serving.rest.deadline_watch import DeadlineWatch
from serving.rest.fast_path import RestApp
from serving.rest.gzip_body import gunzip
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
from serving.rest.routes import API_PATH, Route, parse_route
from serving.servable import ServableManager

log = logging.getLogger("graphserve")

_JSON = {"Content-Type": "application/json"}
_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST, GET",
    "Access-Control-Allow-Headers": "Content-Type",
}
_ORIGIN = re.compile(r"https?://")
HEALTHZ, READYZ = "/healthz", "/readyz"
TIMED_OUT = "Timed out waiting for notification"
INFERENCE_APIS = ("predict", "classify", "regress")
_PROBE_METHODS = ("GET", "HEAD")
# Every method reaches the handler, which answers the ones the API lacks as malformed.
_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]
# libevent's default error page, which TensorFlow Serving sends for paths outside /v1/.
_NOT_FOUND_HTML = (
    "<HTML><HEAD>\n<TITLE>404 Not Found</TITLE>\n</HEAD><BODY>\n<H1>Not Found</H1>\n"
    "</BODY></HTML>\n"
)


@dataclass(frozen=True)
class RestOptions:
    num_threads: int = 4
    timeout_in_ms: int = 30000  # an inference taking longer answers 504; 0 = no limit
    enable_cors: bool = False
    # --enable_signature_method_name_check: classify/regress also require their method name.
    signature_method_name_check: bool = False


Readiness = Callable[[], list[str]]  # configured models without an AVAILABLE version


def _all_ready() -> list[str]:
    return []


class JsonInputs:
    """The request layer's input decoder for a parsed JSON body."""

    def __init__(self, body: PredictBody) -> None:
        self.body = body

    def __call__(self, signature: Any) -> dict[str, np.ndarray]:
        return decode_inputs(self.body, signature.input_dtypes)


def _caller_gone(receive: Any) -> Callable[[], bool] | None:
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
    """The handlers; holds the manager, the readiness callback and the worker pool."""

    def __init__(
        self, manager: ServableManager, options: RestOptions, readiness: Readiness = _all_ready
    ) -> None:
        self.manager = manager
        self.options = options
        self.readiness = readiness
        self.pool = ThreadPoolExecutor(options.num_threads, thread_name_prefix="rest")
        self._timeout_s = options.timeout_in_ms / 1000 if options.timeout_in_ms > 0 else None
        self.sites = RunSites()
        self._deadlines = DeadlineWatch()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- the APIs (synchronous) -------------------------------------------------------------

    def predict(self, route: Route, body: bytes) -> bytes:
        parsed = parse_predict_body(body)
        spec = ModelSpec(route.model_name, route.version, route.label, parsed.signature_name)
        response = predict(self.manager, PredictRequest(spec, JsonInputs(parsed)))
        return encode_predict_response(response.outputs, parsed.format)

    def classify(self, route: Route, body: bytes) -> bytes:
        parsed = parse_examples_body(body)
        spec = ModelSpec(route.model_name, route.version, route.label, parsed.signature_name)
        response = classify(
            self.manager,
            ClassifyRequest(spec, parsed.examples),
            method_name_check=self.options.signature_method_name_check,
        )
        return encode_classify_response(response.classifications)

    def regress(self, route: Route, body: bytes) -> bytes:
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

    def probe(self, path: str) -> tuple[bytes, int]:
        if path == HEALTHZ:
            return probe_json("alive"), 200
        not_ready = sorted(self.readiness())
        if not_ready:
            return probe_json("not ready", not_ready), 503
        return probe_json("ready"), 200

    # -- inference, off the event loop unless known to be short -----------------------------

    def infer(self, route: Route, body: bytes, receive: Any = None) -> Awaitable[bytes]:
        """The response body of an inference API (awaitable); raises OpError. ``receive`` (the
        request's ASGI receive) tells a batching version whether the client is still there."""
        if route.api == "predict" and len(body) <= INLINE_BODY_BYTES:
            return self._predict(route, body, receive)
        return self._infer_in_pool(route, body, receive)

    async def _infer_in_pool(self, route: Route, body: bytes, receive: Any) -> bytes:
        call = CallContext.with_timeout(self._timeout_s, _caller_gone(receive))
        fn = getattr(self, route.api)
        return await self._in_pool(self._calling, call, fn, route, body)

    async def _predict(self, route: Route, body: bytes, receive: Any) -> bytes:
        parsed = parse_predict_body(body)
        site = self.sites.get(route, parsed.signature_name)
        request = PredictRequest(site.spec, JsonInputs(parsed))
        if site.inline():
            # CPU time, not wall time: a preempted run (other processes share the cores) did
            # not block the loop any longer than it would have anyway.
            start = time.thread_time()
            try:
                outputs = predict(self.manager, request).outputs
            finally:
                site.record(time.thread_time() - start)
        else:
            executor = site.executor(self.pool)
            call = CallContext.with_timeout(self._timeout_s, _caller_gone(receive))
            deadline = call.deadline
            if deadline is None:
                outputs = await predict_outputs_async(self.manager, request, executor, call)
            else:
                # The REST timeout as asyncio.timeout gives it (the request's task is cancelled
                # at the deadline), from one timer for all requests (no timer per request).
                task = asyncio.current_task()
                assert task is not None
                deadlines = self._deadlines
                deadlines.watch(task, deadline)
                try:
                    outputs = await predict_outputs_async(self.manager, request, executor, call)
                except asyncio.CancelledError:
                    if deadlines.done(task):
                        raise DeadlineExceededError(TIMED_OUT) from None
                    raise
                except ResourceExhaustedError:
                    # The batcher dropped the task at the deadline just before the loop's own
                    # timer fired: the same timeout, answered the same way.
                    if time.monotonic() >= deadline:
                        raise DeadlineExceededError(TIMED_OUT) from None
                    raise
                finally:
                    deadlines.done(task)
            executor.learned()
        if _values(outputs) > INLINE_OUTPUT_VALUES:
            return await self._in_pool(encode_predict_response, outputs, parsed.format)
        return encode_predict_response(outputs, parsed.format)

    @staticmethod
    def _calling(call: CallContext, fn: Callable[..., bytes], *args: Any) -> bytes:
        with calling(call):  # a batching version's blocking run queues with the deadline
            return fn(*args)

    async def _in_pool(self, fn: Callable[..., bytes], *args: Any) -> bytes:
        future = asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
        try:
            return await asyncio.wait_for(future, self._timeout_s)
        except TimeoutError:
            # The run cannot be interrupted; it finishes in the background, unanswered.
            raise DeadlineExceededError(TIMED_OUT) from None

    # -- HTTP (everything the fast path does not take) -----------------------------------------

    async def _dispatch(self, request: Request, path: str) -> bytes:
        method = request.method
        body = await request.body()
        if "gzip" in request.headers.get("content-encoding", ""):
            body = gunzip(body)
        route = parse_route(method, path)
        if route.api in INFERENCE_APIS:
            return await self.infer(route, body, request.receive)
        if route.api == "metadata":
            return self.metadata(route)
        if route.api == "models":
            return self.models()
        return self.status(route)

    def _probe_response(self, method: str, path: str, headers: dict[str, str]) -> Response:
        headers.update(_JSON)
        if method not in _PROBE_METHODS:
            headers["Allow"] = ", ".join(_PROBE_METHODS)
            return Response(
                error_body(f"Method {method} not allowed on {path}"), 405, headers=headers
            )
        content, status = self.probe(path)
        return Response(content, status, headers=headers)

    async def handle(self, request: Request) -> Response:
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        path = raw_path.decode("latin-1")
        headers = dict(_CORS) if self.options.enable_cors else {}
        if path in (HEALTHZ, READYZ):
            try:
                return self._probe_response(request.method, path, headers)
            except Exception as err:  # a failing readiness check means not ready, loudly
                log.exception("Readiness check failed")
                return Response(error_body(f"{type(err).__name__}: {err}"), 503, headers=headers)
        if not API_PATH.fullmatch(path):
            return Response(_NOT_FOUND_HTML, 404, media_type="text/html")
        if request.method == "OPTIONS":
            ok = _ORIGIN.search(request.headers.get("origin", "")) is not None
            return Response(b"", 200 if ok else 400, headers=headers)
        headers.update(_JSON)
        try:
            content, status = await self._dispatch(request, path), 200
        except OpError as err:
            content, status = error_body(err.message), http_status(err.code)
        except Exception as err:  # the outer boundary: log it, answer like an UNKNOWN error
            log.exception("Unexpected error serving %s %s", request.method, path)
            content, status = error_body(f"{type(err).__name__}: {err}"), 500
        return Response(content, status, headers=headers)


def create_app(
    manager: ServableManager,
    options: RestOptions | None = None,
    readiness: Readiness = _all_ready,
) -> RestApp:
    """The FastAPI application (``app.state.rest_api`` is the ``RestApi``), with the inference
    APIs answered before FastAPI's own request handling."""
    api = RestApi(manager, options or RestOptions(), readiness)
    app = RestApp(docs_url=None, redoc_url=None, openapi_url=None)
    app.router.add_route("/{path:path}", api.handle, methods=_METHODS, include_in_schema=False)
    app.state.rest_api = api
    app.enable_fast_path(api, api.options.enable_cors)
    return app
