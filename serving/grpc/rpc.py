"""One unary RPC as the asyncio server runs it: bytes in, bytes out, errors as statuses.

The handlers take the raw request bytes and parse them here, because grpcio answers a request
its own deserializer cannot parse with INTERNAL ("Exception deserializing request!"); bytes
that are not the request message are the caller's mistake, INVALID_ARGUMENT. A request whose
deadline has already passed is not run: nobody would read the answer.

Two kinds of handler. An ``async`` one runs on the event loop and must not block (Predict: its
model runs go to the batcher or to the executor). A plain one is blocking code (the request
layer's synchronous functions, a config reload that waits for models to load); it runs on the
dispatcher's workers (``Dispatcher.blocking``, which checks once more that its caller still
waits for it).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc
from google.protobuf.message import DecodeError

from runtime.errors import DeadlineExceededError, InvalidArgumentError, OpError
from serving.grpc.errors import grpc_status, status_message
from serving.logs import traceback_without_messages
from serving.metrics.requests import GRPC, OBSERVERS, RequestRecord, drop_reason
from serving.requests.call_context import CallContext
from serving.requests.dispatcher import NOT_RUN_DEADLINE, Dispatcher
from serving.requests.failure import out_of_memory

log = logging.getLogger("graphserve")

Context = grpc.aio.ServicerContext[bytes, bytes]
GRPC_DEADLINE_EXCEEDED = "Deadline Exceeded"  # gRPC's status details for a passed deadline


def caller(context: Context) -> CallContext:
    """The request layer's view of an RPC's caller: its deadline. grpcio cancels the handler's
    task when the client cancels or its deadline passes; the dispatcher then stops the run."""
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    return CallContext(deadline, timeout_message=GRPC_DEADLINE_EXCEEDED)


# (request proto, caller, serialized size) -> the response message, or its serialized bytes
AsyncHandler = Callable[[Any, CallContext, int], Awaitable[Any]]
# (request proto, caller) -> the same; blocking code, run on the dispatcher's workers
BlockingHandler = Callable[[Any, CallContext], Any]


@dataclass(frozen=True)
class Rpc:
    request_type: Any  # the generated message class
    handler: AsyncHandler | BlockingHandler  # a coroutine function runs on the loop


def parse_request(request_type: Any, data: bytes) -> Any:
    request = request_type()
    try:
        request.ParseFromString(data)
    except DecodeError as err:
        raise InvalidArgumentError(
            f"Could not parse the request as {request_type.DESCRIPTOR.full_name}: {err}"
        ) from err
    return request


def failure(err: Exception, request_type: Any) -> tuple[grpc.StatusCode, str]:
    """The (code, details) a failed RPC answers with."""
    if isinstance(err, OpError):
        return grpc_status(err)
    if isinstance(err, MemoryError):
        return grpc_status(out_of_memory(err))
    # The outer boundary: log it, answer like an UNKNOWN error.
    # Not the message: it may quote the request (see traceback_without_messages).
    log.error("Unexpected error serving %s:\n%s", request_type.DESCRIPTOR.full_name,
              traceback_without_messages(err))
    return grpc.StatusCode.UNKNOWN, status_message(f"{type(err).__name__}: {err}")


def _serialized(response: Any) -> bytes:
    return response if type(response) is bytes else bytes(response.SerializeToString())


def _run_blocking(handler: BlockingHandler, request: Any, call: CallContext) -> bytes:
    return _serialized(handler(request, call))


def model_name(request: Any) -> str:
    """The model a request names ("" when none): its model_spec, or its first task's, or
    (the Open Inference Protocol's messages) its ``model_name`` or ``name``."""
    spec = getattr(request, "model_spec", None)
    if spec is not None:
        return str(spec.name)
    tasks = getattr(request, "tasks", None)
    if tasks is not None:
        return str(tasks[0].model_spec.name) if tasks else ""
    for field in ("model_name", "name"):
        name = getattr(request, field, None)
        if name is not None:
            return str(name)
    return ""


class _Note:
    """What an observed RPC learnt, for its ``RequestRecord``."""

    __slots__ = ("code", "dropped", "model", "started")

    def __init__(self) -> None:
        self.model = ""
        self.code = "OK"
        self.dropped = ""
        self.started = False


def async_method(
    rpc: Rpc, dispatcher: Dispatcher, target: str = ""
) -> grpc.RpcMethodHandler[bytes, bytes]:
    """The grpcio handler of ``rpc`` (no (de)serializers: it sees and returns bytes);
    ``target``, the method's path (``/package.Service/Method``), names it in request records."""
    request_type, handler = rpc.request_type, rpc.handler
    on_loop = inspect.iscoroutinefunction(handler)
    api = target.rsplit("/", 1)[-1]

    async def observed(data: bytes, context: Context) -> bytes:
        observers = OBSERVERS
        if not observers.active:
            return await answer(data, context, None)
        note = _Note()
        start = time.perf_counter()
        response = b""
        try:
            response = await answer(data, context, note)
            return response
        except asyncio.CancelledError:  # the client cancelled, or its deadline passed
            note.code = "CANCELLED"
            note.dropped = note.dropped or "cancelled"
            raise
        finally:
            if note.started:
                observers.end(note.model)
            observers.emit(RequestRecord(
                GRPC, api, note.model, note.code, time.perf_counter() - start, len(data),
                len(response), "", target, 0, note.dropped,
            ))

    async def answer(data: bytes, context: Context, note: _Note | None) -> bytes:
        try:
            request = parse_request(request_type, data)
            if note is not None:
                note.model = model_name(request)
                OBSERVERS.begin(note.model)
                note.started = True
            call = caller(context)
            try:
                if call.expired():
                    raise DeadlineExceededError(NOT_RUN_DEADLINE)
                if on_loop:
                    coroutine = cast(AsyncHandler, handler)
                    return _serialized(await coroutine(request, call, len(data)))
                blocking = cast(BlockingHandler, handler)
                return await dispatcher.blocking(call, _run_blocking, blocking, request, call)
            finally:
                # Answered, or this task was cancelled: work still queued is not started.
                call.leave()
        except Exception as err:  # noqa: BLE001 - every error becomes a status
            code, details = failure(err, request_type)
            if note is not None:
                note.code, note.dropped = code.name, drop_reason(err)
            del err  # its traceback holds the request: free it before the status goes out
        # The status goes out as an exception whose traceback holds this frame, and grpcio
        # keeps that past the RPC: not the request's bytes and message with it.
        data = b""
        request = None
        await context.abort(code, details)  # raises; grpcio sends the status
        raise AssertionError("unreachable")  # pragma: no cover

    return grpc.unary_unary_rpc_method_handler(observed)


def method_handlers(
    rpcs: dict[str, Rpc], dispatcher: Dispatcher, service: str = ""
) -> dict[str, grpc.RpcMethodHandler[bytes, bytes]]:
    return {
        name: async_method(rpc, dispatcher, f"/{service}/{name}") for name, rpc in rpcs.items()
    }
