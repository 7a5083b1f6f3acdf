""":classify and :regress over HTTP against TensorFlow Serving's documented behaviour.

half_plus_two: classify_x_to_y scores y = 0.5x + 2 (one score, no classes: empty labels),
regress_x_to_y answers 0.5x + 2 and regress_x_to_y2 0.5x + 3, each parsing a float feature "x"
from tf.Examples. The expected numbers are worked out by hand from those formulas.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx

from tests.serving.rest.server_process import ServerProcess

MODEL = "/v1/models/half_plus_two"
JSON = "application/json"
DEFAULT_SIGNATURE = (
    'inputs {\n  key: "x"\n  value {\n    name: "serving_default_x:0"\n    dtype: DT_FLOAT\n'
    "    tensor_shape {\n      dim {\n        size: -1\n      }\n      dim {\n        size: 1\n"
    "      }\n    }\n  }\n}\n"
    'outputs {\n  key: "y"\n  value {\n    name: "StatefulPartitionedCall_4:0"\n'
    "    dtype: DT_FLOAT\n    tensor_shape {\n      dim {\n        size: -1\n      }\n"
    "      dim {\n        size: 1\n      }\n    }\n  }\n}\n"
    'method_name: "tensorflow/serving/predict"\n'
)


def post(server: ServerProcess, path: str, body: Any, **kw: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return server.client.post(path, content=content, **kw)


def assert_error(response: httpx.Response, status: int, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == JSON
    assert response.json() == {"error": message}


def test_classify(two_models: ServerProcess) -> None:
    body = {"signature_name": "classify_x_to_y",
            "examples": [{"x": 1.0}, {"x": [3.0]}, {"x": -4.0}, {"x": 0.1}]}
    response = post(two_models, f"{MODEL}:classify", body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == JSON
    # 0.5 * float32(0.1) + 2 rounds to float32(2.05), which prints as 2.05.
    assert response.text == (
        '{\n    "results": [[["", 2.5]], [["", 3.5]], [["", 0.0]], [["", 2.05]]\n    ]\n}'
    )


def test_regress(two_models: ServerProcess) -> None:
    examples = [{"x": 1.0}, {"x": 3.0}, {"x": -4.0}]
    response = post(two_models, f"{MODEL}:regress",
                    {"signature_name": "regress_x_to_y", "examples": examples})
    assert response.status_code == 200, response.text
    assert response.text == '{\n    "results": [2.5, 3.5, 0.0]\n}'
    response = post(two_models, f"{MODEL}:regress",
                    {"signature_name": "regress_x_to_y2", "examples": examples})
    assert response.json() == {"results": [3.5, 4.5, 1.0]}


def test_context_is_merged_and_examples_win(two_models: ServerProcess) -> None:
    body = {"signature_name": "regress_x_to_y", "context": {"x": 10.0, "unused": "a"},
            "examples": [{}, {"x": 2.0}]}
    assert post(two_models, f"{MODEL}:regress", body).json() == {"results": [7.0, 3.0]}


def test_versions_labels_and_gzip(two_models: ServerProcess) -> None:
    body = {"signature_name": "regress_x_to_y", "examples": [{"x": 6.0}]}
    for path in (f"{MODEL}/versions/123:regress", f"{MODEL}/labels/stable:regress"):
        assert post(two_models, path, body).json() == {"results": [5.0]}
    packed = gzip.compress(json.dumps({**body, "signature_name": "classify_x_to_y"}).encode())
    response = post(two_models, f"{MODEL}/versions/123:classify", packed,
                    headers={"Content-Encoding": "gzip"})
    assert response.json() == {"results": [[["", 5.0]]]}
    assert_error(post(two_models, f"{MODEL}/versions/7:regress", body), 404,
                 "Servable not found for request: Specific(half_plus_two, 7)")
    assert_error(post(two_models, f"{MODEL}/labels/canary:classify", body), 400,
                 "Unrecognized servable version label: canary")


def test_the_default_signature_is_not_a_classifier(two_models: ServerProcess) -> None:
    # serving_default is half_plus_two's predict signature; the method name is not checked
    # by default, the signature's shape is.
    examples = {"examples": [{"x": 1.0}]}
    assert_error(post(two_models, f"{MODEL}:classify", examples), 400,
                 "No classification inputs found in SignatureDef: " + DEFAULT_SIGNATURE)
    assert_error(post(two_models, f"{MODEL}:regress", examples), 400,
                 "No regression inputs found in SignatureDef: " + DEFAULT_SIGNATURE)


def test_signature_mismatches(two_models: ServerProcess) -> None:
    def error(verb: str, signature: str) -> str:
        response = post(two_models, f"{MODEL}:{verb}",
                        {"signature_name": signature, "examples": [{"x": 1.0}]})
        assert response.status_code == 400, response.text
        message: str = response.json()["error"]
        return message

    assert error("classify", "nope") == "No signature was found with the name: nope"
    assert error("regress", "classify_x_to_y").startswith(
        "No regression outputs found in SignatureDef: ")
    assert error("classify", "regress_x_to_y").startswith(
        'Expected classification signature outputs to contain at least one of "classes" or '
        '"scores". Signature was: ')
    # regress_x2_to_y3 has the right aliases but a float input: the string feed is refused.
    assert "string" in error("regress", "regress_x2_to_y3")


def test_feature_types_follow_json_kinds(two_models: ServerProcess) -> None:
    """The documented pitfall: 1 is an int64 feature, 1.0 a float one; the model parses floats."""
    body = {"signature_name": "regress_x_to_y", "examples": [{"x": 1}]}
    response = post(two_models, f"{MODEL}:regress", body)
    assert response.status_code == 400
    assert "Data types don't match" in response.json()["error"]
    body = {"signature_name": "regress_x_to_y", "examples": [{"y": 1.0}]}
    response = post(two_models, f"{MODEL}:regress", body)
    assert response.status_code == 400
    assert "Feature: x " in response.json()["error"]
