"""The raw ASGI fast path for the inference APIs answers exactly as the FastAPI route does, and
runs models where ``run_site`` says: inline once known to be short, else off the event loop
(the pool, or a batching version's queue with the request's deadline and disconnect)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI

from runtime.dtypes import DataType
from runtime.errors import NotFoundError, ResourceExhaustedError
from runtime.saved_model import Signature, TensorSpec
from serving.config import ModelConfig
from serving.core.server_core import ServerCore
from serving.requests import run_site
from serving.requests.call_context import CallContext
from serving.rest import app as rest_app
from serving.rest.app import RestOptions, create_app
from serving.servable import ServableHandle, ServableId, ServableRequest
from tests.serving.rest.server_process import free_port
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO, expected_cases, start_core

H = "/v1/models/half_plus_two"
CUSTOM = expected_cases(FIXTURE_MODELS / "custom_module")[("compute", "batch4")]
MLP = expected_cases(FIXTURE_MODELS / "mlp")[("serving_default", "batch4")]
EXAMPLES = expected_cases(HALF_PLUS_TWO)[("classify_x_to_y", "batch3")]["in"]["inputs"]
GZIP = {"Content-Encoding": "gzip"}


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# (path, body, headers): successes and failures of every inference API.
REQUESTS: list[tuple[str, bytes, dict[str, str]]] = [
    (f"{H}:predict", _json({"instances": [[1.0], [2.0], [5.0]]}), {}),
    (f"{H}:predict", _json({"inputs": {"x": [[1.0], [2.0]]}}), {}),
    (f"{H}:predict", _json({"signature_name": "regress_x2_to_y3", "instances": [[4.0]]}), {}),
    (f"{H}:predict", _json({"signature_name": "classify_x_to_y", "instances": [
        {"b64": base64.b64encode(bytes(e)).decode()} for e in EXAMPLES]}), {}),
    (f"{H}/versions/123:predict", _json({"instances": [[0.5]]}), {}),
    (f"{H}/labels/stable:predict", _json({"instances": [[0.5]]}), {}),
    ("/V1/MODELS/half_plus_two:predict", _json({"instances": [[1.0]]}), {}),
    ("/v1/models/half%5Fplus%5Ftwo:predict", _json({"instances": [[1.0]]}), {}),
    (f"{H}:predict", gzip.compress(_json({"instances": [[1.0], [3.0]]})), GZIP),
    (f"{H}:predict", b"not gzip", GZIP),
    (f"{H}:predict", b"", {}),
    (f"{H}:predict", b'{"instances": [1.0,}', {}),
    (f"{H}:predict", b'{"instances": [[NaN], [Infinity]]}', {}),
    (f"{H}:predict", b'{"instances": [[1e400]]}', {}),
    (f"{H}:predict", b'{"instances": [[true]]}', {}),
    (f"{H}:predict", b'{"instances": [["1.0"]]}', {}),
    (f"{H}:predict", b'{"instances": [[1.0], [2.0, 3.0]]}', {}),
    (f"{H}:predict", b'{"signature_name": "nope", "instances": [[1.0]]}', {}),
    (f"{H}/versions/7:predict", b'{"instances": [[1.0]]}', {}),
    (f"{H}/labels/nope:predict", b'{"instances": [[1.0]]}', {}),
    ("/v1/models/nope:predict", b'{"instances": [[1.0]]}', {}),
    (f"{H}/versions/99999999999999999999:predict", b"{}", {}),
    (f"{H}/versions/x:predict", b"{}", {}),
    (f"{H}:Predict", b"{}", {}),
    (f"{H}:classify", _json({"signature_name": "classify_x_to_y",
                             "examples": [{"x": 1.0}, {"x": 2.0}]}), {}),
    (f"{H}:regress", _json({"signature_name": "regress_x_to_y", "examples": [{"x": 4.0}]}), {}),
    (f"{H}:regress", b'{"examples": []}', {}),
    ("/v1/models/custom:predict", _json({"signature_name": "compute", "inputs": {
        k: v.tolist() for k, v in CUSTOM["in"].items()}}), {}),
    ("/v1/models/custom:predict", _json({"signature_name": "compute", "instances": [
        {k: v[i].tolist() for k, v in CUSTOM["in"].items()} for i in range(4)]}), {}),
    ("/v1/models/mlp:predict", _json({"instances": MLP["in"]["features"].tolist()}), {}),
    ("/v1/models/mlp:predict", _json({"instances": MLP["in"]["features"].tolist() * 40}), {}),
]


@pytest.fixture(scope="module")
def core() -> Iterator[ServerCore]:
    configs = [
        ModelConfig("half_plus_two", HALF_PLUS_TWO, version_labels={"stable": 123}),
        ModelConfig("custom", FIXTURE_MODELS / "custom_module"),
        ModelConfig("mlp", FIXTURE_MODELS / "mlp"),
    ]
    core = start_core(configs)
    yield core
    core.close()


async def _send_all(app: Any, requests: list[tuple[str, bytes, dict[str, str]]]) -> list[Any]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return [await client.post(path, content=body, headers=headers)
                for path, body, headers in requests]


@pytest.mark.parametrize("cors", [False, True])
def test_the_fast_path_answers_byte_for_byte_as_the_fastapi_route(
    core: ServerCore, cors: bool
) -> None:
    app = create_app(core, RestOptions(num_threads=2, enable_cors=cors))
    assert app.fast_path is not None

    async def through_fastapi(scope: Any, receive: Any, send: Any) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    # Twice, so the later requests of a route run where the first ones taught it to.
    requests = REQUESTS + REQUESTS
    try:
        fast = asyncio.run(_send_all(app, requests))
        slow = asyncio.run(_send_all(through_fastapi, requests))
    finally:
        app.state.rest_api.close()
    for (path, body, _), a, b in zip(requests, fast, slow, strict=True):
        where = (path, body[:80])
        assert a.status_code == b.status_code, where
        assert a.headers.raw == b.headers.raw, where
        assert a.content == b.content, where
    assert [r.status_code for r in fast[:9]] == [200] * 9
    assert fast[0].text == '{\n    "predictions": [[2.5], [3.0], [4.5]\n    ]\n}'
    mlp = np.array(fast[len(REQUESTS) - 2].json()["predictions"], np.float32)
    np.testing.assert_allclose(mlp, MLP["out"]["output_0"], rtol=1e-5, atol=1e-6)


def test_only_well_formed_inference_posts_take_the_fast_path(core: ServerCore) -> None:
    app = create_app(core)
    fast = app.fast_path
    assert fast is not None

    def route(path: str) -> str | None:
        found = fast.route({"path": path, "raw_path": path.encode()})
        return found.api if found is not None else None

    try:
        assert route(f"{H}:predict") == "predict"
        assert route(f"{H}/versions/3:classify") == "classify"
        assert route(f"{H}/labels/x:regress") == "regress"
        for path in (f"{H}", f"{H}/metadata", "/v1/models", f"{H}:Predict", "/healthz",
                     f"{H}/versions/x:predict", f"{H}/versions/99999999999999999999:predict",
                     "/v2/models/half_plus_two:predict"):
            assert route(path) is None, path
    finally:
        app.state.rest_api.close()


# -- where a model runs: fakes with a recorded thread ---------------------------------------

SIGNATURE = Signature(
    "serving_default", "tensorflow/serving/predict",
    {"x": TensorSpec("x:0", DataType.DT_FLOAT, (-1, 1))},
    {"y": TensorSpec("y:0", DataType.DT_FLOAT, (-1, 1))},
)
BODY = b'{"instances": [[1.0], [2.0]]}'
PREDICT = "/v1/models/m:predict"


class _Model:
    """A version that doubles ``x``, recording the thread of each run."""

    def __init__(self, run: Callable[[], None] = lambda: None) -> None:
        self.signatures = {"serving_default": SIGNATURE}
        self.threads: list[threading.Thread] = []
        self._run = run

    def signature(self, key: str) -> Signature:
        return self.signatures[key]

    def run(self, key: str, inputs: dict[str, np.ndarray],
            output_aliases: Any = None) -> dict[str, np.ndarray]:
        self.threads.append(threading.current_thread())
        self._run()
        return {"y": inputs["x"] * 2}


class _BatchingModel(_Model):
    """A version that batches: ``submit`` keeps the task and never answers on its own."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[CallContext] = []
        self.on_done: list[Callable[[Any, BaseException | None], None]] = []

    def submit(self, key: str, inputs: Any, output_aliases: Any, on_done: Any,
               call: CallContext | None = None) -> None:
        assert call is not None
        self.calls.append(call)
        self.on_done.append(on_done)


