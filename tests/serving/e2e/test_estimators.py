"""Canned Estimator exports (TensorFlow 2.15) served end to end over REST and gRPC on loopback:
classify, regress and predict answer with TensorFlow's recorded numbers.

The models parse tf.Examples through feature columns (vocabulary lists and files, hash buckets,
bucketized, crossed, embedding and indicator columns); ``wide_deep_raw`` takes raw tensors and
``partitioned_wide_deep`` looks its embeddings up across partitioned variables.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import (
    classification_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from serving.client import grpc_messages
from tests.serving.e2e.example_requests import add_examples, as_json, cases
from tests.serving.e2e.support import serve_models
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, expected_cases

MODELS = {
    name: FIXTURE_MODELS / f"tf215_{name}"
    for name in (
        "linear_classifier",
        "linear_regressor",
        "dnn_classifier",
        "wide_deep_raw",
        "partitioned_wide_deep",
    )
}
CLASSIFIERS = ("linear_classifier", "dnn_classifier", "partitioned_wide_deep")
# (model, signature) pairs that regress: the regressor's default and the binary classifier's
# logistic output.
REGRESSIONS = (("linear_regressor", "serving_default"), ("linear_classifier", "regression"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = serve_models(tmp_path_factory, MODELS)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[Any]:
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


def post(server: ServerProcess, model: str, verb: str, body: dict[str, Any]) -> Any:
    response = server.client.post(f"/v1/models/{model}:{verb}", content=json.dumps(body).encode())
    assert response.status_code == 200, response.text
    return response.json()


def assert_close(got: Any, want: np.ndarray, where: str) -> None:
    got = np.asarray(got)
    if want.dtype.kind == "S":
        assert got.astype(bytes).tolist() == want.tolist(), where
    elif want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("model", CLASSIFIERS)
def test_classify(server: ServerProcess, stub: Any, model: str) -> None:
    recorded = cases(MODELS[model], "serving_default")
    assert recorded
    for serialized, expected in recorded:
        body = {"examples": [as_json(s) for s in serialized]}
        results = post(server, model, "classify", body)["results"]
        assert_close([[c for c, _ in row] for row in results], expected["classes"], "rest classes")
        assert_close([[s for _, s in row] for row in results], expected["scores"], "rest scores")

        request = classification_pb2.ClassificationRequest()
        request.model_spec.name = model
        add_examples(request, serialized)
        rows = stub.Classify(request).result.classifications
        assert_close([[c.label for c in r.classes] for r in rows], expected["classes"], "grpc")
        assert_close([[c.score for c in r.classes] for r in rows], expected["scores"], "grpc")


@pytest.mark.parametrize(("model", "signature"), REGRESSIONS)
def test_regress(server: ServerProcess, stub: Any, model: str, signature: str) -> None:
    recorded = cases(MODELS[model], signature)
    assert recorded
    for serialized, expected in recorded:
        body = {"signature_name": signature, "examples": [as_json(s) for s in serialized]}
        results = post(server, model, "regress", body)["results"]
        assert_close(results, expected["outputs"].reshape(-1), "rest")

        request = regression_pb2.RegressionRequest()
        request.model_spec.name = model
        request.model_spec.signature_name = signature
        add_examples(request, serialized)
        values = [r.value for r in stub.Regress(request).result.regressions]
        assert_close(values, expected["outputs"].reshape(-1), "grpc")


def _rest_value(array: np.ndarray) -> Any:
    if array.dtype.kind == "S":
        return [{"b64": base64.b64encode(bytes(v)).decode()} for v in array]
    return array.tolist()


@pytest.mark.parametrize("model", list(MODELS))
def test_predict(server: ServerProcess, stub: Any, model: str) -> None:
    recorded = sorted((c, v) for (s, c), v in expected_cases(MODELS[model]).items() if s == "predict")
    assert recorded
    for case, call in recorded:
        body = {
            "signature_name": "predict",
            "inputs": {alias: _rest_value(value) for alias, value in call["in"].items()},
        }
        outputs = post(server, model, "predict", body)["outputs"]
        if len(call["out"]) == 1:  # the columnar answer for a single output is the value itself
            outputs = {alias: outputs for alias in call["out"]}
        assert set(outputs) == set(call["out"])
        for alias, want in call["out"].items():
            assert_close(outputs[alias], want, f"rest {case}/{alias}")

        spec = grpc_messages.model_spec(model, signature_name="predict")
        inputs = {alias: value.astype(object) if value.dtype.kind == "S" else value
                  for alias, value in call["in"].items()}
        request = grpc_messages.predict_request(spec, inputs)
        response = stub.Predict(request)
        got = grpc_messages.predict_outputs(response)
        assert set(got) == set(call["out"])
        for alias, want in call["out"].items():
            assert_close(got[alias], want, f"grpc {case}/{alias}")
