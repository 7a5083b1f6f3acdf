"""Deadlines and callers that leave: a request whose deadline passed before it could run, or
while its work waited for a worker, is answered DEADLINE_EXCEEDED without being run."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import predict_pb2
from runtime.errors import CancelledError, DeadlineExceededError, NotFoundError
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from serving.grpc.executor import CallExecutor
from serving.grpc.rpc import Call, Rpc, async_method
from serving.requests import run_site
from serving.requests.call_context import CallContext, current
from tests.serving.grpc.support import GatedCore, rpc_error, serving


class Aborted(Exception):
    pass


class FakeContext:
    """Only the clock of a call and where its status goes, which a test cannot otherwise
    control."""

    def __init__(self, remaining: float | None) -> None:
        self.remaining = remaining
        self.status: tuple[grpc.StatusCode, str] | None = None

    def time_remaining(self) -> float | None:
        return self.remaining

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.status = (code, details)
        raise Aborted


def call_method(rpc: Rpc, data: bytes, context: FakeContext) -> bytes | tuple[Any, str]:
    """The serialized answer, or the status the RPC was aborted with."""
    with CallExecutor(1) as executor:
        handler = async_method(rpc, executor).unary_unary
        try:
            answer: bytes = asyncio.run(handler(data, context))
        except Aborted:
            assert context.status is not None
            return context.status
    return answer


def counting_rpcs(calls: list[Any]) -> list[Rpc]:
    """The same handler on the loop and on the executor."""

    async def on_loop(request: Any, call: Call) -> Any:
        calls.append(request)
        return predict_pb2.PredictResponse()

    def blocking(request: Any, call: Call) -> Any:
        calls.append(request)
        return predict_pb2.PredictResponse()

    return [Rpc(predict_pb2.PredictRequest, on_loop), Rpc(predict_pb2.PredictRequest, blocking)]


@pytest.mark.parametrize("kind", [0, 1], ids=["on_loop", "blocking"])
def test_no_work_once_the_deadline_has_passed(kind: int) -> None:
    calls: list[Any] = []
    rpc = counting_rpcs(calls)[kind]
    data = predict_pb2.PredictRequest().SerializeToString()
    # grpcio reports a passed deadline as 0 remaining.
    assert call_method(rpc, data, FakeContext(0.0)) == (
        grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline exceeded before the request could be run")
    assert calls == []
    assert call_method(rpc, data, FakeContext(5.0)) == b""
    assert call_method(rpc, data, FakeContext(None)) == b""
    assert len(calls) == 2


def test_errors_and_unexpected_exceptions_become_statuses() -> None:
    def failing(error: Exception, on_loop: bool) -> Rpc:
        async def raise_on_loop(request: Any, call: Call) -> Any:
            raise error

        def raise_blocking(request: Any, call: Call) -> Any:
            raise error

        return Rpc(predict_pb2.PredictRequest, raise_on_loop if on_loop else raise_blocking)

    for on_loop in (True, False):
        assert call_method(failing(NotFoundError("gone"), on_loop), b"", FakeContext(None)) == (
            grpc.StatusCode.NOT_FOUND, "gone")
        assert call_method(failing(ZeroDivisionError("boom"), on_loop), b"",
                           FakeContext(None)) == (grpc.StatusCode.UNKNOWN,
                                                  "ZeroDivisionError: boom")


def test_blocking_handlers_see_their_caller() -> None:
    seen: list[Any] = []

    def blocking(request: Any, call: Call) -> Any:
        seen.append((call.is_active(), current()))
        return predict_pb2.PredictResponse()

    assert call_method(Rpc(predict_pb2.PredictRequest, blocking), b"", FakeContext(30.0)) == b""
    [(active, call_context)] = seen
    assert active
    assert call_context is not None and call_context.deadline is not None
    assert 0 < call_context.deadline - time.monotonic() <= 30.0
    assert call_context.cancelled()  # the RPC has ended: its caller is gone


def test_blocking_work_learns_that_its_caller_left() -> None:
    """A cancelled RPC (the caller left, or the server stops) cancels its handler's task; the
    blocking work, still running, sees its caller gone and can stop early."""
    started, saw_gone = threading.Event(), threading.Event()

    def waits_for_its_caller_to_leave(request: Any, call: Call) -> Any:
        started.set()
        while call.is_active():
            time.sleep(0.01)
        saw_gone.set()
        return predict_pb2.PredictResponse()

    async def cancel_while_running(handler: Any) -> None:
        task = asyncio.create_task(handler(b"", FakeContext(None)))
        await asyncio.to_thread(started.wait, 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with CallExecutor(1) as executor:
        rpc = Rpc(predict_pb2.PredictRequest, waits_for_its_caller_to_leave)
        asyncio.run(cancel_while_running(async_method(rpc, executor).unary_unary))
        assert saw_gone.wait(60)


def test_the_executor_does_not_start_work_nobody_waits_for() -> None:
    ran: list[str] = []

    def work(name: str) -> str:
        ran.append(name)
        context = current()
        return "no context" if context is None else "in context"

    def submitted(executor: CallExecutor, name: str, context: CallContext | None) -> Future[str]:
        if context is None:
            return executor.submit(work, name)  # unconditionally
        return executor.submit_for(context, work, name)

    with CallExecutor(1) as executor:
        expired = submitted(executor, "expired", CallContext(time.monotonic() - 1))
        left = submitted(executor, "left", CallContext(None, lambda: True))
        wanted = submitted(executor, "wanted", CallContext.with_timeout(60))
        plain = submitted(executor, "plain", None)
        with pytest.raises(DeadlineExceededError,
                           match="^Deadline exceeded before the request could be run$"):
            expired.result()
        with pytest.raises(CancelledError,
                           match="^The request was cancelled before it could be run$"):
            left.result()
        # The work runs with its caller's context current (the batcher reads it there).
        assert wanted.result() == "in context"
        assert plain.result() == "no context"
    assert ran == ["wanted", "plain"]


def request(name: str) -> Any:
    out = predict_pb2.PredictRequest()
    out.model_spec.name = name
    out.inputs["x"].CopyFrom(make_tensor_proto(np.array([[4.0]], np.float32)))
    return out


def test_a_request_that_waited_past_its_deadline_is_not_run(
    core: ServerCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_site, "INLINE_RUN_S", 0.0)  # no run is short enough for the loop
    gated = GatedCore(core, auto_release=False)
    with serving(gated, max_threads=1) as client:
        # The server learns that half_plus_two does not batch: its runs go to the worker.
        client.predictions.Predict(request("half_plus_two"))
        # Holds the only worker until released.
        held = client.predictions.Predict.future(request(GatedCore.GATED))
        assert gated.entered.wait(60)
        queued = rpc_error(client.predictions.Predict, request("half_plus_two"), timeout=0.2)
        assert queued.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        gated.release.set()
        assert to_ndarray(held.result().outputs["y"]).tolist() == [[4.0]]
        # Queued after the expired one: once it is answered, the expired one was handled.
        response = client.predictions.Predict(request("half_plus_two"))
        assert to_ndarray(response.outputs["y"]).tolist() == [[4.0]]
    assert gated.runs == ["half_plus_two", GatedCore.GATED, "half_plus_two"]
    assert gated.lookups == ["half_plus_two", GatedCore.GATED, "half_plus_two"]
