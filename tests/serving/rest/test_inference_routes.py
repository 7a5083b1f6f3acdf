"""The inference APIs of the REST app: each request gets TensorFlow Serving's status and body,
and models run where the dispatcher says: inline once known to be short, else off the event
loop (the pool, or a batching version's queue with the request's deadline and disconnect)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Self

import httpx
import numpy as np
import pytest
import uvicorn

from runtime.cancellation import Cancellation
from runtime.dtypes import DataType
from runtime.errors import (
    CancelledError,
    DeadlineExceededError,
    NotFoundError,
    ResourceExhaustedError,
)
from runtime.saved_model import Signature, TensorSpec
from serving.batching.scheduler import QUEUE_FULL_MESSAGE
from serving.config import ModelConfig
from serving.core.server_core import ServerCore
from serving.requests import call_context
from serving.requests.call_context import TIMED_OUT
from serving.requests.call_watch import CLIENT_GONE
from serving.rest import app as rest_app
from serving.rest.app import RestApp, RestOptions, create_app
from serving.rest.http_server import HttpLimits, protocol_class
from serving.servable import ServableHandle, ServableId, ServableRequest
from tests.serving.rest.server_process import free_port
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO, expected_cases, start_core

H = "/v1/models/half_plus_two"
CUSTOM = expected_cases(FIXTURE_MODELS / "custom_module")[("compute", "batch4")]
MLP = expected_cases(FIXTURE_MODELS / "mlp")[("serving_default", "batch4")]
EXAMPLES = expected_cases(HALF_PLUS_TWO)[("classify_x_to_y", "batch3")]["in"]["inputs"]
GZIP = {"Content-Encoding": "gzip"}
WAIT_S = 60.0  # a guard against hanging the suite, never a timing
CORS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"POST, GET"),
    (b"access-control-allow-headers", b"Content-Type"),
]


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _error(message: str) -> str:
    return json.dumps({"error": message}, indent=4)


def _predictions(rows: str) -> str:
    return '{\n    "predictions": ' + rows + "\n    ]\n}"


def _custom_outputs(body: dict[str, Any], key: str) -> dict[str, np.ndarray]:
    if key == "outputs":
        columns = body["outputs"]
    else:
        columns = {a: [row[a] for row in body["predictions"]] for a in CUSTOM["out"]}
    return {a: np.array(v, dtype=CUSTOM["out"][a].dtype) for a, v in columns.items()}


def _same_custom(key: str) -> Callable[[str], None]:
    def check(text: str) -> None:
        got = _custom_outputs(json.loads(text), key)
        assert sorted(got) == sorted(CUSTOM["out"])
        for alias, want in CUSTOM["out"].items():
            np.testing.assert_allclose(got[alias], want, rtol=1e-5, atol=1e-6)

    return check


def _same_mlp(repeat: int) -> Callable[[str], None]:
    def check(text: str) -> None:
        got = np.array(json.loads(text)["predictions"], np.float32)
        want = np.concatenate([MLP["out"]["output_0"]] * repeat)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    return check


# (path, body, headers, status, the exact body or a check of it): successes and failures of
# every inference API, with TensorFlow Serving's messages.
REQUESTS: list[tuple[str, bytes, dict[str, str], int, str | Callable[[str], None]]] = [
    (f"{H}:predict", _json({"instances": [[1.0], [2.0], [5.0]]}), {}, 200,
     _predictions("[[2.5], [3.0], [4.5]")),
    (f"{H}:predict", _json({"inputs": {"x": [[1.0], [2.0]]}}), {}, 200,
     json.dumps({"outputs": [[2.5], [3.0]]}, indent=4)),
    (f"{H}:predict", _json({"signature_name": "regress_x2_to_y3", "instances": [[4.0]]}), {},
     200, _predictions("[[5.0]")),
    (f"{H}:predict", _json({"signature_name": "classify_x_to_y", "instances": [
        {"b64": base64.b64encode(bytes(e)).decode()} for e in EXAMPLES]}), {}, 200,
     _predictions("[[2.5], [3.0], [4.5]")),
    (f"{H}/versions/123:predict", _json({"instances": [[0.5]]}), {}, 200,
     _predictions("[[2.25]")),
    (f"{H}/labels/stable:predict", _json({"instances": [[0.5]]}), {}, 200,
     _predictions("[[2.25]")),
    ("/V1/MODELS/half_plus_two:predict", _json({"instances": [[1.0]]}), {}, 200,
     _predictions("[[2.5]")),
    ("/v1/models/half%5Fplus%5Ftwo:predict", _json({"instances": [[1.0]]}), {}, 200,
     _predictions("[[2.5]")),
    (f"{H}:predict", gzip.compress(_json({"instances": [[1.0], [3.0]]})), GZIP, 200,
     _predictions("[[2.5], [3.5]")),
    (f"{H}:predict", b"not gzip", GZIP, 400, _error("JSON Parse error: The document is empty")),
    (f"{H}:predict", b"", {}, 400, _error("JSON Parse error: The document is empty")),
    (f"{H}:predict", b'{"instances": [1.0,}', {}, 400,
     _error("JSON Parse error: Invalid value. at offset: 19")),
    (f"{H}:predict", b'{"instances": [[NaN], [Infinity]]}', {}, 200,
     _predictions("[[NaN], [Infinity]")),
    (f"{H}:predict", b'{"instances": [[1e400]]}', {}, 400,
     _error("JSON Parse error: Number too big to be stored in double. at offset: 16")),
    (f"{H}:predict", b'{"instances": [[true]]}', {}, 400,
     _error("Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON "
            "Value: true Type: True is not of expected type: float")),
    (f"{H}:predict", b'{"instances": [["1.0"]]}', {}, 400,
     _error("Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON "
            'Value: "1.0" Type: String is not of expected type: float')),
    (f"{H}:predict", b'{"instances": [[1.0], [2.0, 3.0]]}', {}, 400,
     _error("Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
            "Expecting tensor size: 1 but got: 2")),
    (f"{H}:predict", b'{"signature_name": "nope", "instances": [[1.0]]}', {}, 400,
     _error('Serving signature name: "nope" not found in signature def')),
    (f"{H}/versions/7:predict", b'{"instances": [[1.0]]}', {}, 404,
     _error("Servable not found for request: Specific(half_plus_two, 7)")),
    (f"{H}/labels/nope:predict", b'{"instances": [[1.0]]}', {}, 400,
     _error("Unrecognized servable version label: nope")),
    ("/v1/models/nope:predict", b'{"instances": [[1.0]]}', {}, 404,
     _error("Servable not found for request: Latest(nope)")),
    (f"{H}/versions/99999999999999999999:predict", b"{}", {}, 400,
     _error("Failed to convert version: 99999999999999999999 to numeric.")),
    (f"{H}/versions/x:predict", b"{}", {}, 400,
     _error(f"Malformed request: POST {H}/versions/x:predict")),
    (f"{H}:Predict", b"{}", {}, 400, _error(f"Malformed request: POST {H}:Predict")),
    (f"{H}:classify", _json({"signature_name": "classify_x_to_y",
                             "examples": [{"x": 1.0}, {"x": 2.0}]}), {}, 200,
     '{\n    "results": [[["", 2.5]], [["", 3.0]]\n    ]\n}'),
    (f"{H}:regress", _json({"signature_name": "regress_x_to_y", "examples": [{"x": 4.0}]}), {},
     200, '{\n    "results": [4.0]\n}'),
    (f"{H}:regress", b'{"examples": []}', {}, 400,
     _error('JSON Value: {\n    "examples": []\n} \'examples\' value is an empty array')),
    ("/v1/models/custom:predict", _json({"signature_name": "compute", "inputs": {
        k: v.tolist() for k, v in CUSTOM["in"].items()}}), {}, 200, _same_custom("outputs")),
    ("/v1/models/custom:predict", _json({"signature_name": "compute", "instances": [
        {k: v[i].tolist() for k, v in CUSTOM["in"].items()} for i in range(4)]}), {}, 200,
     _same_custom("predictions")),
    ("/v1/models/mlp:predict", _json({"instances": MLP["in"]["features"].tolist()}), {}, 200,
     _same_mlp(1)),
    ("/v1/models/mlp:predict", _json({"instances": MLP["in"]["features"].tolist() * 40}), {},
     200, _same_mlp(40)),
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
def test_each_request_gets_tensorflow_servings_answer(core: ServerCore, cors: bool) -> None:
    app = create_app(core, RestOptions(num_threads=2, enable_cors=cors))
    # Twice, so the later requests of a route run where the first ones taught it to (and
    # answer from the route already parsed).
    requests = [(path, body, headers) for path, body, headers, _, _ in REQUESTS]
    try:
        responses = asyncio.run(_send_all(app, requests + requests))
    finally:
        app.close()
    for (path, body, _, status, want), response in zip(
        REQUESTS + REQUESTS, responses, strict=True
    ):
        where = (path, body[:80])
        assert response.status_code == status, where
        assert response.headers.raw == [
            *(CORS if cors else []),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(response.content)).encode()),
        ], where
        if isinstance(want, str):
            assert response.text == want, where
        else:
            want(response.text)


# -- where a model runs: fake versions that record their runs -------------------------------

SIGNATURE = Signature(
    "serving_default", "tensorflow/serving/predict",
    {"x": TensorSpec("x:0", DataType.DT_FLOAT, (-1, 1))},
    {"y": TensorSpec("y:0", DataType.DT_FLOAT, (-1, 1))},
)
BODY = b'{"instances": [[1.0], [2.0]]}'
PREDICT = "/v1/models/m:predict"


class _Plain:
    """A version that does not batch: doubles ``x``, recording the thread and cancellation of
    each run; ``during`` runs inside it. ``bounded``: its graph has no loops."""

    meta_graph: Any = None

    def __init__(
        self, during: Callable[[Cancellation | None], None] = lambda _: None, bounded: bool = True
    ) -> None:
        self.signatures = {"serving_default": SIGNATURE}
        self.bounded = bounded
        self.threads: list[threading.Thread] = []
        self.cancellations: list[Cancellation | None] = []
        self._during = during

    def run(self, key: str, inputs: dict[str, np.ndarray], output_aliases: Any = None,
            cancellation: Cancellation | None = None) -> dict[str, np.ndarray]:
        self.threads.append(threading.current_thread())
        self.cancellations.append(cancellation)
        self._during(cancellation)
        return {"y": inputs["x"] * 2}

    def batches(self, key: str, output_aliases: Any) -> bool:
        return False

    def admits(self, key: str) -> bool:
        return True

    def submit(self, *args: Any) -> None:
        raise AssertionError("a version that does not batch is run, not submitted")

    def close(self) -> None:
        pass


class _Batching(_Plain):
    """A version that batches: ``submit`` keeps the task and never answers on its own;
    ``full`` makes its queue refuse new tasks."""

    def __init__(self, full: bool = False) -> None:
        super().__init__()
        self.full = full
        self.callers: list[Any] = []
        self.on_done: list[Callable[[Any, BaseException | None], None]] = []

    def batches(self, key: str, output_aliases: Any) -> bool:
        return True

    def admits(self, key: str) -> bool:
        return not self.full

    def submit(self, key: str, inputs: Any, output_aliases: Any, on_done: Any,
               caller: Any) -> None:
        self.callers.append(caller)
        self.on_done.append(on_done)


class _Manager:
    def __init__(self, model: _Plain) -> None:
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


def _until_cancelled(cancellation: Cancellation | None) -> None:
    """A run that checks between kernels, stopping once cancelled (at most a minute)."""
    assert cancellation is not None
    for _ in range(int(WAIT_S / 0.01)):
        if cancellation.cancelled:
            return
        time.sleep(0.01)


def test_a_short_run_goes_inline_after_its_first_run_in_the_pool() -> None:
    model = _Plain()
    # Every run counts as short.
    app = create_app(_Manager(model), RestOptions(num_threads=1, inline_run_s=10.0))
    try:
        responses = _post_all(app, 4)
    finally:
        app.close()
    assert [r.json() for r in responses] == [{"predictions": [[2.0], [4.0]]}] * 4
    pool, *loop = model.threads
    assert pool.name.startswith("rest")
    assert {t.name for t in loop} == {threading.main_thread().name}


def test_a_version_with_loops_never_runs_inline() -> None:
    model = _Plain(bounded=False)  # a loop could run for any time: nothing could stop it inline
    # Every run counts as short.
    app = create_app(_Manager(model), RestOptions(num_threads=1, inline_run_s=10.0))
    try:
        responses = _post_all(app, 3)
    finally:
        app.close()
    assert [r.json() for r in responses] == [{"predictions": [[2.0], [4.0]]}] * 3
    assert all(t.name.startswith("rest") for t in model.threads)
    assert all(c is not None for c in model.cancellations)


def test_a_long_run_and_a_large_request_stay_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[tuple[str, str]] = []

    def recorded(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            steps.append((name, threading.current_thread().name))
            return real(*args, **kwargs)

        return step

    for name in ("parse_predict_body", "decode_inputs", "encode_predict_response"):
        monkeypatch.setattr(rest_app, name, recorded(name, getattr(rest_app, name)))
    model = _Plain()
    main = threading.main_thread().name
    slow = create_app(_Manager(model), RestOptions(num_threads=1, inline_run_s=0.0))  # none short
    try:
        assert [r.json() for r in _post_all(slow, 3)] == [{"predictions": [[2.0], [4.0]]}] * 3
        assert all(t.name.startswith("rest") for t in model.threads)
        # A small request's body is parsed, decoded and written on the loop.
        assert {thread for _, thread in steps} == {main}
    finally:
        slow.close()
    app = create_app(_Manager(model), RestOptions(num_threads=1, inline_run_s=10.0))
    try:
        # Known short after its first run, but not on inputs this large: those runs stay off
        # the loop too.
        *_, short = _post_all(app, 2)
        assert model.threads[-1].name == main
        steps.clear()
        rows = 20_000  # 80 KB of float32 input
        big = b'{"instances": [' + b", ".join([b"[1.5]"] * rows) + b"]}"
        assert len(big) > rest_app.INLINE_BODY_BYTES
        (response,) = _post_all(app, 1, big)
    finally:
        app.close()
    assert short.json() == {"predictions": [[2.0], [4.0]]}
    assert response.json() == {"predictions": [[3.0]] * rows}
    assert model.threads[-1].name.startswith("rest")
    assert [name for name, _ in steps] == [
        "parse_predict_body", "decode_inputs", "encode_predict_response"
    ]
    assert all(thread.startswith("rest") for _, thread in steps), steps


def test_a_stuck_run_answers_504_after_the_rest_timeout_and_is_stopped() -> None:
    finished = threading.Event()

    def stuck(cancellation: Cancellation | None) -> None:
        _until_cancelled(cancellation)
        finished.set()

    model = _Plain(stuck)
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=50))
    try:
        (response,) = _post_all(app, 1)
        assert finished.wait(WAIT_S)
    finally:
        app.close()
    assert response.status_code == 504
    assert response.json() == {"error": TIMED_OUT}
    (cancellation,) = model.cancellations
    assert cancellation is not None
    assert isinstance(cancellation.error, DeadlineExceededError)
    assert cancellation.error.message == TIMED_OUT


def test_a_batching_version_gets_the_deadline_and_a_timed_out_task_is_cancelled() -> None:
    model = _Batching()
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=50))
    try:
        before = time.monotonic()
        (response,) = _post_all(app, 1)
    finally:
        app.close()
    assert response.status_code == 504
    assert response.json() == {"error": TIMED_OUT}
    (caller,) = model.callers
    assert caller.deadline is not None and before < caller.deadline <= before + 0.05 + 1.0
    assert caller.cancelled()  # the batcher will drop it
    assert model.threads == []  # queued, never run by the fake's blocking path


class _ClockPastTheDeadline:
    """``time`` for the caller as a batch thread saw it: the deadline already passed (while the
    event loop's own timer has not fired yet)."""

    @staticmethod
    def monotonic() -> float:
        return time.monotonic() + 3600


def test_a_task_dropped_at_its_deadline_is_the_same_504(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _Batching()
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=60000))

    async def scenario() -> httpx.Response:
        async def drop_when_queued() -> None:
            for _ in range(int(WAIT_S / 0.001)):
                if model.on_done:
                    break
                await asyncio.sleep(0.001)
            monkeypatch.setattr(call_context, "time", _ClockPastTheDeadline)
            model.on_done[0](None, ResourceExhaustedError(
                "Run() timeout exceeded while waiting in batching queue"))

        dropper = asyncio.create_task(drop_when_queued())
        (response,) = await _send_all(app, [(PREDICT, BODY, {})])
        await dropper
        return response

    try:
        response = asyncio.run(scenario())
    finally:
        app.close()
    assert response.status_code == 504
    assert response.json() == {"error": TIMED_OUT}


