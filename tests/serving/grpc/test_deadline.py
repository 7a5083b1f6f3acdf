"""Deadlines and callers that leave: a request whose deadline passed before it could run, or
while its work waited for a worker, is answered DEADLINE_EXCEEDED without being run."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import predict_pb2
from runtime.cancellation import current as current_run
from runtime.errors import CancelledError, DeadlineExceededError, NotFoundError
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from serving.grpc.rpc import Rpc, async_method
from serving.requests.call_context import CallContext, current
from serving.requests.dispatcher import REQUEST_CANCELLED, Dispatcher, DispatchOptions
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


@pytest.fixture
def dispatcher(core: ServerCore) -> Iterator[Dispatcher]:
    """One worker, as ``--grpc_max_threads=1``."""
    dispatcher = Dispatcher(core, DispatchOptions(threads=1, thread_name_prefix="grpc"))
    yield dispatcher
    dispatcher.close()


def call_method(rpc: Rpc, data: bytes, context: FakeContext,
                dispatcher: Dispatcher) -> bytes | tuple[Any, str]:
    """The serialized answer, or the status the RPC was aborted with."""
    handler = async_method(rpc, dispatcher).unary_unary
    try:
        answer: bytes = asyncio.run(handler(data, context))
    except Aborted:
        assert context.status is not None
        return context.status
    return answer


def counting_rpcs(calls: list[Any]) -> list[Rpc]:
    """The same handler on the loop and on the dispatcher's workers."""

    async def on_loop(request: Any, call: CallContext, size: int) -> Any:
        calls.append(request)
        return predict_pb2.PredictResponse()

    def blocking(request: Any, call: CallContext) -> Any:
        calls.append(request)
        return predict_pb2.PredictResponse()

    return [Rpc(predict_pb2.PredictRequest, on_loop), Rpc(predict_pb2.PredictRequest, blocking)]


