"""Classify, regress and predict end to end on models with lookup tables and tf.Example parsing,
against the real daemon over REST and gRPC on loopback, compared with TensorFlow's recordings.

- vocab_asset: tables from asset files and from the checkpoint; ``classify`` parses fixed-length,
  sparse and defaulted features, ``regress`` padded-sequence and ragged ones; labels come from a
  table.
- tf1_vocab_lookup: a TF1 Builder export whose tables the main op fills; ``classify`` parses
  string tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow_serving.apis import (
    classification_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from tests.serving.e2e.example_requests import add_examples, as_json, cases
from tests.serving.e2e.support import serve_models
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, expected_cases

VOCAB = FIXTURE_MODELS / "vocab_asset"
TF1 = FIXTURE_MODELS / "tf1_vocab_lookup"
MODELS = {"vocab": VOCAB, "tf1_vocab": TF1}


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
    return response


# -- classify ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "directory"), [("vocab", VOCAB), ("tf1_vocab", TF1)])
def test_classify_over_rest(server: ServerProcess, model: str, directory: Path) -> None:
    for serialized, expected in cases(directory, "classify"):
        body = {"signature_name": "classify", "examples": [as_json(s) for s in serialized]}
        response = post(server, model, "classify", body)
        assert response.status_code == 200, response.text
        results = response.json()["results"]
        labels = [[label for label, _ in row] for row in results]
        scores = np.array([[score for _, score in row] for row in results])
        assert labels == [[c.decode() for c in row] for row in expected["classes"]]
        np.testing.assert_allclose(scores, expected["scores"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("model", "directory"), [("vocab", VOCAB), ("tf1_vocab", TF1)])
def test_classify_over_grpc(stub: Any, model: str, directory: Path) -> None:
    for serialized, expected in cases(directory, "classify"):
        request = classification_pb2.ClassificationRequest()
        request.model_spec.name = model
        request.model_spec.signature_name = "classify"
        add_examples(request, serialized)
        response = stub.Classify(request)
        assert response.model_spec.signature_name == "classify"
        rows = response.result.classifications
        assert [[c.label.encode() for c in row.classes] for row in rows] == (
            expected["classes"].tolist()
        )
        scores = np.array([[c.score for c in row.classes] for row in rows])
        np.testing.assert_allclose(scores, expected["scores"], rtol=1e-5, atol=1e-7)


def test_context_features_reach_the_parser(stub: Any) -> None:
    """Context bytes come first, so the examples' own features win on a shared key; the answer is
    that of the merged examples sent whole."""
    context = example_pb2.Example()
    context.features.feature["tokens"].bytes_list.value.extend([b"apple", b"fig", b"kiwi"])
    context.features.feature["boost"].float_list.value.append(2.0)
    own = [example_pb2.Example(), example_pb2.Example()]
    own[1].features.feature["boost"].float_list.value.append(0.5)
    own[1].features.feature["extra"].bytes_list.value.append(b"date")

    with_context = classification_pb2.ClassificationRequest()
    with_context.model_spec.name = "vocab"
    with_context.model_spec.signature_name = "classify"
    with_context.input.example_list_with_context.context.CopyFrom(context)
    with_context.input.example_list_with_context.examples.extend(own)

    merged = classification_pb2.ClassificationRequest()
    merged.model_spec.CopyFrom(with_context.model_spec)
    for example in own:
        whole = example_pb2.Example()
        whole.MergeFrom(context)
        whole.MergeFrom(example)
        merged.input.example_list.examples.append(whole)

    first = stub.Classify(with_context).result
    second = stub.Classify(merged).result
    assert first == second
    assert first.classifications[0] != first.classifications[1]


# -- regress ----------------------------------------------------------------------------------


def test_regress_over_rest_and_grpc(server: ServerProcess, stub: Any) -> None:
    for serialized, expected in cases(VOCAB, "regress"):
        body = {"signature_name": "regress", "examples": [as_json(s) for s in serialized]}
        response = post(server, "vocab", "regress", body)
        assert response.status_code == 200, response.text
        np.testing.assert_allclose(response.json()["results"], expected["outputs"], rtol=1e-6)

        request = regression_pb2.RegressionRequest()
        request.model_spec.name = "vocab"
        request.model_spec.signature_name = "regress"
        add_examples(request, serialized)
        values = [r.value for r in stub.Regress(request).result.regressions]
        np.testing.assert_allclose(values, expected["outputs"], rtol=1e-6)


# -- predict over the tables ------------------------------------------------------------------


def test_predict_string_tokens(server: ServerProcess) -> None:
    for (signature, _), case in sorted(expected_cases(VOCAB).items()):
        if signature != "serving_default":
            continue
        tokens = [[t.decode() for t in row] for row in case["in"]["tokens"]]
        response = post(server, "vocab", "predict", {"inputs": {"tokens": tokens}})
        assert response.status_code == 200, response.text
        outputs = response.json()["outputs"]
        for alias, expected in case["out"].items():
            np.testing.assert_allclose(np.array(outputs[alias]), expected, rtol=1e-5, atol=1e-6)


# -- errors -----------------------------------------------------------------------------------


def test_parse_errors_reach_both_transports(server: ServerProcess, stub: Any) -> None:
    missing = (
        "Name: <unknown>, Feature: tokens (data type: string) is required but could not be found."
    )
    wrong_type = (
        "Name: <unknown>, Key: boost, Index: 1.  Data types don't match. Data type: int64 but "
        "expected type: float"
    )
    good = {"tokens": ["apple", "fig", "kiwi"]}
    for bad, message in (({"extra": ["fig"]}, missing), ({**good, "boost": 2}, wrong_type)):
        body = {"signature_name": "classify", "examples": [good, bad]}
        response = post(server, "vocab", "classify", body)
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith(message)

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "vocab"
    request.model_spec.signature_name = "classify"
    request.input.example_list.examples.add().features.feature["boost"].float_list.value.append(1)
    with pytest.raises(grpc.RpcError) as info:
        stub.Classify(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith(missing)
