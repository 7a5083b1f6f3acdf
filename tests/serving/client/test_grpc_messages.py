"""The gRPC client's messages at the proto level: what it sends, and how it reads answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow.core.protobuf import meta_graph_pb2
from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_management_pb2,
    predict_pb2,
    regression_pb2,
)
from runtime import tensor_codec
from runtime.dtypes import DataType
from runtime.errors import Code
from serving.client import grpc_messages as messages
from serving.client.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    UnimplementedError,
)
from serving.config import AllVersions, LatestVersions, ModelConfig, SpecificVersions
from tests.serving.client.conftest import MULTI_IO
from tests.serving.support import expected_cases


def test_model_spec() -> None:
    spec = messages.model_spec("m")
    assert spec.name == "m" and not spec.HasField("version") and not spec.version_label
    assert spec.signature_name == ""
    spec = messages.model_spec("m", version=0, signature_name="s")
    assert spec.HasField("version") and spec.version.value == 0  # version 0 is a version
    assert spec.signature_name == "s"
    spec = messages.model_spec("m", label="stable")
    assert spec.WhichOneof("version_choice") == "version_label" and spec.version_label == "stable"


def test_predict_request_carries_typed_tensors() -> None:
    (_, tensors), *_ = sorted(expected_cases(MULTI_IO).items())
    inputs = {**tensors["in"], "literal": [[1.0, 2.0]], "text": ["a", b"\x00"]}
    request = messages.predict_request(messages.model_spec("m"), inputs, ["probability"])
    assert list(request.output_filter) == ["probability"]
    assert sorted(request.inputs) == sorted(inputs)
    for alias, array in tensors["in"].items():
        decoded = tensor_codec.to_ndarray(request.inputs[alias])
        assert decoded.dtype == array.dtype
        np.testing.assert_array_equal(decoded, array)
    assert request.inputs["literal"].dtype == DataType.DT_FLOAT  # as tf.make_tensor_proto
    assert tensor_codec.to_ndarray(request.inputs["text"]).tolist() == [b"a", b"\x00"]
    # The bytes on the wire parse back to the same request.
    assert predict_pb2.PredictRequest.FromString(request.SerializeToString()) == request


def test_predict_request_refuses_what_no_tensor_holds() -> None:
    spec = messages.model_spec("m")
    with pytest.raises(InvalidArgumentError, match="ragged"):
        messages.predict_request(spec, {"x": [[1.0], [2.0, 3.0]]})
    with pytest.raises(InvalidArgumentError, match="input x: numpy dtype"):
        messages.predict_request(spec, {"x": np.array(["2020-01-01"], "datetime64[D]")})


def test_predict_outputs_decode_every_encoding() -> None:
    response = predict_pb2.PredictResponse()
    y = np.array([[2.5], [3.0]], np.float32)
    response.outputs["y"].CopyFrom(tensor_codec.from_ndarray(y))  # tensor_content
    response.outputs["ids"].CopyFrom(
        tensor_codec.from_ndarray(np.array([3, -1], np.int64), use_tensor_content=False)
    )
    response.outputs["names"].CopyFrom(tensor_codec.from_ndarray(np.array([b"a", b"bc"], object)))
    outputs = messages.predict_outputs(response)
    assert list(outputs) == ["ids", "names", "y"]
    np.testing.assert_array_equal(outputs["y"], y)
    assert outputs["y"].dtype == np.float32 and outputs["y"].flags.writeable
    assert outputs["ids"].tolist() == [3, -1] and outputs["ids"].dtype == np.int64
    assert outputs["names"].tolist() == [b"a", b"bc"]
    response.outputs["bad"].dtype = 20  # DT_RESOURCE
    with pytest.raises(UnimplementedError, match="output bad"):
        messages.predict_outputs(response)


def test_classify_and_regress_requests() -> None:
    spec = messages.model_spec("m", signature_name="s")
    request = messages.classification_request(spec, [{"x": 1.0}, {"x": [2.0, 3.0]}], None)
    assert request.model_spec == spec
    examples = request.input.example_list.examples
    assert [list(e.features.feature["x"].float_list.value) for e in examples] == [[1.0], [2.0, 3.0]]
    request_with_context = messages.regression_request(spec, [{"x": 1.0}], {"c": b"z"})
    with_context = request_with_context.input.example_list_with_context
    assert list(with_context.context.features.feature["c"].bytes_list.value) == [b"z"]
    assert len(with_context.examples) == 1
    assert isinstance(request_with_context, regression_pb2.RegressionRequest)
    with pytest.raises(InvalidArgumentError, match="Input is empty"):
        messages.classification_request(spec, [], None)


def test_classification_and_regression_answers() -> None:
    response = classification_pb2.ClassificationResponse()
    first = response.result.classifications.add()
    first.classes.add(label="cat", score=0.75)
    first.classes.add(label="dog", score=0.25)
    response.result.classifications.add().classes.add(score=2.5)
    assert messages.classifications(response) == [[("cat", 0.75), ("dog", 0.25)], [("", 2.5)]]
    regression = regression_pb2.RegressionResponse()
    regression.result.regressions.add(value=1.5)
    regression.result.regressions.add(value=-2.0)
    assert messages.regressions(regression) == [1.5, -2.0]


def test_version_statuses() -> None:
    response = get_model_status_pb2.GetModelStatusResponse()
    response.model_version_status.add(version=2, state=30)
    failed = response.model_version_status.add(version=1, state=50)
    failed.status.error_code = Code.NOT_FOUND
    failed.status.error_message = "gone"
    statuses = messages.version_statuses(response)
    assert [(s.version, s.state, s.error_code, s.error_message) for s in statuses] == [
        (2, "AVAILABLE", "OK", ""),
        (1, "END", "NOT_FOUND", "gone"),
    ]


def test_metadata_answer() -> None:
    assert list(messages.metadata_request(messages.model_spec("m")).metadata_field) == [
        "signature_def"
    ]
    signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
    info = signature.inputs["x"]
    info.name, info.dtype = "x:0", 1
    info.tensor_shape.dim.add(size=-1)
    signature.outputs["y"].name = "y:0"
    signature.outputs["y"].dtype = 7
    signature.outputs["y"].tensor_shape.unknown_rank = True
    signatures = get_model_metadata_pb2.SignatureDefMap()
    signatures.signature_def["serving_default"].CopyFrom(signature)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.model_spec.name = "m"
    response.model_spec.version.value = 3
    response.metadata["signature_def"].Pack(signatures)
    assert messages.metadata(response) == {
        "model_spec": {"name": "m", "version": 3, "signature_name": ""},
        "signature_def": {
            "serving_default": {
                "method_name": "tensorflow/serving/predict",
                "inputs": {"x": {"name": "x:0", "dtype": "DT_FLOAT", "shape": [-1]}},
                "outputs": {"y": {"name": "y:0", "dtype": "DT_STRING", "shape": None}},
            }
        },
    }
    del response.metadata["signature_def"]
    with pytest.raises(InternalError, match="found nothing"):
        messages.metadata(response)
    response.metadata["signature_def"].Pack(signature)  # the wrong message type
    with pytest.raises(InternalError, match="tensorflow.SignatureDef"):
        messages.metadata(response)


def test_reload_config_request() -> None:
    models = [
        ModelConfig("a", Path("/models/a")),
        ModelConfig("b", Path("/models/b"), AllVersions(), {"stable": 2}),
        ModelConfig("c", Path("/models/c"), SpecificVersions((1, 4))),
        ModelConfig("d", Path("/models/d"), LatestVersions(3)),
        ("e", "/models/e"),
    ]
    request = messages.reload_config_request(models)
    expected = model_management_pb2.ReloadConfigRequest()
    text_format.Parse(
        """config { model_config_list {
          config { name: "a" base_path: "/models/a" model_platform: "tensorflow"
                   model_version_policy { latest { num_versions: 1 } } }
          config { name: "b" base_path: "/models/b" model_platform: "tensorflow"
                   model_version_policy { all {} } version_labels { key: "stable" value: 2 } }
          config { name: "c" base_path: "/models/c" model_platform: "tensorflow"
                   model_version_policy { specific { versions: [1, 4] } } }
          config { name: "d" base_path: "/models/d" model_platform: "tensorflow"
                   model_version_policy { latest { num_versions: 3 } } }
          config { name: "e" base_path: "/models/e" model_platform: "tensorflow"
                   model_version_policy { latest { num_versions: 1 } } }
        } }""",
        expected,
    )
    assert request == expected
    empty = messages.reload_config_request([])
    assert empty.config.WhichOneof("config") == "model_config_list"
    whole = messages.ModelServerConfig()
    whole.model_config_list.config.add(name="z", base_path="/z")
    assert messages.reload_config_request(whole).config == whole
    with pytest.raises(InvalidArgumentError, match="ModelConfig or"):
        messages.reload_config_request(["nope"])  # type: ignore[list-item]


def test_reload_status_is_checked() -> None:
    response = model_management_pb2.ReloadConfigResponse()
    messages.check_reload(response)  # OK
    response.status.error_code = Code.FAILED_PRECONDITION
    response.status.error_message = "no such path"
    with pytest.raises(FailedPreconditionError, match="no such path"):
        messages.check_reload(response)


def test_examples_from_protos_are_sent_as_they_are() -> None:
    example = example_pb2.Example()
    example.features.feature["x"].float_list.value.append(1.0)
    request = messages.classification_request(messages.model_spec("m"), [example], None)
    assert request.input.example_list.examples[0] == example
