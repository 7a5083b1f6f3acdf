"""One unary RPC as grpcio runs it: bytes in, bytes out, errors as statuses.

The handlers take the raw request bytes and parse them here, because grpcio answers a request
its own deserializer cannot parse with INTERNAL ("Exception deserializing request!"); bytes
that are not the request message are the caller's mistake, INVALID_ARGUMENT. A request whose
deadline has already passed (it waited in the queue for a worker) or whose caller has gone is
not run: nobody would read the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from runtime.errors import CancelledError, DeadlineExceededError, InvalidArgumentError, OpError
from serving.grpc.errors import grpc_status, status_message

log = logging.getLogger("graphserve")

Handler = Callable[[Any, grpc.ServicerContext], Any]  # (request proto, context) -> response


@dataclass(frozen=True)
class Rpc:
    request_type: Any  # the generated message class
    handler: Handler


def parse_request(request_type: Any, data: bytes) -> Any:
    request = request_type()
    try:
        request.ParseFromString(data)
    except DecodeError as err:
        raise InvalidArgumentError(
            f"Could not parse the request as {request_type.DESCRIPTOR.full_name}: {err}"
        ) from err
    return request


def check_still_wanted(context: grpc.ServicerContext) -> None:
    """Refuse to start work nobody will receive."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceededError("Deadline exceeded before the request could be run")
    if not context.is_active():
        raise CancelledError("The request was cancelled before it could be run")


def answer(rpc: Rpc, data: bytes, context: grpc.ServicerContext) -> bytes | tuple[Any, str]:
    """The serialized response, or the (grpc.StatusCode, details) to fail with."""
    try:
        request = parse_request(rpc.request_type, data)
        check_still_wanted(context)
        return bytes(rpc.handler(request, context).SerializeToString())
    except OpError as err:
        return grpc_status(err)
    except Exception as err:  # the outer boundary: log it, answer like an UNKNOWN error
        log.exception("Unexpected error serving %s", rpc.request_type.DESCRIPTOR.full_name)
        return grpc.StatusCode.UNKNOWN, status_message(f"{type(err).__name__}: {err}")


def method_handler(rpc: Rpc) -> grpc.RpcMethodHandler:
    def call(data: bytes, context: grpc.ServicerContext) -> bytes:
        result = answer(rpc, data, context)
        if isinstance(result, bytes):
            return result
        context.abort(*result)  # raises; grpcio sends the status without a message
        raise AssertionError("unreachable")  # pragma: no cover

    # No (de)serializers: the handler sees and returns bytes.
    return grpc.unary_unary_rpc_method_handler(call)


def generic_handler(service: str, rpcs: dict[str, Rpc]) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        service, {name: method_handler(rpc) for name, rpc in rpcs.items()}
    )
