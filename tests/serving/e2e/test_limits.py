"""The request path is bounded, against the real daemon on loopback: bodies, tensor sizes, dims,
JSON nesting and a full batch queue are answered with clear client errors before anything large
is allocated, on REST and gRPC alike, and the server keeps serving afterwards."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

from protos.tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from tests.serving.e2e.support import HALF_PLUS_TWO
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS

MLP = FIXTURE_MODELS / "mlp"
PREDICT = "/v1/models/mlp:predict"
ROW = [0.25] * 8


def _config(tmp: Path, models: dict[str, Path]) -> str:
    entries = "".join(
        f'  config {{ name: "{name}" base_path: "{path}" model_platform: "tensorflow" }}\n'
        for name, path in models.items()
    )
    config = tmp / "models.config"
    config.write_text(f"model_config_list {{\n{entries}}}\n")
    return f"--model_config_file={config}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    flags = [
        _config(tmp_path_factory.mktemp("limits"), {"mlp": MLP, "half_plus_two": HALF_PLUS_TWO}),
        "--rest_api_max_body_bytes=1048576",
        "--max_request_tensor_bytes=8388608",
    ]
    process = ServerProcess(flags, ["mlp", "half_plus_two"])
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[prediction_service_pb2_grpc.PredictionServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _still_serves(server: ServerProcess) -> None:
    response = server.client.post(PREDICT, json={"instances": [ROW]})
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"][0]) == 4


def _request(tensor: tensor_pb2.TensorProto) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "mlp"
    request.inputs["features"].CopyFrom(tensor)
    return request


def _float_tensor(dims: list[int], values: list[float]) -> tensor_pb2.TensorProto:
    return tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
        ),
        float_val=values,
    )


def _grpc_error(stub: prediction_service_pb2_grpc.PredictionServiceStub,
                request: predict_pb2.PredictRequest) -> grpc.RpcError:
    try:
        stub.Predict(request, timeout=60)
    except grpc.RpcError as err:
        return err
    raise AssertionError("the request succeeded")


def test_a_body_over_the_limit_is_413_before_it_is_read(server: ServerProcess) -> None:
    announced = 1 << 30  # a GiB announced, a few bytes sent: refused on the header alone
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {announced}\r\n\r\n{{".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert "1048576 bytes" in json.loads(body)["error"]
    _still_serves(server)


def test_a_client_still_sending_its_large_body_reads_the_413(server: ServerProcess) -> None:
    # The answer comes while the body streams in; the connection must not be reset under the
    # client (a reset discards the answer before it is read).
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {8 << 20}\r\n\r\n".encode()
            + b'{"instances": [' + b" " * (256 << 10)
        )
        chunk = b" " * (64 << 10)
        try:
            for _ in range(96):  # 6 MiB more, past the 1 MiB limit
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading after a while: the answer must still be there
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:200]
    assert "error" in json.loads(body)
    _still_serves(server)


def test_a_streamed_body_over_the_limit_is_413(server: ServerProcess) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"instances": ['
        for _ in range(64):  # 2 MiB in all, no Content-Length
            yield b"[" + b"0.5," * 8191 + b"0.5],"
        yield b"]}"

    response = server.client.post(PREDICT, content=chunks())
    assert response.status_code == 413
    assert "error" in response.json()
    _still_serves(server)


def test_a_gzipped_body_inflating_past_the_limit_is_refused(server: ServerProcess) -> None:
    import gzip

    bomb = gzip.compress(b'{"instances": [' + b" " * (8 << 20) + b"]}")
    response = server.client.post(
        PREDICT, content=bomb, headers={"Content-Encoding": "gzip"}
    )
    assert response.status_code == 400  # TensorFlow Serving: an empty body
    _still_serves(server)


def test_a_tensor_expanding_past_the_request_limit_is_resource_exhausted(
    server: ServerProcess, stub: prediction_service_pb2_grpc.PredictionServiceStub
) -> None:
    # One float_val repeats to fill the shape (TensorFlow's rule): 64 MiB from a few bytes.
    err = _grpc_error(stub, _request(_float_tensor([1 << 21, 8], [1.0])))
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.details()
    assert "8388608" in err.details()
    _still_serves(server)


def test_a_tensor_of_impossible_size_is_refused_not_allocated(
    server: ServerProcess, stub: prediction_service_pb2_grpc.PredictionServiceStub
) -> None:
    err = _grpc_error(stub, _request(_float_tensor([1 << 40, 8], [1.0])))
    assert err.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT)
    err = _grpc_error(stub, _request(_float_tensor([1 << 62, 1 << 62], [1.0])))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    _still_serves(server)


def test_more_than_64_dims_is_invalid_argument(
    server: ServerProcess, stub: prediction_service_pb2_grpc.PredictionServiceStub
) -> None:
    err = _grpc_error(stub, _request(_float_tensor([1] * 65, [1.0])))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert "65" in err.details()


def test_a_small_short_value_list_still_repeats(
    stub: prediction_service_pb2_grpc.PredictionServiceStub,
) -> None:
    response = stub.Predict(_request(_float_tensor([3, 8], [0.25])), timeout=60)
    outputs = dict(response.outputs)
    assert list(outputs) and outputs[next(iter(outputs))].tensor_shape.dim[0].size == 3


@pytest.mark.parametrize("key", ["instances", "inputs"])
def test_json_nested_deeper_than_a_tensor_is_400(server: ServerProcess, key: str) -> None:
    body = '{"' + key + '": ' + "[" * 1000 + "0.5" + "]" * 1000 + "}"
    response = server.client.post(PREDICT, content=body.encode())
    assert response.status_code == 400, response.text
    assert "error" in response.json()
    _still_serves(server)


def test_a_body_under_the_limit_is_served(server: ServerProcess) -> None:
    rows = [ROW] * 2000  # ~250 KB of JSON
    response = server.client.post(PREDICT, json={"instances": rows})
    assert response.status_code == 200
    assert np.asarray(response.json()["predictions"]).shape == (2000, 4)


# -- a full batch queue answers at once --------------------------------------------------------


@pytest.fixture(scope="module")
def batching_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("batching")
    params = tmp / "batching.config"
    # One batch queued at most, with a long window: a request of 3 rows holds the open batch
    # of 4, and no other request of 3 rows fits.
    params.write_text(
        "max_batch_size { value: 4 }\nbatch_timeout_micros { value: 2000000 }\n"
        "max_enqueued_batches { value: 1 }\nnum_batch_threads { value: 1 }\n"
    )
    flags = [
        _config(tmp, {"mlp": MLP}),
        "--enable_batching",
        f"--batching_parameters_file={params}",
        "--enable_model_warmup=false",
    ]
    process = ServerProcess(flags, ["mlp"])
    yield process
    process.stop()


def test_a_full_batch_queue_answers_503_at_once(batching_server: ServerProcess) -> None:
    url = batching_server.base_url + PREDICT
    body = json.dumps({"instances": [ROW] * 3}).encode()
    held: list[int] = []

    def hold() -> None:  # waits for the 2 s batch window, holding the queue
        with httpx.Client(timeout=60) as client:
            held.append(client.post(url, content=body).status_code)

    holders = [threading.Thread(target=hold)]
    for thread in holders:
        thread.start()
    time.sleep(0.5)  # the holder is queued by now
    refused = []
    with httpx.Client(timeout=60) as client:
        for _ in range(5):
            start = time.monotonic()
            response = client.post(url, content=body)
            refused.append((response.status_code, time.monotonic() - start, response.text))
    for thread in holders:
        thread.join(60)
    assert all(status == 503 for status, _, _ in refused), refused
    assert all("error" in json.loads(text) for _, _, text in refused)
    # Answered without waiting for the batch window (2 s): well under it, on a slow machine.
    assert max(seconds for _, seconds, _ in refused) < 1.0, refused
    assert held == [200]
