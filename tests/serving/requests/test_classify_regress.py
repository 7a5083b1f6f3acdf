"""Classify and regress on half_plus_two (y = 0.5x + 2, y2 = 0.5x + 3), TensorFlow Serving's
signature checks and output validation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow.core.protobuf import meta_graph_pb2
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError, NotFoundError
from runtime.saved_model import signatures_of
from serving.core.server_core import ServerCore
from serving.requests.classify import (
    ClassifyRequest,
    check_classification_signature,
    classification_result,
    classify,
)
from serving.requests.model_spec import ModelSpec
from serving.requests.regress import RegressRequest, regress, regression_result
from serving.servable import ServableHandle, ServableId, ServableRequest, ServableState
from tests.serving.support import HALF_PLUS_TWO, expected_cases

MODEL = "half_plus_two"

SERVING_DEFAULT_DEBUG_STRING = (
    'inputs {\n  key: "x"\n  value {\n    name: "serving_default_x:0"\n    dtype: DT_FLOAT\n'
    "    tensor_shape {\n      dim {\n        size: -1\n      }\n      dim {\n        size: 1\n"
    "      }\n    }\n  }\n}\n"
    'outputs {\n  key: "y"\n  value {\n    name: "StatefulPartitionedCall_4:0"\n'
    "    dtype: DT_FLOAT\n    tensor_shape {\n      dim {\n        size: -1\n      }\n"
    "      dim {\n        size: 1\n      }\n    }\n  }\n}\n"
    'method_name: "tensorflow/serving/predict"\n'
)


def example(**features: float | list[float] | list[int]) -> bytes:
    proto = example_pb2.Example()
    for name, value in features.items():
        values = value if isinstance(value, list) else [value]
        feature = proto.features.feature[name]
        if all(isinstance(v, int) for v in values):
            feature.int64_list.value.extend(values)
        else:
            feature.float_list.value.extend(values)
    serialized: bytes = proto.SerializeToString()
    return serialized


def spec(signature: str = "", **kw: Any) -> ModelSpec:
    return ModelSpec(MODEL, signature_name=signature, **kw)


# -- classify ----------------------------------------------------------------------------------


def test_classify_scores_without_classes_have_empty_labels(store: ServerCore) -> None:
    examples = [example(x=1.0), example(x=3.0), example(x=-4.0)]
    response = classify(store, ClassifyRequest(spec("classify_x_to_y"), examples))
    assert response.classifications == [[(b"", 2.5)], [(b"", 3.5)], [(b"", 0.0)]]
    assert response.model_spec == ModelSpec(MODEL, 123, None, "classify_x_to_y")


def test_classify_matches_tensorflow(store: ServerCore) -> None:
    for (signature, _), case in expected_cases(HALF_PLUS_TWO).items():
        if signature != "classify_x_to_y":
            continue
        examples = [bytes(e) for e in case["in"]["inputs"]]
        response = classify(store, ClassifyRequest(spec(signature), examples))
        scores = np.array([[score for _, score in c] for c in response.classifications])
        np.testing.assert_allclose(scores, case["out"]["scores"], rtol=1e-6)


def test_classify_resolves_versions_and_labels(store: ServerCore) -> None:
    for model_spec in (spec("classify_x_to_y", version=123),
                       spec("classify_x_to_y", version_label="stable")):
        response = classify(store, ClassifyRequest(model_spec, [example(x=2.0)]))
        assert response.classifications == [[(b"", 3.0)]]
        assert response.model_spec.version == 123
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(nope\)$"):
        classify(store, ClassifyRequest(ModelSpec("nope"), [example(x=2.0)]))


def test_classify_signature_errors(store: ServerCore) -> None:
    def error(model_spec: ModelSpec, **kw: bool) -> str:
        with pytest.raises(InvalidArgumentError) as info:
            classify(store, ClassifyRequest(model_spec, [example(x=1.0)]), **kw)
        return info.value.message

    assert error(spec("nope")) == "No signature was found with the name: nope"
    # The default signature is half_plus_two's predict signature: no "inputs" input.
    assert error(spec()) == (
        "No classification inputs found in SignatureDef: " + SERVING_DEFAULT_DEBUG_STRING
    )
    assert error(spec("regress_x_to_y")).startswith(
        'Expected classification signature outputs to contain at least one of "classes" or '
        '"scores". Signature was: inputs {\n  key: "inputs"\n'
    )
    assert error(spec("__saved_model_init_op")) == "Expected one input Tensor."
    # The method name counts only with --enable_signature_method_name_check.
    assert error(spec("regress_x_to_y"), method_name_check=True) == (
        "Expected classification signature method_name to be tensorflow/serving/classify. "
        "Was: tensorflow/serving/regress"
    )
    response = classify(store, ClassifyRequest(spec("classify_x_to_y"), [example(x=0.0)]),
                        method_name_check=True)
    assert response.classifications == [[(b"", 2.0)]]


def test_classify_input_errors(store: ServerCore) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^Input is empty\.$"):
        classify(store, ClassifyRequest(spec("classify_x_to_y"), []))
    # The graph's example parser refuses an example without the feature, or of another type.
    with pytest.raises(InvalidArgumentError, match=r"Feature: x .*is required"):
        classify(store, ClassifyRequest(spec("classify_x_to_y"), [example(y=1.0)]))
    with pytest.raises(InvalidArgumentError, match="Data types don't match"):
        classify(store, ClassifyRequest(spec("classify_x_to_y"), [example(x=[1])]))


def test_classification_signature_shapes() -> None:
    def sig(inputs: Sequence[str], outputs: Sequence[str]) -> meta_graph_pb2.SignatureDef:
        proto = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/classify")
        for name in inputs:
            proto.inputs[name].name = f"{name}:0"
        for name in outputs:
            proto.outputs[name].name = f"{name}:0"
        return proto

    assert check_classification_signature(sig(["inputs"], ["scores", "classes"]), True) == [
        "classes", "scores"
    ]
    assert check_classification_signature(sig(["inputs"], ["classes", "extra"]), True) == [
        "classes"
    ]
    with pytest.raises(InvalidArgumentError, match=r"^Expected one input Tensor\.$"):
        check_classification_signature(sig(["inputs", "b"], ["scores"]), False)
    with pytest.raises(InvalidArgumentError,
                       match=r"^Expected one or two output Tensors, found 3$"):
        check_classification_signature(sig(["inputs"], ["scores", "classes", "c"]), False)
    with pytest.raises(InvalidArgumentError, match=r"^Expected one or two output Tensors, found 0$"):
        check_classification_signature(sig(["inputs"], []), False)


def test_classification_result_pairs_labels_and_scores() -> None:
    classes = np.array([[b"cat", b"dog"], [b"dog", b"\xff"]], dtype=object)
    scores = np.array([[0.75, 0.25], [0.5, 0.5]], dtype=np.float32)
    assert classification_result(classes, scores, 2) == [
        [(b"cat", 0.75), (b"dog", 0.25)],
        [(b"dog", 0.5), (b"\xff", 0.5)],
    ]
    assert classification_result(classes, None, 2) == [
        [(b"cat", 0.0), (b"dog", 0.0)],
        [(b"dog", 0.0), (b"\xff", 0.0)],
    ]
    assert classification_result(None, scores[:, :1], 2) == [[(b"", 0.75)], [(b"", 0.5)]]


@pytest.mark.parametrize(
    ("classes", "scores", "message"),
    [
        (np.array([b"a", b"b"], dtype=object), None,
         "Expected Tensor shape: [batch_size num_classes] but got [2]"),
        (None, np.zeros((2, 1, 1), np.float32),
         "Expected Tensor shape: [batch_size num_classes] but got [2,1,1]"),
        (np.zeros((2, 1), np.int64), None, "Expected classes Tensor of DT_STRING. Got: DT_INT64"),
        (None, np.zeros((2, 1), np.float64), "Expected scores Tensor of DT_FLOAT. Got: DT_DOUBLE"),
        (np.array([[b"a"]] * 3, dtype=object), None,
         "Expected classes output batch size of 2. Got: 3"),
        (None, np.zeros((1, 4), np.float32), "Expected scores output batch size of 2. Got: 1"),
        (np.array([[b"a"]] * 2, dtype=object), np.zeros((2, 3), np.float32),
         "Tensors class and score should match in dim_size(1). Got 1 vs. 3"),
    ],
)
def test_classification_result_errors(
    classes: np.ndarray | None, scores: np.ndarray | None, message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        classification_result(classes, scores, 2)
    assert info.value.message == message


class _FakeModel:
    """A servable whose classification signature answers fixed classes and scores (no fixture
    model with string classes loads in this runtime yet)."""

    def __init__(self) -> None:
        self.meta_graph = meta_graph_pb2.MetaGraphDef()
        sig = self.meta_graph.signature_def["serving_default"]
        sig.method_name = "tensorflow/serving/classify"
        for alias, tensors, dtype in (("inputs", sig.inputs, DataType.DT_STRING),
                                      ("classes", sig.outputs, DataType.DT_STRING),
                                      ("scores", sig.outputs, DataType.DT_FLOAT)):
            tensors[alias].name = f"{alias}:0"
            tensors[alias].dtype = int(dtype)
        self.signatures = signatures_of(self.meta_graph)
        self.fed: list[np.ndarray] = []

    def run(self, key: str, inputs: Mapping[str, np.ndarray],
            aliases: Sequence[str]) -> dict[str, np.ndarray]:
        assert key == "serving_default" and list(aliases) == ["classes", "scores"]
        batch = inputs["inputs"]
        self.fed.append(batch)
        classes = np.array([[b"no", b"yes"]] * len(batch), dtype=object)
        scores = np.array([[0.25, 0.75]] * len(batch), dtype=np.float32)
        return {"classes": classes, "scores": scores}


class _OneModel:
    def __init__(self, model: _FakeModel) -> None:
        self.model = model

    def handle(self, request: ServableRequest) -> ServableHandle:
        return ServableHandle(ServableId(request.name, 1), self.model)  # type: ignore[arg-type]

    def version_states(self, name: str) -> list[ServableState]:
        return []

    def model_names(self) -> list[str]:
        return ["m"]


def test_classify_feeds_a_string_vector_and_pairs_classes_with_scores() -> None:
    model = _FakeModel()
    examples = [example(x=1.0), b""]
    response = classify(_OneModel(model), ClassifyRequest(ModelSpec("m"), examples))
    assert response.classifications == [[(b"no", 0.25), (b"yes", 0.75)]] * 2
    assert response.model_spec == ModelSpec("m", 1, None, "serving_default")
    (fed,) = model.fed
    assert fed.dtype == object and fed.shape == (2,) and fed.tolist() == examples


# -- regress -----------------------------------------------------------------------------------


def test_regress(store: ServerCore) -> None:
    examples = [example(x=1.0), example(x=3.0), example(x=-4.0)]
    response = regress(store, RegressRequest(spec("regress_x_to_y"), examples))
    assert response.regressions == [2.5, 3.5, 0.0]
    assert response.model_spec == ModelSpec(MODEL, 123, None, "regress_x_to_y")
    other = regress(store, RegressRequest(spec("regress_x_to_y2", version=123), examples))
    assert other.regressions == [3.5, 4.5, 1.0]


def test_regress_matches_tensorflow(store: ServerCore) -> None:
    for (signature, _), case in expected_cases(HALF_PLUS_TWO).items():
        if signature not in ("regress_x_to_y", "regress_x_to_y2"):
            continue
        examples = [bytes(e) for e in case["in"]["inputs"]]
        response = regress(store, RegressRequest(spec(signature), examples))
        np.testing.assert_allclose(response.regressions, case["out"]["outputs"].reshape(-1),
                                   rtol=1e-6)


def test_regress_signature_errors(store: ServerCore) -> None:
    def error(model_spec: ModelSpec, **kw: bool) -> str:
        with pytest.raises(InvalidArgumentError) as info:
            regress(store, RegressRequest(model_spec, [example(x=1.0)]), **kw)
        return info.value.message

    assert error(spec("nope")) == "No signature was found with the name: nope"
    assert error(spec()) == (
        "No regression inputs found in SignatureDef: " + SERVING_DEFAULT_DEBUG_STRING
    )
    assert error(spec("classify_x_to_y")).startswith(
        'No regression outputs found in SignatureDef: inputs {\n  key: "inputs"\n'
    )
    assert error(spec("__saved_model_init_op")) == "Expected one input Tensor."
    assert error(spec("classify_x_to_y"), method_name_check=True) == (
        "Expected regression signature method_name to be tensorflow/serving/regress. "
        "Was: tensorflow/serving/classify"
    )
    # regress_x2_to_y3 passes the checks but takes floats: the feed is refused.
    assert "string" in error(spec("regress_x2_to_y3"))
    with pytest.raises(InvalidArgumentError, match=r"^Input is empty\.$"):
        regress(store, RegressRequest(spec("regress_x_to_y"), []))


SHAPE_ERROR = "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "


def test_regression_result() -> None:
    assert regression_result(np.array([1.5, 2.5], np.float32), 2) == [1.5, 2.5]
    assert regression_result(np.array([[1.5], [2.5]], np.float32), 2) == [1.5, 2.5]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (np.zeros((2, 2), np.float32), SHAPE_ERROR + "[2,2]"),
        (np.zeros((), np.float32), SHAPE_ERROR + "[]"),
        (np.zeros(3, np.float32), "Input batch size did not match output batch size: 2 vs. 3"),
        (np.zeros(2, np.float64), "Expected output Tensor of DT_FLOAT.  Got: DT_DOUBLE"),
    ],
)
def test_regression_result_errors(output: np.ndarray, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        regression_result(output, 2)
    assert info.value.message == message