def test_a_batching_version_answers_through_its_callback() -> None:
    model = _Batching()
    app = create_app(_Manager(model), RestOptions(num_threads=1))

    async def scenario() -> list[httpx.Response]:
        async def answer_when_queued() -> None:
            for _ in range(int(WAIT_S / 0.001)):
                if len(model.on_done) == 2:
                    break
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
        app.close()
    assert [r.json() for r in responses] == [{"predictions": [[7.0]]}] * 2
    assert model.threads == []


def test_a_full_queue_answers_503_before_the_inputs_are_decoded() -> None:
    model = _Batching(full=True)
    app = create_app(_Manager(model), RestOptions(num_threads=1))
    try:
        # Inputs the signature cannot type: decoding them answers 400.
        (full,) = _post_all(app, 1, b'{"instances": [["not a float"]]}')
        model.full = False
        (typed,) = _post_all(app, 1, b'{"instances": [["not a float"]]}')
    finally:
        app.close()
    assert (full.status_code, full.json()) == (503, {"error": QUEUE_FULL_MESSAGE})
    assert typed.status_code == 400 and "not of expected type: float" in typed.json()["error"]
    assert model.callers == [] and model.threads == []


# -- under the daemon's HTTP server: a client that disconnects ------------------------------


class _Listening:
    """The app served on a free loopback port by the daemon's HTTP stack (uvicorn with its
    connection limits), on a thread."""

    def __init__(self, app: RestApp) -> None:
        self.app = app
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None,
                                access_log=False, lifespan="off",
                                http=protocol_class(HttpLimits(), 64))
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.server.started:  # waiting for start-up, not timing anything
            assert self.thread.is_alive() and time.monotonic() < deadline, "did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)
        self.app.close()

    def post_then_hang_up(self, until: Callable[[], bool]) -> None:
        """Send a Predict, wait until ``until()`` (the request has reached the model), then
        close the connection without reading the answer."""
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            sock.sendall(b"POST " + PREDICT.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
            _wait_for(until, "the request never reached the model")


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_client_that_disconnects_cancels_its_queued_task() -> None:
    """A dropped connection shows in the queued task's ``cancelled()``."""
    model = _Batching()
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=0))
    with _Listening(app) as listening:
        listening.post_then_hang_up(lambda: bool(model.callers))
        (caller,) = model.callers
        assert caller.deadline is None  # no REST timeout configured
        _wait_for(caller.cancelled, "the disconnect never showed")
        for on_done in model.on_done:  # the batcher drops it; nobody is answered
            on_done(None, ResourceExhaustedError("dropped"))


def test_a_client_that_disconnects_stops_its_run() -> None:
    finished = threading.Event()

    def until_stopped(cancellation: Cancellation | None) -> None:
        _until_cancelled(cancellation)
        finished.set()

    model = _Plain(until_stopped)
    app = create_app(_Manager(model), RestOptions(num_threads=1, timeout_in_ms=0))
    with _Listening(app) as listening:
        listening.post_then_hang_up(lambda: bool(model.cancellations))
        assert finished.wait(WAIT_S)
    (cancellation,) = model.cancellations
    assert cancellation is not None
    assert isinstance(cancellation.error, CancelledError)
    assert cancellation.error.message == CLIENT_GONE
