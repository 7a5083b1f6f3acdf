"""A small TensorFlow Serving client that needs no TensorFlow: numpy arrays in and out.

    from serving.client import connect
    with connect("localhost:8500") as client:            # gRPC
        outputs = client.predict("half_plus_two", {"x": np.array([[1.0]], np.float32)})
    with connect("localhost:8501", rest=True) as client:  # REST
        client.get_model_status("half_plus_two")

``GrpcClient`` and ``RestClient`` have the same methods (``predict``, ``classify``, ``regress``,
``get_model_status``, ``get_model_metadata``, ``reload_config``; the last is gRPC only) and raise
the same ``ServingError`` subclasses. The REST client needs httpx, imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from serving.client.base import DEFAULT_TIMEOUT_S, ServingClient
from serving.client.errors import (
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    ServingError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from serving.client.grpc_client import GrpcClient
from serving.client.results import VersionStatus
from serving.config import AllVersions, LatestVersions, ModelConfig, SpecificVersions

if TYPE_CHECKING:
    from serving.client.rest_client import RestClient

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AbortedError",
    "AllVersions",
    "AlreadyExistsError",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "GrpcClient",
    "InternalError",
    "InvalidArgumentError",
    "LatestVersions",
    "ModelConfig",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "RestClient",
    "ServingClient",
    "ServingError",
    "SpecificVersions",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "VersionStatus",
    "connect",
]


def __getattr__(name: str) -> Any:
    # httpx is needed only by the REST client, so it is imported when that is asked for.
    if name == "RestClient":
        from serving.client.rest_client import RestClient

        return RestClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def connect(
    server: str, *, rest: bool = False, timeout: float = DEFAULT_TIMEOUT_S
) -> GrpcClient | RestClient:
    """A client for ``server`` (``host:port``; for REST also a full URL)."""
    if rest:
        from serving.client.rest_client import RestClient

        return RestClient(server, timeout=timeout)
    return GrpcClient(server, timeout=timeout)
