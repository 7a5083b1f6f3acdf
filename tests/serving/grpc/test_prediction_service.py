"""PredictionService through our own stubs on an in-process server: version resolution, the
response's model_spec, output encodings, TensorFlow Serving's checks and their order."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)
from runtime.tensor_codec import decode_string_list, make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from serving.requests.proto_convert import tensor_proto
from serving.servable import ServableRequest
from tests.serving.grpc.support import Client, rpc_error, serving
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO, expected_cases

HPT = "half_plus_two"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
X = expected_cases(HALF_PLUS_TWO)[("serving_default", "batch3")]


def predict_request(name: str = HPT, inputs: dict[str, Any] | None = None,
                    **spec: Any) -> Any:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    if "version" in spec:
        request.model_spec.version.value = spec.pop("version")
    for field, value in spec.items():
        setattr(request.model_spec, field, value)
    for alias, value in (inputs if inputs is not None else {"x": X["in"]["x"]}).items():
        proto = value if not isinstance(value, np.ndarray) else make_tensor_proto(value)
        request.inputs[alias].CopyFrom(proto)
    return request


def expect(err: grpc.RpcError, code: grpc.StatusCode, details: str) -> None:
    assert (err.code(), err.details()) == (code, details)


def spec_tuple(spec: Any) -> tuple[str, int | None, str]:
    return (spec.name, spec.version.value if spec.HasField("version") else None,
            spec.signature_name)


def test_predict_resolves_latest_version_and_label(client: Client) -> None:
    for request in (predict_request(), predict_request(version=123),
                    predict_request(version_label="stable")):
        response = client.predictions.Predict(request)
        assert spec_tuple(response.model_spec) == (HPT, 123, "serving_default")
        np.testing.assert_allclose(to_ndarray(response.outputs["y"]), X["out"]["y"], rtol=1e-6)


def test_predict_outputs_use_typed_fields_with_their_dtypes(client: Client) -> None:
    case = expected_cases(FIXTURE_MODELS / "custom_module")[("compute", "batch4")]
    response = client.predictions.Predict(
        predict_request("custom", dict(case["in"]), signature_name="compute"))
    assert spec_tuple(response.model_spec) == ("custom", 1, "compute")
    assert sorted(response.outputs) == sorted(case["out"])
    for alias, want in case["out"].items():
        proto = response.outputs[alias]
        assert not proto.tensor_content
        got = to_ndarray(proto)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    field = {"any_large": "bool_val", "positive_count": "int64_val", "top_indices": "int_val"}
    for alias, name in field.items():
        assert len(getattr(response.outputs[alias], name)) == case["out"][alias].size


def test_output_filter(client: Client) -> None:
    case = expected_cases(FIXTURE_MODELS / "custom_module")[("compute", "batch1")]
    request = predict_request("custom", dict(case["in"]), signature_name="compute")
    request.output_filter.extend(["picked", "any_large"])
    response = client.predictions.Predict(request)
    assert sorted(response.outputs) == ["any_large", "picked"]
    np.testing.assert_allclose(to_ndarray(response.outputs["picked"]), case["out"]["picked"],
                               rtol=1e-6)
    request.output_filter.append("picked")
    expect(rpc_error(client.predictions.Predict, request), grpc.StatusCode.INVALID_ARGUMENT,
           "duplicate output tensor alias: picked")


def test_tensor_content_option(core: ServerCore) -> None:
    with serving(core, tensor_content=True) as client:
        case = expected_cases(FIXTURE_MODELS / "custom_module")[("compute", "batch4")]
        response = client.predictions.Predict(
            predict_request("custom", dict(case["in"]), signature_name="compute"))
        for alias, want in case["out"].items():
            proto = response.outputs[alias]
            assert proto.tensor_content and not proto.float_val and not proto.int64_val
            np.testing.assert_allclose(to_ndarray(proto), want, rtol=1e-5, atol=1e-6)


def test_missing_and_empty_model_spec(client: Client) -> None:
    stubs = client.predictions
    for call, request in [
        (stubs.Predict, predict_pb2.PredictRequest()),
        (stubs.Classify, classification_pb2.ClassificationRequest()),
        (stubs.Regress, regression_pb2.RegressionRequest()),
        (stubs.GetModelMetadata,
         get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])),
    ]:
        expect(rpc_error(call, request), grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec")
    expect(rpc_error(stubs.Predict, predict_request("")), grpc.StatusCode.INVALID_ARGUMENT,
           "ModelSpec has no name specified.")
    # An empty label is still a label (the oneof says it was set).
    expect(rpc_error(stubs.Predict, predict_request(version_label="")),
           grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label: ")


def test_model_errors_come_before_input_errors(client: Client) -> None:
    bad = make_tensor_proto(np.ones((2, 1), np.float32))
    bad.tensor_content = bad.tensor_content[:4]
    expect(rpc_error(client.predictions.Predict, predict_request("nope", {"x": bad})),
           grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(nope)")
    expect(rpc_error(client.predictions.Predict, predict_request(inputs={"x": bad})),
           grpc.StatusCode.INVALID_ARGUMENT,
           "tensor parsing error: x (TensorProto tensor_content for DT_FLOAT shape [2, 1] has 4 "
           "bytes; expected 8)")
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "nope"
    expect(rpc_error(client.predictions.Classify, request), grpc.StatusCode.NOT_FOUND,
           "Servable not found for request: Latest(nope)")
    request.model_spec.name = HPT
    request.model_spec.signature_name = "classify_x_to_y"
    expect(rpc_error(client.predictions.Classify, request), grpc.StatusCode.INVALID_ARGUMENT,
           "Input is empty.")


def examples_input(out: Any, *xs: float | None, context: float | None = None) -> None:
    """Examples with feature x (None: an example without features)."""
    def example(x: float | None) -> Any:
        ex = example_pb2.Example()
        if x is not None:
            ex.features.feature["x"].float_list.value.append(x)
        return ex

    if context is None:
        out.example_list.examples.extend(example(x) for x in xs)
    else:
        out.example_list_with_context.context.CopyFrom(example(context))
        out.example_list_with_context.examples.extend(example(x) for x in xs)


def test_classify_and_regress(client: Client) -> None:
    # half_plus_two: y = 0.5 x + 2.
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = HPT
    request.model_spec.signature_name = "classify_x_to_y"
    examples_input(request.input, 1.0, 4.0)
    response = client.predictions.Classify(request)
    assert spec_tuple(response.model_spec) == (HPT, 123, "classify_x_to_y")
    assert [[(c.label, c.score) for c in row.classes]
            for row in response.result.classifications] == [[("", 2.5)], [("", 4.0)]]
    regress = regression_pb2.RegressionRequest()
    regress.model_spec.name = HPT
    regress.model_spec.version_label = "stable"
    regress.model_spec.signature_name = "regress_x_to_y"
    examples_input(regress.input, 6.0, None, context=2.0)
    response = client.predictions.Regress(regress)
    assert spec_tuple(response.model_spec) == (HPT, 123, "regress_x_to_y")
    assert [r.value for r in response.result.regressions] == [5.0, 3.0]


def multi_request(*tasks: tuple[str, str, str], xs: tuple[float, ...] = (2.0,)) -> Any:
    request = inference_pb2.MultiInferenceRequest()
    for name, signature, method in tasks:
        task = request.tasks.add(method_name=method)
        task.model_spec.name = name
        task.model_spec.signature_name = signature
    examples_input(request.input, *xs)
    return request


def test_multi_inference(client: Client) -> None:
    request = multi_request((HPT, "classify_x_to_y", CLASSIFY), (HPT, "regress_x_to_y", REGRESS),
                            xs=(2.0, 8.0))
    request.tasks[0].model_spec.version_label = "stable"  # the first task picks the version
    response = client.predictions.MultiInference(request)
    first, second = response.results
    assert spec_tuple(first.model_spec) == (HPT, 123, "classify_x_to_y")
    assert [[c.score for c in row.classes]
            for row in first.classification_result.classifications] == [[3.0], [6.0]]
    assert spec_tuple(second.model_spec) == (HPT, 123, "regress_x_to_y")
    assert [r.value for r in second.regression_result.regressions] == [3.0, 6.0]


@pytest.mark.parametrize(("tasks", "code", "details"), [
    ([], grpc.StatusCode.INVALID_ARGUMENT, "ModelSpec has no name specified."),
    ([(HPT, "classify_x_to_y", CLASSIFY), ("other", "regress_x_to_y", REGRESS)],
     grpc.StatusCode.INVALID_ARGUMENT,
     "All ModelSpecs in a MultiInferenceRequest must access the same model name."),
    ([(HPT, "regress_x_to_y", REGRESS), (HPT, "regress_x_to_y", CLASSIFY)],
     grpc.StatusCode.INVALID_ARGUMENT, "Duplicate evaluation of signature: regress_x_to_y"),
    ([(HPT, "nope", REGRESS)], grpc.StatusCode.INVALID_ARGUMENT,
     "Requested signature not found in model graph: nope"),
    ([(HPT, "regress_x_to_y", "tensorflow/serving/predict")], grpc.StatusCode.UNIMPLEMENTED,
     "Unsupported signature method_name: tensorflow/serving/predict"),
    ([(HPT, "regress_x_to_y", CLASSIFY)], grpc.StatusCode.INVALID_ARGUMENT,
     ('Expected classification signature outputs to contain at least one of "classes" or '
      '"scores". Signature was: ')),
    ([("nope", "regress_x_to_y", REGRESS)], grpc.StatusCode.NOT_FOUND,
     "Servable not found for request: Latest(nope)"),
])
def test_multi_inference_checks(client: Client, tasks: list[tuple[str, str, str]],
                                code: grpc.StatusCode, details: str) -> None:
    err = rpc_error(client.predictions.MultiInference, multi_request(*tasks))
    assert err.code() == code
    assert err.details().startswith(details)


def test_multi_inference_empty_input(client: Client) -> None:
    request = multi_request((HPT, "regress_x_to_y", REGRESS), xs=())
    expect(rpc_error(client.predictions.MultiInference, request),
           grpc.StatusCode.INVALID_ARGUMENT, "Input is empty.")


def test_metadata(client: Client, core: ServerCore) -> None:
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = HPT
    request.model_spec.version_label = "stable"
    response = client.predictions.GetModelMetadata(request)
    assert spec_tuple(response.model_spec) == (HPT, 123, "")
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    assert response.metadata["signature_def"].Unpack(signature_map)
    with core.handle(ServableRequest(HPT)) as handle:
        assert dict(signature_map.signature_def) == dict(handle.servable.meta_graph.signature_def)
    del request.metadata_field[:]
    expect(rpc_error(client.predictions.GetModelMetadata, request),
           grpc.StatusCode.INVALID_ARGUMENT,
           "GetModelMetadataRequest must specify at least one metadata_field")


def test_long_messages_are_truncated_as_upstream(client: Client) -> None:
    request = predict_request()
    request.output_filter.append("z" * 2000)
    err = rpc_error(client.predictions.Predict, request)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == (
        "output tensor alias not found in signature: " + "z" * 2000
    )[:1024] + "...TRUNCATED"


def test_string_outputs_in_tensor_content_use_the_string_list_encoding() -> None:
    values = np.array([[b"a", b""], [b"x" * 300, b"\x00\xff"]], dtype=object)
    proto = tensor_proto(values, tensor_content=True)
    assert not proto.string_val
    np.testing.assert_array_equal(decode_string_list(proto.tensor_content, 4).reshape(2, 2),
                                  values)
    assert list(tensor_proto(values).string_val) == values.reshape(-1).tolist()


def test_large_requests_and_responses(client: Client) -> None:
    """Past the sizes that move decoding and writing off the event loop, answers and errors are
    the same as for small requests (and come in the same order of checks)."""
    rows = 70_000  # typed values, > 64 KiB of request and > 64 Ki output values
    x = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    typed = make_tensor_proto(x, use_tensor_content=False)
    response = client.predictions.Predict(predict_request(inputs={"x": typed}))
    np.testing.assert_array_equal(to_ndarray(response.outputs["y"]), x / 2 + 2)
    # Still NOT_FOUND for an unknown model, though the tensor is bad too.
    bad = make_tensor_proto(x, use_tensor_content=False)
    bad.dtype = 999
    err = rpc_error(client.predictions.Predict, predict_request("nope", inputs={"x": bad}))
    expect(err, grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(nope)")
    err = rpc_error(client.predictions.Predict, predict_request(inputs={"x": bad}))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("tensor parsing error: x ("), err.details()
