"""Deadlines: a request whose deadline passed while it waited for a worker is answered
DEADLINE_EXCEEDED without being run."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np

from protos.tensorflow_serving.apis import predict_pb2
from runtime.errors import NotFoundError
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from serving.grpc.rpc import Rpc, answer
from tests.serving.grpc.support import GatedCore, rpc_error, serving


class FakeContext:
    """Only the clock and the liveness of a call, which a test cannot otherwise control."""

    def __init__(self, remaining: float | None, active: bool = True) -> None:
        self.remaining = remaining
        self.active = active

    def time_remaining(self) -> float | None:
        return self.remaining

    def is_active(self) -> bool:
        return self.active


def counting_rpc(calls: list[Any]) -> Rpc:
    def handler(request: Any, context: Any) -> Any:
        calls.append(request)
        return predict_pb2.PredictResponse()

    return Rpc(predict_pb2.PredictRequest, handler)


def test_no_work_once_the_deadline_has_passed() -> None:
    calls: list[Any] = []
    data = predict_pb2.PredictRequest().SerializeToString()
    code, details = answer(counting_rpc(calls), data, FakeContext(-0.01))
    assert (code, details) == (grpc.StatusCode.DEADLINE_EXCEEDED,
                               "Deadline exceeded before the request could be run")
    code, details = answer(counting_rpc(calls), data, FakeContext(None, active=False))
    assert code == grpc.StatusCode.CANCELLED
    assert calls == []
    assert answer(counting_rpc(calls), data, FakeContext(5.0)) == b""
    assert answer(counting_rpc(calls), data, FakeContext(None)) == b""
    assert len(calls) == 2


def test_errors_and_unexpected_exceptions_become_statuses() -> None:
    def failing(error: Exception) -> Rpc:
        def handler(request: Any, context: Any) -> Any:
            raise error

        return Rpc(predict_pb2.PredictRequest, handler)

    assert answer(failing(NotFoundError("gone")), b"", FakeContext(None)) == (
        grpc.StatusCode.NOT_FOUND, "gone")
    assert answer(failing(ZeroDivisionError("boom")), b"", FakeContext(None)) == (
        grpc.StatusCode.UNKNOWN, "ZeroDivisionError: boom")


def request(name: str) -> Any:
    out = predict_pb2.PredictRequest()
    out.model_spec.name = name
    out.inputs["x"].CopyFrom(make_tensor_proto(np.array([[4.0]], np.float32)))
    return out


def test_a_request_that_waited_past_its_deadline_is_not_run(core: ServerCore) -> None:
    gated = GatedCore(core)
    with serving(gated, max_threads=1) as client:
        # Holds the only worker until released.
        held = client.predictions.Predict.future(request(GatedCore.GATED))
        assert gated.entered.wait(60)
        queued = rpc_error(client.predictions.Predict, request("half_plus_two"), timeout=0.2)
        assert queued.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        gated.release.set()
        assert held.exception().code() == grpc.StatusCode.NOT_FOUND
        # Queued after the expired one: once it is answered, the expired one was handled.
        response = client.predictions.Predict(request("half_plus_two"))
        assert to_ndarray(response.outputs["y"]).tolist() == [[4.0]]
    assert gated.lookups == [GatedCore.GATED, "half_plus_two"]