class _Manager:
    def __init__(self, model: _Model) -> None:
        self.model = model

    def handle(self, request: ServableRequest) -> ServableHandle:
        if request.name != "m":
            raise NotFoundError(f"Servable not found for request: {request}")
        return ServableHandle(ServableId("m", 1), self.model)  # type: ignore[arg-type]

    def version_states(self, name: str) -> list[Any]:
        return []

    def model_names(self) -> list[str]:
        return ["m"]


def _post_all(app: Any, count: int, body: bytes = BODY) -> list[httpx.Response]:
    return asyncio.run(_send_all(app, [(PREDICT, body, {})] * count))


def test_a_short_run_goes_inline_after_its_first_run_in_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_site, "INLINE_RUN_S", 10.0)  # every run counts as short
    model = _Model()
    app = create_app(_Manager(model), RestOptions(num_threads=1))
    try:
        responses = _post_all(app, 4)
    finally:
        app.state.rest_api.close()
    assert [r.json() for r in responses] == [{"predictions": [[2.0], [4.0]]}] * 4
    pool, *loop = model.threads
    assert pool.name.startswith("rest")
    assert {t.name for t in loop} == {threading.main_thread().name}


def test_a_long_run_and_a_large_body_stay_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _Model()
    app = create_app(_Manager(model), RestOptions(num_threads=1))
    try:
        monkeypatch.setattr(run_site, "INLINE_RUN_S", 0.0)  # no run is short
        _post_all(app, 3)
        monkeypatch.setattr(run_site, "INLINE_RUN_S", 10.0)
        big = b'{"instances": [' + b", ".join([b"[1.5]"] * 4000) + b"]}"
        assert len(big) > run_site.INLINE_BODY_BYTES
        (response,) = _post_all(app, 1, big)
    finally:
        app.state.rest_api.close()
    assert response.json() == {"predictions": [[3.0]] * 4000}
    assert all(t.name.startswith("rest") for t in model.threads)


