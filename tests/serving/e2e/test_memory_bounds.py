"""The real daemon gives back the memory of large rejected requests (gRPC and REST), and bounds
its gRPC connections: idle ones close, ones that never complete their handshake time out, and
beyond the connection cap new ones are closed while the listener goes on serving."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import httpx
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from protos.tensorflow.core.framework import types_pb2
from protos.tensorflow_serving.apis import predict_pb2
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the server's size from /proc"
)

PREDICT = "/tensorflow.serving.PredictionService/Predict"
MODEL_FLAGS = ["--model_name=half_plus_two", f"--model_base_path={HALF_PLUS_TWO}"]
# Generous: the runtime keeps some freed memory for reuse, and this machine may be slow.
RSS_SLACK = 200 << 20
SETTLE_DEADLINE_S = 60.0


def resident_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@dataclass
class Daemon:
    server: ServerProcess
    baseline: int  # resident bytes once it serves, before the large requests

    def settled(self) -> int:
        """The resident size once within ``RSS_SLACK`` of the baseline, or after the deadline
        the last one seen."""
        limit = self.baseline + RSS_SLACK
        end = time.monotonic() + SETTLE_DEADLINE_S
        while (rss := resident_bytes(self.server.process.pid)) > limit:
            if time.monotonic() > end:
                break
            time.sleep(0.25)
        return rss


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    server = ServerProcess(MODEL_FLAGS, ["half_plus_two"])
    try:
        # Whatever a first request of each kind builds belongs to the baseline.
        server.client.post("/v1/models/half_plus_two:predict", json={"instances": [[1.0]]})
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            predict: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PREDICT)
            predict(_predict_request(1), timeout=60)
        yield Daemon(server, resident_bytes(server.process.pid))
    finally:
        assert server.stop() == 0, server.output()


def _predict_request(nbytes: int, alias: str = "x") -> bytes:
    """A serialized PredictRequest for half_plus_two of about ``nbytes`` of float32 values."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    tensor = request.inputs[alias]
    tensor.dtype = types_pb2.DT_FLOAT
    values = max(1, nbytes // 4)
    tensor.tensor_shape.dim.add().size = values
    tensor.tensor_shape.dim.add().size = 1
    tensor.tensor_content = np.zeros(values, np.float32).tobytes()
    return request.SerializeToString()


def test_rejected_large_grpc_predicts_leave_no_memory_behind(daemon: Daemon) -> None:
    server = daemon.server
    data = _predict_request(64 << 20, alias="no_such_input")
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        predict: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(PREDICT)
        for _ in range(4):
            with pytest.raises(grpc.RpcError) as err:
                predict(data, timeout=120)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    rss = daemon.settled()
    assert rss <= daemon.baseline + RSS_SLACK, (
        f"{rss >> 20} MiB after, {daemon.baseline >> 20} MiB before")


def test_rejected_large_rest_bodies_leave_no_memory_behind(daemon: Daemon) -> None:
    server = daemon.server
    # Valid JSON naming an input the model does not have: parsed in full, then rejected.
    rows = (50 << 20) // 6
    body = b'{"inputs": {"no_such_input": [' + b"[1.0]," * rows + b"[1.0]]}}"
    statuses: list[int] = []

    def post() -> None:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            response = client.post("/v1/models/half_plus_two:predict", content=body,
                                   headers={"content-type": "application/json"})
            statuses.append(response.status_code)

    posts = [threading.Thread(target=post) for _ in range(2)]
    for thread in posts:
        thread.start()
    for thread in posts:
        thread.join(timeout=300)
    assert statuses == [400, 400]
    rss = daemon.settled()
    assert rss <= daemon.baseline + RSS_SLACK, (
        f"{rss >> 20} MiB after, {daemon.baseline >> 20} MiB before")


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (what it sends is read and
    dropped)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def _health(address: str, timeout: float = 10) -> int:
    with grpc.insecure_channel(address) as channel:
        return int(health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=timeout).status)


def test_idle_and_unfinished_connections_are_closed_and_the_cap_keeps_the_listener_serving(
) -> None:
    cap = 4
    channel_arguments = (
        "grpc.max_connection_idle_ms=500,grpc.server_handshake_timeout_ms=1000,"
        f"grpc.max_allowed_incoming_connections={cap}"
    )
    server = ServerProcess([*MODEL_FLAGS, f"--grpc_channel_arguments={channel_arguments}"],
                           ["half_plus_two"])
    address = f"127.0.0.1:{server.grpc_port}"
    try:
        # Idle: a channel whose connection the server closes goes back to IDLE by itself.
        with grpc.insecure_channel(address) as channel:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            idle = threading.Event()
            channel.subscribe(
                lambda state: idle.set() if state == grpc.ChannelConnectivity.IDLE else None
            )
            assert idle.wait(10), "the idle connection was not closed"

        # Never a byte of HTTP/2: closed once the handshake timeout has passed.
        silent = socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10)
        with silent:
            assert _closed_within(silent, 10)

        # The cap: connections beyond it are closed at once, the listener goes on accepting,
        # and once the silent ones time out a client is served again.
        sockets = [socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10)
                   for _ in range(cap + 2)]
        try:
            closed = [_closed_within(sock, 0.5) for sock in sockets[cap:]]
            assert closed == [True, True]
            deadline = time.monotonic() + 15
            while True:
                try:
                    assert _health(address, timeout=2) == health_pb2.HealthCheckResponse.SERVING
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline, "not served after the handshake timeout"
                    time.sleep(0.2)
        finally:
            for sock in sockets:
                sock.close()
    finally:
        assert server.stop() == 0, server.output()
