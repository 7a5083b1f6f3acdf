"""The one error hierarchy, keyed by TensorFlow's canonical status codes.

The runtime raises these; the serving layer raises them too and maps ``code`` once to an HTTP
status and a gRPC code (TensorFlow's numbering is gRPC's). Messages say what was expected and what
was found, and name the node/op or model/version involved.
"""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """TensorFlow's ``error_codes.proto`` numbers (identical to gRPC status codes)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class OpError(Exception):
    """Base of every error with a status code. ``str(err)`` is the status message."""

    code: Code = Code.UNKNOWN

    def __init__(self, message: str, *, node: str | None = None, op: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.node = node
        self.op = op

    def status_text(self) -> str:
        """``CODE: message``, as TensorFlow prints a status."""
        return f"{self.code.name}: {self.message}"


class CancelledError(OpError):
    code = Code.CANCELLED


class UnknownError(OpError):
    code = Code.UNKNOWN


class InvalidArgumentError(OpError):
    code = Code.INVALID_ARGUMENT


class DeadlineExceededError(OpError):
    code = Code.DEADLINE_EXCEEDED


class NotFoundError(OpError):
    code = Code.NOT_FOUND


class AlreadyExistsError(OpError):
    code = Code.ALREADY_EXISTS


class PermissionDeniedError(OpError):
    code = Code.PERMISSION_DENIED


class ResourceExhaustedError(OpError):
    code = Code.RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    code = Code.FAILED_PRECONDITION


class AbortedError(OpError):
    code = Code.ABORTED


class OutOfRangeError(OpError):
    code = Code.OUT_OF_RANGE


class UnimplementedError(OpError):
    code = Code.UNIMPLEMENTED


class InternalError(OpError):
    code = Code.INTERNAL


class UnavailableError(OpError):
    code = Code.UNAVAILABLE


class DataLossError(OpError):
    code = Code.DATA_LOSS


class UnauthenticatedError(OpError):
    code = Code.UNAUTHENTICATED


def from_memory_error(err: MemoryError, what: str = "") -> ResourceExhaustedError:
    """RESOURCE_EXHAUSTED for a ``MemoryError``, so a failed allocation is the client's
    over-sized request rather than a crash.

    ``what`` names the allocation in TensorFlow's OOM wording, e.g. ``"tensor with shape[2,3]
    and type float"`` gives ``OOM when allocating tensor with shape[2,3] and type float``;
    without it the message carries whatever the allocator said.
    """
    if what:
        return ResourceExhaustedError(f"OOM when allocating {what}")
    detail = str(err)
    return ResourceExhaustedError(f"OOM when allocating memory: {detail}" if detail else "OOM")


def error_for_code(code: Code, message: str) -> OpError:
    """The OpError subclass of ``code`` carrying ``message`` (a status read back from elsewhere)."""
    for cls in OpError.__subclasses__():
        if cls.code is code:
            return cls(message)
    return UnknownError(message)
