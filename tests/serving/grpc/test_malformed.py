"""Malformed requests: bytes that are not the request message, tensors whose content does not
fill their shape, dtypes that cannot be decoded, oversize messages. Each is answered with a
clear status (INVALID_ARGUMENT, or gRPC's RESOURCE_EXHAUSTED for the size limit), never a crash,
and the server keeps serving."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow.core.framework import tensor_pb2
from protos.tensorflow_serving.apis import predict_pb2
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from tests.serving.grpc.support import Client, rpc_error, serving

PREDICTION = "/tensorflow.serving.PredictionService/"
MODEL = "/tensorflow.serving.ModelService/"
REQUESTS = {
    PREDICTION + "Predict": "tensorflow.serving.PredictRequest",
    PREDICTION + "Classify": "tensorflow.serving.ClassificationRequest",
    PREDICTION + "Regress": "tensorflow.serving.RegressionRequest",
    PREDICTION + "MultiInference": "tensorflow.serving.MultiInferenceRequest",
    PREDICTION + "GetModelMetadata": "tensorflow.serving.GetModelMetadataRequest",
    MODEL + "GetModelStatus": "tensorflow.serving.GetModelStatusRequest",
    MODEL + "HandleReloadConfigRequest": "tensorflow.serving.ReloadConfigRequest",
}


def assert_still_serves(client: Client) -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.array([[2.0]], np.float32)))
    assert to_ndarray(client.predictions.Predict(request).outputs["y"]).tolist() == [[3.0]]


@pytest.mark.parametrize("data", [
    b"\xff\xff\xff",  # a truncated varint
    b"\x0a\x05ab",  # a length running past the end
    b"\x0a\x03\x0a\x01\xff",  # model_spec.name that is not UTF-8
    b"\x07",  # field 0
])
@pytest.mark.parametrize("method", sorted(REQUESTS))
def test_bytes_that_are_not_the_request(client: Client, method: str, data: bytes) -> None:
    err = rpc_error(client.raw(method), data)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(f"Could not parse the request as {REQUESTS[method]}: ")


def tensor(dtype: int, shape: list[int], **fields: Any) -> Any:
    proto = tensor_pb2.TensorProto(dtype=dtype, **fields)  # type: ignore[arg-type]
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


CASES = [
    ("content-short", tensor(1, [2, 1], tensor_content=b"\0" * 4),
     "TensorProto tensor_content for DT_FLOAT shape [2, 1] has 4 bytes; expected 8"),
    ("content-long", tensor(1, [1, 1], tensor_content=b"\0" * 12),
     "TensorProto tensor_content for DT_FLOAT shape [1, 1] has 12 bytes; expected 4"),
    ("negative-dim", tensor(1, [-3, 1], float_val=[1.0]),
     "TensorProto shape [-3, 1] has a negative dimension"),
    ("huge-shape", tensor(1, [2**62, 4], float_val=[1.0]),
     f"TensorProto shape [{2**62}, 4] has too many elements"),
    ("unknown-dtype", tensor(999, [1, 1], float_val=[1.0]), "TensorProto has unknown dtype 999"),
    ("invalid-dtype", tensor(0, [1, 1]), "TensorProto has dtype DT_INVALID"),
    ("resource", tensor(20, [1]), "cannot decode a DT_RESOURCE TensorProto into an array"),
    ("variant", tensor(21, [1]), "cannot decode a DT_VARIANT TensorProto into an array"),
    ("bool-byte", tensor(10, [2], tensor_content=b"\x01\x02"),
     "TensorProto tensor_content for DT_BOOL has a byte not 0/1"),
    ("string-content", tensor(7, [1], tensor_content=b"\x05ab"),
     ("TensorProto string tensor_content has 2 bytes of data after the lengths; the lengths add "
      "up to 5)")),
]


@pytest.mark.parametrize(("proto", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tensors_that_cannot_be_decoded(client: Client, proto: Any, message: str) -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(proto)
    err = rpc_error(client.predictions.Predict, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(f"tensor parsing error: x ({message}"), err.details()


def test_a_tensor_of_another_dtype_than_the_signature(client: Client) -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "half_plus_two"
    request.inputs["x"].CopyFrom(make_tensor_proto(np.array([[b"1"]], dtype=object)))
    err = rpc_error(client.predictions.Predict, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "x" in err.details() and "string" in err.details(), err.details()


def test_the_server_survives_the_battery(client: Client) -> None:
    for method in REQUESTS:
        rpc_error(client.raw(method), b"\xff")
    assert_still_serves(client)


def test_oversize_messages(core: ServerCore) -> None:
    """Past the receive limit gRPC itself refuses the message (TensorFlow Serving's limit is
    INT32_MAX; ``--grpc_channel_arguments`` can lower it)."""
    with serving(core, channel_arguments="grpc.max_receive_message_length=1024") as client:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "half_plus_two"
        request.inputs["x"].CopyFrom(make_tensor_proto(np.ones((1000, 1), np.float32)))
        err = rpc_error(client.predictions.Predict, request)
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "larger than max" in err.details(), err.details()
        assert_still_serves(client)