def test_a_stuck_run_answers_504_after_the_rest_timeout() -> None:
    release = threading.Event()
    model = _Model(run=lambda: release.wait(30))
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=50))
    try:
        (response,) = _post_all(app, 1)
    finally:
        release.set()
        app.state.rest_api.close()
    assert response.status_code == 504
    assert response.json() == {"error": "Timed out waiting for notification"}


def test_a_batching_version_gets_the_deadline_and_a_timed_out_task_is_cancelled() -> None:
    model = _BatchingModel()
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=50))
    try:
        before = time.monotonic()
        (response,) = _post_all(app, 1)
    finally:
        app.state.rest_api.close()
    assert response.status_code == 504
    assert response.json() == {"error": "Timed out waiting for notification"}
    (call,) = model.calls
    assert call.deadline is not None and before < call.deadline <= before + 0.05 + 1.0
    assert call.cancelled is not None and call.cancelled()  # the batcher will drop it
    assert model.threads == []  # queued, never run by the fake's blocking path


class _ClockPastTheDeadline:
    """``time`` for the REST layer as a batch thread saw it: the deadline already passed
    (while the event loop's own timer has not fired yet)."""

    thread_time = staticmethod(time.thread_time)

    @staticmethod
    def monotonic() -> float:
        return time.monotonic() + 3600


def test_a_task_dropped_at_its_deadline_is_the_same_504(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _BatchingModel()
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=60000))
    monkeypatch.setattr(rest_app, "time", _ClockPastTheDeadline)

    async def scenario() -> httpx.Response:
        async def drop_when_queued() -> None:
            while not model.on_done:
                await asyncio.sleep(0.001)
            model.on_done[0](None, ResourceExhaustedError(
                "Run() timeout exceeded while waiting in batching queue"))

        dropper = asyncio.create_task(drop_when_queued())
        (response,) = await _send_all(app, [(PREDICT, BODY, {})])
        await dropper
        return response

    try:
        response = asyncio.run(scenario())
    finally:
        app.state.rest_api.close()
    assert response.status_code == 504
    assert response.json() == {"error": "Timed out waiting for notification"}


def test_a_batching_version_answers_through_its_callback() -> None:
    model = _BatchingModel()
    app = create_app(_Manager(model), RestOptions(num_threads=1))

    async def scenario() -> list[httpx.Response]:
        async def answer_when_queued() -> None:
            while len(model.on_done) < 2:
                await asyncio.sleep(0.001)
            for on_done in model.on_done:  # from a "batch thread"
                threading.Thread(target=on_done, args=({"y": np.array([[7.0]])}, None)).start()

        answering = asyncio.create_task(answer_when_queued())
        responses = await asyncio.gather(
            _send_all(app, [(PREDICT, BODY, {})]), _send_all(app, [(PREDICT, BODY, {})])
        )
        await answering
        return [r for pair in responses for r in pair]

    try:
        responses = asyncio.run(scenario())
    finally:
        app.state.rest_api.close()
    assert [r.json() for r in responses] == [{"predictions": [[7.0]]}] * 2
    assert model.threads == []


def test_a_client_that_disconnects_cancels_its_queued_task() -> None:
    """Under uvicorn (the server graphserve runs on), a dropped connection shows in the
    task's ``cancelled()`` while it waits in the queue."""
    model = _BatchingModel()
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=0))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                           access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:  # waiting for start-up, not timing anything
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
            while not model.calls:
                assert time.monotonic() < deadline, "the task was never queued"
                time.sleep(0.01)
            (call,) = model.calls
            assert call.cancelled is not None and not call.cancelled()
        while not call.cancelled():
            assert time.monotonic() < deadline, "the disconnect never showed"
            time.sleep(0.01)
        for on_done in model.on_done:  # the batcher drops it; nobody is answered
            on_done(None, ResourceExhaustedError("dropped"))
    finally:
        server.should_exit = True
        thread.join(60)
        app.state.rest_api.close()
