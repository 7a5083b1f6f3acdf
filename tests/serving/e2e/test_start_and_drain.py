"""Start-up as TensorFlow Serving does it, and the drain on SIGTERM, seen from outside the real
daemon: ports closed until the first config's models are in, a failed initial load ends the
process with TensorFlow Serving's message, and a stop signal turns readiness off at once while
the requests in flight on both transports finish."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import grpc
import httpx
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto
from tests.serving.e2e.support import HALF_PLUS_TWO_V, wait_until
from tests.serving.rest.server_process import GRAPHSERVE, ServerProcess, free_port

WAIT_S = 60.0  # generous: only reached when something is broken


class Daemon:
    """The binary started directly (ServerProcess waits for ports this test wants closed)."""

    def __init__(self, flags: list[str]) -> None:
        self.rest_port, self.grpc_port = free_port(), free_port()
        self.process = subprocess.Popen(
            [str(GRAPHSERVE), f"--rest_api_port={self.rest_port}", "--rest_api_host=127.0.0.1",
             f"--port={self.grpc_port}", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    def answers(self) -> bool:
        try:
            httpx.get(f"http://127.0.0.1:{self.rest_port}/healthz", timeout=5)
        except httpx.TransportError:
            return False
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:  # a failed assertion left it running
            self.process.kill()
            self.process.communicate()

    def finish(self, timeout: float = WAIT_S) -> tuple[int, str]:
        try:
            out, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        return self.process.returncode, out


def _hung_model(root: Path) -> Path:
    """half_plus_two whose variables shard is a FIFO nobody writes: its load never ends."""
    version = root / "m" / "1"
    shutil.copytree(HALF_PLUS_TWO_V, version)
    (shard,) = (version / "variables").glob("variables.data-*")
    shard.unlink()
    os.mkfifo(shard)
    return root / "m"


def test_ports_open_once_the_models_are_in(tmp_path: Path) -> None:
    base = tmp_path / "m"
    base.mkdir()
    with Daemon(["--model_name=m", f"--model_base_path={base}"]) as daemon:
        # An empty base path: TensorFlow Serving waits for a version, ports closed.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert not daemon.answers() and daemon.process.poll() is None
            time.sleep(0.1)
        shutil.copytree(HALF_PLUS_TWO_V, base / "1")
        wait_until(daemon.answers, "the ports to open", WAIT_S)
        # The first request the port takes is answered by the model, never NOT_FOUND.
        response = httpx.post(
            f"http://127.0.0.1:{daemon.rest_port}/v1/models/m:predict",
            json={"instances": [1.0]}, timeout=WAIT_S,
        )
        assert response.json() == {"predictions": [2.5]}
        daemon.process.send_signal(signal.SIGTERM)
        code, out = daemon.finish()
        assert code == 0, out


def test_a_failed_initial_load_ends_the_process(tmp_path: Path) -> None:
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"not a SavedModel")
    with Daemon(["--model_name=m", f"--model_base_path={tmp_path / 'm'}",
                 "--max_num_load_retries=0"]) as daemon:
        code, out = daemon.finish()
    assert code == 255, out
    lines = [line for line in out.splitlines() if line.startswith("Failed to start server.")]
    assert len(lines) == 1, out
    assert lines[0].startswith(
        "Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available: "
        "{{{name: m version: 1} due to error: "
    ), lines[0]
    assert lines[0].endswith("}, }")


def test_a_stop_during_the_initial_load_exits_at_once(tmp_path: Path) -> None:
    with Daemon(["--model_name=m", f"--model_base_path={_hung_model(tmp_path)}"]) as daemon:
        time.sleep(1.0)  # the load has begun (and hangs); the ports stay closed
        assert not daemon.answers()
        daemon.process.send_signal(signal.SIGTERM)
        code, out = daemon.finish()
        assert code == 0, out
        assert "Abandoning loads still running" in out


def test_ports_at_once_with_the_flag(tmp_path: Path) -> None:
    with Daemon(["--model_name=m", f"--model_base_path={_hung_model(tmp_path)}",
                 "--wait_for_initial_models=false"]) as daemon:
        wait_until(daemon.answers, "the ports to open", WAIT_S)
        ready = httpx.get(f"http://127.0.0.1:{daemon.rest_port}/readyz", timeout=5)
        assert ready.status_code == 503 and ready.json()["models_not_ready"] == ["m"]
        daemon.process.send_signal(signal.SIGTERM)
        code, out = daemon.finish()
        assert code == 0, out


# --- the drain ------------------------------------------------------------------------------

# Requests wait 2 s in the batch queue: in flight when the stop signal comes.
SLOW_BATCHES = "max_batch_size { value: 64 }\nbatch_timeout_micros { value: 2000000 }\n"


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[ServerProcess]:
    params = tmp_path / "batching.config"
    params.write_text(SLOW_BATCHES)
    process = ServerProcess(
        [
            "--model_name=m", f"--model_base_path={HALF_PLUS_TWO_V.parent}",
            "--enable_batching", f"--batching_parameters_file={params}",
            "--drain_delay_seconds=1", "--drain_grace_seconds=20",
        ],
        ["m"],
    )
    yield process
    process.stop()


def _grpc_predict(port: int, results: list[object]) -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.array([1.0], dtype=np.float32)))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            response = stub.Predict(request, timeout=WAIT_S)
            results.append(list(response.outputs["y"].float_val))
        except grpc.RpcError as err:
            results.append(err.code())


def _health(port: int) -> str:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5
            )
        except grpc.RpcError as err:
            return str(err.code())
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def test_the_drain_finishes_requests_on_both_transports(slow_server: ServerProcess) -> None:
    rest_results: list[object] = []
    grpc_results: list[object] = []

    def rest_predict() -> None:
        with httpx.Client(base_url=slow_server.base_url, timeout=WAIT_S) as client:
            response = client.post("/v1/models/m:predict", json={"instances": [1.0]})
            rest_results.append((response.status_code, response.json()))

    assert _health(slow_server.grpc_port) == "SERVING"
    in_flight = [
        threading.Thread(target=rest_predict),
        threading.Thread(target=_grpc_predict, args=(slow_server.grpc_port, grpc_results)),
    ]
    for thread in in_flight:
        thread.start()
    time.sleep(0.5)  # both are waiting for their batch
    probes: list[tuple[float, int | str]] = []
    health_draining = ""
    signalled = time.monotonic()
    slow_server.process.send_signal(signal.SIGTERM)
    with httpx.Client(base_url=slow_server.base_url, timeout=5) as client:
        while time.monotonic() - signalled < WAIT_S:
            try:
                status: int | str = client.get("/readyz").status_code
            except httpx.TransportError:
                status = "closed"
            probes.append((time.monotonic() - signalled, status))
            if status == 503 and not health_draining:
                health_draining = _health(slow_server.grpc_port)  # within the drain delay
            if status == "closed":
                break
            time.sleep(0.005)
    for thread in in_flight:
        thread.join(WAIT_S)
    assert slow_server.process.wait(WAIT_S) == 0, slow_server.output()
    # Readiness went off at once (within the first probes) and stayed off until the listener
    # closed, after the drain delay.
    statuses = [status for _, status in probes]
    assert 503 in statuses[:20], probes[:20]
    first_off = statuses.index(503)
    assert all(s == 503 for s in statuses[first_off:-1]), probes
    assert statuses[-1] == "closed"
    assert probes[-1][0] >= 1.0  # accepted for the drain delay
    assert health_draining == "NOT_SERVING"
    # The requests in flight finished with their answers, on both transports.
    assert rest_results == [(200, {"predictions": [2.5]})]
    assert grpc_results == [[2.5]]


def test_a_second_signal_exits_at_once(tmp_path: Path) -> None:
    process = ServerProcess(
        ["--model_name=m", f"--model_base_path={HALF_PLUS_TWO_V.parent}",
         "--drain_delay_seconds=60"],
        ["m"],
    )
    process.process.send_signal(signal.SIGTERM)
    wait_until(lambda: "draining" in process.output(), "the drain to begin", WAIT_S)
    started = time.monotonic()
    process.process.send_signal(signal.SIGTERM)
    code = process.process.wait(WAIT_S)
    assert time.monotonic() - started < WAIT_S
    assert code == 128 + signal.SIGTERM, process.output()
    process.stop()
