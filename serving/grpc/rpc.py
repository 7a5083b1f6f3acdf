"""One unary RPC as the asyncio server runs it: bytes in, bytes out, errors as statuses.

The handlers take the raw request bytes and parse them here, because grpcio answers a request
its own deserializer cannot parse with INTERNAL ("Exception deserializing request!"); bytes
that are not the request message are the caller's mistake, INVALID_ARGUMENT. A request whose
deadline has already passed is not run: nobody would read the answer.

Two kinds of handler. An ``async`` one runs on the event loop and must not block (Predict: its
model runs go to the batcher or to the executor). A plain one is blocking code (the request
layer's synchronous functions, a config reload that waits for models to load); it runs on the
executor (a ``CallExecutor``, which checks once more that its caller still waits for it).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from runtime.errors import DeadlineExceededError, InvalidArgumentError, OpError
from serving.grpc.errors import grpc_status, status_message
from serving.grpc.executor import NOT_RUN_DEADLINE, CallExecutor
from serving.requests.call_context import CallContext

log = logging.getLogger("graphserve")


class Call:
    """The caller of one RPC as a handler sees it, readable from any thread: its deadline and
    whether it is still there (grpcio's own context belongs to the event loop)."""

    __slots__ = ("_context", "_gone", "deadline", "request_bytes")

    def __init__(self, deadline: float | None, request_bytes: int = 0) -> None:
        self.deadline = deadline  # time.monotonic() value; None: no deadline
        self.request_bytes = request_bytes  # the serialized request's size
        self._gone = False
        self._context: CallContext | None = None

    @property
    def context(self) -> CallContext:
        """The request layer's view of this caller."""
        if self._context is None:
            self._context = CallContext(self.deadline, self.gone)
        return self._context

    @classmethod
    def of(cls, context: grpc.aio.ServicerContext, request_bytes: int = 0) -> Call:
        remaining = context.time_remaining()
        return cls(None if remaining is None else time.monotonic() + remaining, request_bytes)

    def time_remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def leave(self) -> None:
        """The RPC ended (answered, cancelled, or its deadline passed)."""
        self._gone = True

    def gone(self) -> bool:
        return self._gone

    def is_active(self) -> bool:
        return not self._gone and (self.deadline is None or time.monotonic() < self.deadline)


# (request proto, call) -> the response message, or its serialized bytes
AsyncHandler = Callable[[Any, Call], Awaitable[Any]]
BlockingHandler = Callable[[Any, Call], Any]


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
    # The outer boundary: log it, answer like an UNKNOWN error.
    log.error("Unexpected error serving %s", request_type.DESCRIPTOR.full_name, exc_info=err)
    return grpc.StatusCode.UNKNOWN, status_message(f"{type(err).__name__}: {err}")


def _expired(call: Call) -> bool:
    return call.deadline is not None and time.monotonic() >= call.deadline


def _serialized(response: Any) -> bytes:
    return response if type(response) is bytes else bytes(response.SerializeToString())


def _run_blocking(handler: BlockingHandler, request: Any, call: Call) -> bytes:
    return _serialized(handler(request, call))


def async_method(rpc: Rpc, executor: CallExecutor) -> grpc.RpcMethodHandler:
    """The grpcio handler of ``rpc`` (no (de)serializers: it sees and returns bytes)."""
    request_type, handler = rpc.request_type, rpc.handler

    if inspect.iscoroutinefunction(handler):

        async def on_loop(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            try:
                request = parse_request(request_type, data)
                call = Call.of(context, len(data))
                if _expired(call):
                    raise DeadlineExceededError(NOT_RUN_DEADLINE)
                # The caller is passed on explicitly; its leaving cancels this task.
                return _serialized(await handler(request, call))
            except Exception as err:  # noqa: BLE001 - every error becomes a status
                code, details = failure(err, request_type)
            await context.abort(code, details)  # raises; grpcio sends the status
            raise AssertionError("unreachable")  # pragma: no cover

        return grpc.unary_unary_rpc_method_handler(on_loop)

    async def on_executor(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            request = parse_request(request_type, data)
            call = Call.of(context, len(data))
            loop = asyncio.get_running_loop()
            try:
                # Refused by the executor if the caller leaves while the work is queued.
                return await loop.run_in_executor(
                    executor.for_call(call.context), _run_blocking, handler, request, call
                )
            finally:
                # Answered, or this task was cancelled (the caller left, its deadline passed,
                # the server stops): work still running sees that its caller is gone.
                call.leave()
        except Exception as err:  # noqa: BLE001 - every error becomes a status
            code, details = failure(err, request_type)
        await context.abort(code, details)
        raise AssertionError("unreachable")  # pragma: no cover

    return grpc.unary_unary_rpc_method_handler(on_executor)


def method_handlers(
    rpcs: dict[str, Rpc], executor: CallExecutor
) -> dict[str, grpc.RpcMethodHandler]:
    return {name: async_method(rpc, executor) for name, rpc in rpcs.items()}