@pytest.mark.parametrize("kind", [0, 1], ids=["on_loop", "blocking"])
def test_no_work_once_the_deadline_has_passed(kind: int, dispatcher: Dispatcher) -> None:
    calls: list[Any] = []
    rpc = counting_rpcs(calls)[kind]
    data = predict_pb2.PredictRequest().SerializeToString()
    # grpcio reports a passed deadline as 0 remaining.
    assert call_method(rpc, data, FakeContext(0.0), dispatcher) == (
        grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline exceeded before the request could be run")
    assert calls == []
    assert call_method(rpc, data, FakeContext(5.0), dispatcher) == b""
    assert call_method(rpc, data, FakeContext(None), dispatcher) == b""
    assert len(calls) == 2


def test_errors_and_unexpected_exceptions_become_statuses(dispatcher: Dispatcher) -> None:
    def failing(error: Exception, on_loop: bool) -> Rpc:
        async def raise_on_loop(request: Any, call: CallContext, size: int) -> Any:
            raise error

        def raise_blocking(request: Any, call: CallContext) -> Any:
            raise error

        return Rpc(predict_pb2.PredictRequest, raise_on_loop if on_loop else raise_blocking)

    for on_loop in (True, False):
        assert call_method(failing(NotFoundError("gone"), on_loop), b"", FakeContext(None),
                           dispatcher) == (grpc.StatusCode.NOT_FOUND, "gone")
        assert call_method(failing(ZeroDivisionError("boom"), on_loop), b"", FakeContext(None),
                           dispatcher) == (grpc.StatusCode.UNKNOWN, "ZeroDivisionError: boom")
        code, details = call_method(failing(MemoryError(), on_loop), b"", FakeContext(None),
                                    dispatcher)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and details.startswith("OOM")


def test_handlers_see_their_caller_and_the_request_size(dispatcher: Dispatcher) -> None:
    seen: list[Any] = []

    async def on_loop(request: Any, call: CallContext, size: int) -> Any:
        seen.append((request.model_spec.name, size, call.time_remaining()))
        return predict_pb2.PredictResponse()

    def blocking(request: Any, call: CallContext) -> Any:
        seen.append((call.is_active(), current(), current_run()))
        return predict_pb2.PredictResponse()

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    data = request.SerializeToString()
    assert call_method(Rpc(predict_pb2.PredictRequest, on_loop), data, FakeContext(30.0),
                       dispatcher) == b""
    assert call_method(Rpc(predict_pb2.PredictRequest, blocking), b"", FakeContext(30.0),
                       dispatcher) == b""
    [(name, size, remaining), (active, call_context, cancellation)] = seen
    assert (name, size) == ("m", len(data))
    assert remaining is not None and 0 < remaining <= 30.0
    assert active
    assert call_context is not None and call_context.deadline is not None
    assert 0 < call_context.deadline - time.monotonic() <= 30.0
    # Model runs of the blocking work stop with the request.
    assert cancellation is call_context.cancellation
    assert call_context.cancelled()  # the RPC has ended: its caller is gone


def test_blocking_work_learns_that_its_caller_left(dispatcher: Dispatcher) -> None:
    """A cancelled RPC (the caller left, or the server stops) cancels its handler's task; the
    blocking work, still running, sees its caller gone and its runs stopped."""
    started, saw_gone = threading.Event(), threading.Event()
    calls: list[CallContext] = []

    def waits_for_its_caller_to_leave(request: Any, call: CallContext) -> Any:
        calls.append(call)
        started.set()
        for _ in range(6000):  # at most a minute
            if not call.is_active():
                break
            time.sleep(0.01)
        saw_gone.set()
        return predict_pb2.PredictResponse()

    async def cancel_while_running(handler: Any) -> None:
        task = asyncio.create_task(handler(b"", FakeContext(None)))
        await asyncio.to_thread(started.wait, 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    rpc = Rpc(predict_pb2.PredictRequest, waits_for_its_caller_to_leave)
    asyncio.run(cancel_while_running(async_method(rpc, dispatcher).unary_unary))
    assert saw_gone.wait(60)
    (call,) = calls
    error = call.cancellation.error
    assert isinstance(error, CancelledError) and error.message == REQUEST_CANCELLED


def test_the_dispatcher_does_not_start_blocking_work_nobody_waits_for(
    dispatcher: Dispatcher,
) -> None:
    ran: list[str] = []
    gate = threading.Event()

    def work(name: str) -> str:
        ran.append(name)
        if name == "holding":
            gate.wait(60)
        return "no context" if current() is None else "in context"

    async def scenario() -> list[Any]:
        # The one worker is busy while the others queue behind it.
        holding = asyncio.ensure_future(dispatcher.blocking(CallContext(), work, "holding"))
        for _ in range(6000):
            if ran:
                break
            await asyncio.sleep(0.01)
        queued = [
            dispatcher.blocking(CallContext(time.monotonic() - 1), work, "expired"),
            dispatcher.blocking(CallContext(None, lambda: True), work, "left"),
            dispatcher.blocking(CallContext.with_timeout(60), work, "wanted"),
            dispatcher.offload(work, "plain"),  # unconditionally, with no caller
        ]
        waiting = asyncio.gather(*queued, return_exceptions=True)
        await asyncio.sleep(0)
        gate.set()
        return [await holding, *await waiting]

    holding, expired, left, wanted, plain = asyncio.run(scenario())
    assert holding == "in context"
    assert isinstance(expired, DeadlineExceededError)
    assert isinstance(left, CancelledError)
    assert left.message == "The request was cancelled before it could be run"
    # The work runs with its caller's context current (the batcher reads it there).
    assert wanted == "in context"
    assert plain == "no context"
    assert ran == ["holding", "wanted", "plain"]


def request(name: str) -> Any:
    out = predict_pb2.PredictRequest()
    out.model_spec.name = name
    out.inputs["x"].CopyFrom(make_tensor_proto(np.array([[4.0]], np.float32)))
    return out


def test_a_request_that_waited_past_its_deadline_is_not_run(core: ServerCore) -> None:
    gated = GatedCore(core, auto_release=False)
    # No run is short enough for the loop.
    with serving(gated, max_threads=1, inline_run_s=0.0) as client:
        # The server learns that half_plus_two does not batch: its runs go to the worker.
        client.predictions.Predict(request("half_plus_two"))
        # Holds the only worker until released.
        held = client.predictions.Predict.future(request(GatedCore.GATED))
        assert gated.entered.wait(60)
        queued = rpc_error(client.predictions.Predict, request("half_plus_two"), timeout=0.2)
        # gRPC's own words, whether the server's answer or the client's timer comes first.
        assert (queued.code(), queued.details()) == (
            grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        gated.release.set()
        assert to_ndarray(held.result().outputs["y"]).tolist() == [[4.0]]
        # Queued after the expired one: once it is answered, the expired one was handled.
        response = client.predictions.Predict(request("half_plus_two"))
        assert to_ndarray(response.outputs["y"]).tolist() == [[4.0]]
    assert gated.runs == ["half_plus_two", GatedCore.GATED, "half_plus_two"]
    # Each request resolved its version on arrival; the expired one was never run.
    assert gated.lookups == ["half_plus_two", GatedCore.GATED, "half_plus_two", "half_plus_two"]
