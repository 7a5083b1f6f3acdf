"""The client's exceptions: a server's non-OK status, the same for gRPC and REST.

Every error is a ``ServingError`` and also the runtime's class for its status code, so
``except runtime.errors.NotFoundError`` catches a remote NOT_FOUND as well. ``err.code`` is the
``Code`` (``err.code.name`` is ``"NOT_FOUND"``, ...), ``err.message`` the server's message.

gRPC carries TensorFlow's code itself. REST carries only an HTTP status, which TensorFlow Serving
derives from the code with a table that is not one-to-one (400 stands for INVALID_ARGUMENT,
FAILED_PRECONDITION and OUT_OF_RANGE); the way back picks the most common code for each status
and keeps the HTTP status on the error.

Failures on the client's side use the same classes: a deadline that passes while waiting is
DEADLINE_EXCEEDED, a server that cannot be reached is UNAVAILABLE, arguments the client refuses
before sending are INVALID_ARGUMENT.
"""

from __future__ import annotations

from runtime import errors
from runtime.errors import Code


class ServingError(errors.OpError):
    """A non-OK status from a model server (or from the client, for what never reached it)."""

    def __init__(self, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status  # REST only: the status line's number

    @property
    def code_name(self) -> str:
        return self.code.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.name}: {self.message!r})"


class CancelledError(ServingError, errors.CancelledError):
    pass


class UnknownError(ServingError, errors.UnknownError):
    pass


class InvalidArgumentError(ServingError, errors.InvalidArgumentError):
    pass


class DeadlineExceededError(ServingError, errors.DeadlineExceededError):
    pass


class NotFoundError(ServingError, errors.NotFoundError):
    pass


class AlreadyExistsError(ServingError, errors.AlreadyExistsError):
    pass


class PermissionDeniedError(ServingError, errors.PermissionDeniedError):
    pass


class ResourceExhaustedError(ServingError, errors.ResourceExhaustedError):
    pass


class FailedPreconditionError(ServingError, errors.FailedPreconditionError):
    pass


class AbortedError(ServingError, errors.AbortedError):
    pass


class OutOfRangeError(ServingError, errors.OutOfRangeError):
    pass


class UnimplementedError(ServingError, errors.UnimplementedError):
    pass


class InternalError(ServingError, errors.InternalError):
    pass


class UnavailableError(ServingError, errors.UnavailableError):
    pass


class DataLossError(ServingError, errors.DataLossError):
    pass


class UnauthenticatedError(ServingError, errors.UnauthenticatedError):
    pass


_BY_CODE: dict[Code, type[ServingError]] = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}

# HTTP status -> the code TensorFlow Serving most likely had (its table, read backwards).
_CODE_OF_HTTP: dict[int, Code] = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    409: Code.ABORTED,
    429: Code.RESOURCE_EXHAUSTED,
    499: Code.CANCELLED,
    500: Code.INTERNAL,
    501: Code.UNIMPLEMENTED,
    503: Code.UNAVAILABLE,
    504: Code.DEADLINE_EXCEEDED,
}


def error_for(code: int, message: str, *, http_status: int | None = None) -> ServingError:
    """The exception for a status code number; numbers outside TensorFlow's table are
    UNKNOWN. OK is not an error and is refused."""
    try:
        known = Code(code)
    except ValueError:
        return UnknownError(f"status code {code}: {message}", http_status=http_status)
    if known == Code.OK:
        raise ValueError("status OK is not an error")
    return _BY_CODE[known](message, http_status=http_status)


def code_for_http_status(status: int) -> Code:
    return _CODE_OF_HTTP.get(status, Code.UNKNOWN)
