"""A TensorFlow Serving client over gRPC, with numpy arrays in and out and no TensorFlow.

Speaks ``tensorflow.serving.PredictionService`` and ``ModelService`` through our generated stubs,
so it works against graphserve and against TensorFlow Serving alike. See ``serving.client.base``
for the contract every method follows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, Self, TypeVar

import grpc
import numpy as np
from google.protobuf.message import Message

from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from serving.client import grpc_messages as messages
from serving.client.base import DEFAULT_TIMEOUT_S, check_selection, check_timeout
from serving.client.errors import ServingError, error_for
from serving.client.examples import ExampleLike
from serving.client.grpc_messages import ModelEntry, ModelServerConfig
from serving.client.results import VersionStatus

Request = TypeVar("Request", bound=Message)
Response = TypeVar("Response", bound=Message)
# Models answer with tensors far above gRPC's 4 MiB default; TensorFlow Serving itself allows
# up to 2 GiB both ways.
_UNLIMITED = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def _error(err: grpc.RpcError) -> ServingError:
    code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = err.details() if isinstance(err, grpc.Call) else str(err)
    return error_for(code.value[0], details or code.name)


class _PredictionService(Protocol):
    """The calls this client makes through the generated ``PredictionServiceStub``."""

    Predict: grpc.UnaryUnaryMultiCallable[predict_pb2.PredictRequest, predict_pb2.PredictResponse]
    Classify: grpc.UnaryUnaryMultiCallable[
        classification_pb2.ClassificationRequest, classification_pb2.ClassificationResponse
    ]
    Regress: grpc.UnaryUnaryMultiCallable[
        regression_pb2.RegressionRequest, regression_pb2.RegressionResponse
    ]
    GetModelMetadata: grpc.UnaryUnaryMultiCallable[
        get_model_metadata_pb2.GetModelMetadataRequest,
        get_model_metadata_pb2.GetModelMetadataResponse,
    ]


class _ModelService(Protocol):
    """The calls this client makes through the generated ``ModelServiceStub``."""

    GetModelStatus: grpc.UnaryUnaryMultiCallable[
        get_model_status_pb2.GetModelStatusRequest, get_model_status_pb2.GetModelStatusResponse
    ]
    HandleReloadConfigRequest: grpc.UnaryUnaryMultiCallable[
        model_management_pb2.ReloadConfigRequest, model_management_pb2.ReloadConfigResponse
    ]


class GrpcClient:
    """``GrpcClient("localhost:8500")``; ``credentials`` for TLS, ``options`` for channel
    arguments (added after the unlimited message sizes it sets), or a ready ``channel``."""

    def __init__(
        self,
        target: str = "localhost:8500",
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] = (),
        channel: grpc.Channel | None = None,
    ) -> None:
        self.timeout = check_timeout(timeout, DEFAULT_TIMEOUT_S)
        if channel is None:
            arguments = [*_UNLIMITED, *options]
            if credentials is None:
                channel = grpc.insecure_channel(target, arguments)
            else:
                channel = grpc.secure_channel(target, credentials, arguments)
        self.channel = channel
        self._predictions: _PredictionService = prediction_service_pb2_grpc.PredictionServiceStub(
            channel
        )
        self._models: _ModelService = model_service_pb2_grpc.ModelServiceStub(channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: grpc.UnaryUnaryMultiCallable[Request, Response],
        request: Request,
        timeout: float | None,
    ) -> Response:
        deadline = check_timeout(timeout, self.timeout)
        try:
            return method(request, timeout=deadline)
        except grpc.RpcError as err:
            raise _error(err) from None

    # -- PredictionService ------------------------------------------------------------------

    def predict(
        self,
        model: str,
        inputs: Mapping[str, Any],
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        output_filter: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, np.ndarray]:
        """Outputs by alias (all of the signature's, or those in ``output_filter``)."""
        check_selection(model, version, label)
        spec = messages.model_spec(model, version, label, signature_name)
        request = messages.predict_request(spec, inputs, output_filter)
        response = self._call(self._predictions.Predict, request, timeout)
        return messages.predict_outputs(response)

    def classify(
        self,
        model: str,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None = None,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> list[list[tuple[str, float]]]:
        """Per example, its (label, score) pairs; a model without labels answers ``""``."""
        check_selection(model, version, label)
        spec = messages.model_spec(model, version, label, signature_name)
        request = messages.classification_request(spec, examples, context)
        return messages.classifications(self._call(self._predictions.Classify, request, timeout))

    def regress(
        self,
        model: str,
        examples: Sequence[ExampleLike],
        context: ExampleLike | None = None,
        *,
        version: int | None = None,
        label: str | None = None,
        signature_name: str | None = None,
        timeout: float | None = None,
    ) -> list[float]:
        check_selection(model, version, label)
        spec = messages.model_spec(model, version, label, signature_name)
        request = messages.regression_request(spec, examples, context)
        return messages.regressions(self._call(self._predictions.Regress, request, timeout))

    def get_model_metadata(
        self,
        model: str,
        version: int | None = None,
        label: str | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        check_selection(model, version, label)
        request = messages.metadata_request(messages.model_spec(model, version, label))
        return messages.metadata(self._call(self._predictions.GetModelMetadata, request, timeout))

    # -- ModelService -----------------------------------------------------------------------

    def get_model_status(
        self,
        model: str,
        version: int | None = None,
        label: str | None = None,
        *,
        timeout: float | None = None,
    ) -> list[VersionStatus]:
        """Every version's state, newest first (one version's with ``version``). The server
        ignores ``label`` here, as TensorFlow Serving does."""
        check_selection(model, version, label)
        request = get_model_status_pb2.GetModelStatusRequest(
            model_spec=messages.model_spec(model, version, label)
        )
        return messages.version_statuses(self._call(self._models.GetModelStatus, request, timeout))

    def reload_config(
        self,
        models: Iterable[ModelEntry] | ModelServerConfig,
        *,
        timeout: float | None = None,
    ) -> None:
        """Replace the served models with ``models`` (ModelConfig entries, ``(name,
        base_path)`` pairs or a whole ModelServerConfig); returns once the server has applied
        the new list, raises with the server's status otherwise. Base paths are the server's."""
        request = messages.reload_config_request(models)
        response = self._call(self._models.HandleReloadConfigRequest, request, timeout)
        messages.check_reload(response)
