"""Status code -> gRPC status, the one place gRPC maps errors.

TensorFlow's status codes are gRPC's, so the number passes through unchanged; like TensorFlow
Serving, a message longer than 1024 characters is cut and marked, so one huge error (a
SignatureDef dump, a long list of names) cannot blow up the trailers.
"""

from __future__ import annotations

import grpc

from runtime.errors import Code, OpError

MESSAGE_LIMIT = 1024
TRUNCATED = "...TRUNCATED"

_BY_NUMBER: dict[int, grpc.StatusCode] = {sc.value[0]: sc for sc in grpc.StatusCode}


def grpc_code(code: Code) -> grpc.StatusCode:
    return _BY_NUMBER.get(int(code), grpc.StatusCode.UNKNOWN)


def status_message(message: str) -> str:
    if len(message) > MESSAGE_LIMIT:
        return message[:MESSAGE_LIMIT] + TRUNCATED
    return message


def grpc_status(err: OpError) -> tuple[grpc.StatusCode, str]:
    """The (code, details) a failed RPC answers with."""
    return grpc_code(err.code), status_message(err.message)
