"""Batching through the real daemon: 64 concurrent clients, REST and gRPC together.

Every answer must equal the unbatched result for the same input (each client sends its own
random rows, one to three per request), and the server must really have batched: the summary
it logs when the version unloads shows batches of more than one task.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.saved_model import load_saved_model
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS

MLP = FIXTURE_MODELS / "mlp"
CLIENTS = 64
REQUESTS_PER_CLIENT = 8
# A window long enough that concurrent requests meet in one batch even on a busy machine.
PARAMS = """
max_batch_size { value: 64 }
batch_timeout_micros { value: 20000 }
max_enqueued_batches { value: 1000 }
num_batch_threads { value: 2 }
"""
SUMMARY = re.compile(r"Batching summary for mlp/1/serving_default: (\d+) tasks in (\d+) batches")


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    width = _signature_width()
    return [
        rng.standard_normal((int(rng.integers(1, 4)), width)).astype(np.float32)
        for _ in range(REQUESTS_PER_CLIENT)
    ]


def _signature_width() -> int:
    with np.load(MLP / "expected.npz", allow_pickle=False) as data:
        key = next(k for k in data.files if k.startswith("serving_default/") and "/in/" in k)
        return int(data[key].shape[1])


@pytest.fixture(scope="module")
def unbatched() -> object:
    model = load_saved_model(MLP / "1")
    yield model
    model.close()


def test_concurrent_rest_and_grpc_clients_get_their_own_rows(
    tmp_path: Path, unbatched: object
) -> None:
    params = tmp_path / "batching.pbtxt"
    params.write_text(PARAMS)
    server = ServerProcess(
        ["--model_name=mlp", f"--model_base_path={MLP}", "--enable_batching",
         f"--batching_parameters_file={params}"],
        ["mlp"],
    )
    signature = unbatched.signatures["serving_default"]  # type: ignore[attr-defined]
    (alias,) = signature.inputs
    (out_alias,) = signature.outputs
    mismatches: list[str] = []
    start = threading.Barrier(CLIENTS)

    def expected(rows: np.ndarray) -> np.ndarray:
        return unbatched.run("serving_default", {alias: rows})[out_alias]  # type: ignore[attr-defined]

    def rest_client(seed: int) -> int:
        start.wait()
        for rows in _inputs(seed):
            reply = server.client.post(
                "/v1/models/mlp:predict", json={"inputs": {alias: rows.tolist()}}
            )
            got = np.asarray(reply.json()["outputs"], np.float32)
            if not np.allclose(got, expected(rows), rtol=1e-5, atol=1e-6):
                mismatches.append(f"REST client {seed}: {got} != {expected(rows)}")
        return REQUESTS_PER_CLIENT

    def grpc_client(seed: int, channel: grpc.Channel) -> int:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        start.wait()
        for rows in _inputs(seed):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "mlp"
            request.inputs[alias].CopyFrom(make_tensor_proto(rows))
            got = to_ndarray(stub.Predict(request, timeout=60).outputs[out_alias])
            if not np.allclose(got, expected(rows), rtol=1e-5, atol=1e-6):
                mismatches.append(f"gRPC client {seed}: {got} != {expected(rows)}")
        return REQUESTS_PER_CLIENT

    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel, \
                ThreadPoolExecutor(CLIENTS) as pool:
            futures = [
                pool.submit(rest_client, seed) if seed % 2 else pool.submit(grpc_client, seed, channel)
                for seed in range(CLIENTS)
            ]
            answered = sum(f.result(timeout=300) for f in futures)
    finally:
        status = server.stop()
    assert status == 0, server.output()
    assert not mismatches, mismatches[:3]
    assert answered == CLIENTS * REQUESTS_PER_CLIENT
    summary = SUMMARY.search(server.output())
    assert summary is not None, server.output()[-3000:]
    tasks, batches = int(summary.group(1)), int(summary.group(2))
    assert tasks >= answered  # warmup-free model: every request is one task
    assert batches < tasks, f"{tasks} tasks ran in {batches} batches: nothing was batched"


FULL_QUEUE_PARAMS = """
max_batch_size { value: 2 }
batch_timeout_micros { value: 3000000 }
max_enqueued_batches { value: 1 }
num_batch_threads { value: 1 }
"""
QUEUE_FULL = "The batch scheduling queue to which this task was submitted is full"


def test_a_full_queue_answers_at_once_over_both_transports(tmp_path: Path) -> None:
    params = tmp_path / "batching.pbtxt"
    params.write_text(FULL_QUEUE_PARAMS)
    server = ServerProcess(
        ["--model_name=mlp", f"--model_base_path={MLP}", "--enable_batching",
         f"--batching_parameters_file={params}"],
        ["mlp"],
    )
    width = _signature_width()
    try:
        with ThreadPoolExecutor(1) as pool, \
                grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            # One row opens the only batch the queue may hold; it waits out its window.
            waiting = pool.submit(
                server.client.post, "/v1/models/mlp:predict",
                json={"instances": [[0.5] * width]},
            )
            deadline = threading.Event()
            deadline.wait(0.5)
            # Two more rows do not fit in that batch and a second batch is not allowed.
            reply = server.client.post(
                "/v1/models/mlp:predict", json={"instances": [[0.5] * width] * 2}
            )
            assert reply.status_code == 503
            assert reply.json()["error"].startswith(QUEUE_FULL)
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "mlp"
            request.inputs["features"].CopyFrom(
                make_tensor_proto(np.full((2, width), 0.5, np.float32))
            )
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            with pytest.raises(grpc.RpcError) as info:
                stub.Predict(request, timeout=60)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            assert info.value.details().startswith(QUEUE_FULL)
            assert not waiting.done()  # refused at once, not after the window
            assert waiting.result(timeout=60).status_code == 200
    finally:
        assert server.stop() == 0, server.output()
