"""A run nobody waits for stops, against the real daemon on loopback: past the REST timeout, past
a gRPC deadline, or once the client has gone, the core is idle again within a fraction of a
second (the run stops between kernels and loop iterations), and SIGTERM is not held up by such
runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS

LOOP = FIXTURE_MODELS / "control_flow"  # a While loop of `steps` iterations
PREDICT = "/v1/models/loop:predict"
ENDLESS = 2_000_000_000  # iterations: hours of work


def _body(steps: int) -> bytes:
    return json.dumps({"inputs": {"x": [[1.0, 2.0, 3.0, 4.0]], "steps": steps}}).encode()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_share(pid: int, seconds: float = 1.0) -> float:
    """The share of one core the process used over ``seconds``."""
    before = _cpu_seconds(pid)
    time.sleep(seconds)
    return (_cpu_seconds(pid) - before) / seconds


def _start(tmp: Path, *flags: str) -> ServerProcess:
    config = tmp / "models.config"
    config.write_text(
        f'model_config_list {{ config {{ name: "loop" base_path: "{LOOP}" '
        'model_platform: "tensorflow" } }\n'
    )
    return ServerProcess([f"--model_config_file={config}", *flags], ["loop"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = _start(tmp_path_factory.mktemp("cancel"), "--rest_api_timeout_in_ms=300")
    yield process
    process.stop()


def test_the_loop_answers_when_it_is_short(server: ServerProcess) -> None:
    response = server.client.post(PREDICT, content=_body(3))
    assert response.status_code == 200, response.text


def test_a_rest_run_past_its_timeout_stops(server: ServerProcess) -> None:
    start = time.monotonic()
    response = server.client.post(PREDICT, content=_body(ENDLESS))
    assert response.status_code == 504, response.text
    assert time.monotonic() - start < 10
    time.sleep(0.3)  # the run stops at its next loop iteration
    assert _busy_share(server.process.pid) < 0.3


def test_a_grpc_run_past_its_deadline_stops(server: ServerProcess) -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "loop"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.ones((1, 4), np.float32)))
    request.inputs["steps"].CopyFrom(make_tensor_proto(np.array(ENDLESS, np.int32)))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.Predict(request, timeout=0.5)
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(0.3)
    assert _busy_share(server.process.pid) < 0.3


def test_a_run_whose_client_left_stops(tmp_path: Path) -> None:
    process = _start(tmp_path, "--rest_api_timeout_in_ms=600000")
    try:
        body = _body(ENDLESS)
        with socket.create_connection(("127.0.0.1", process.port), timeout=30) as sock:
            sock.sendall(
                f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
                .encode() + body
            )
            time.sleep(0.5)  # the run is under way
            assert _busy_share(process.process.pid, 0.5) > 0.5
        time.sleep(0.5)  # gone: noticed within a poll, stopped at the next iteration
        assert _busy_share(process.process.pid) < 0.3
        assert process.client.post(PREDICT, content=_body(3)).status_code == 200
    finally:
        process.stop()


def test_sigterm_is_not_held_up_by_abandoned_runs(tmp_path: Path) -> None:
    process = _start(tmp_path, "--rest_api_timeout_in_ms=200")
    try:
        for _ in range(4):  # more abandoned runs than the machine has cores
            assert process.client.post(PREDICT, content=_body(ENDLESS)).status_code == 504
        start = time.monotonic()
        process.process.send_signal(signal.SIGTERM)
        try:
            code = process.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM did not end the server within 20 s")
        assert code == 0
        assert time.monotonic() - start < 20
    finally:
        process.stop()
