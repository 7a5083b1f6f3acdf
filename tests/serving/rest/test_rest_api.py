"""The REST API end to end: the real graphserve process serving half_plus_two over HTTP."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import HALF_PLUS_TWO, expected_cases

MODEL = "half_plus_two"
PREDICT = f"/v1/models/{MODEL}:predict"
JSON = "application/json"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = ServerProcess([f"--model_name={MODEL}", f"--model_base_path={HALF_PLUS_TWO}"],
                            [MODEL])
    yield process
    process.stop()


def post(server: ServerProcess, path: str, body: Any, **kw: Any) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return server.client.post(path, content=content, **kw)


def assert_error(response: Any, status: int, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == JSON
    assert response.json() == {"error": message}
    assert response.text == json.dumps({"error": message}, indent=4, ensure_ascii=False)


def test_status(server: ServerProcess) -> None:
    expected = (
        '{\n "model_version_status": [\n  {\n   "version": "123",\n   "state": "AVAILABLE",\n'
        '   "status": {\n    "error_code": "OK",\n    "error_message": ""\n   }\n  }\n ]\n}\n'
    )
    for path in (f"/v1/models/{MODEL}", f"/v1/models/{MODEL}/versions/123",
                 f"/v1/models/{MODEL}/labels/ignored", "/V1/Models/half%5Fplus%5Ftwo"):
        response = server.client.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"] == JSON
        assert response.text == expected


def test_status_errors(server: ServerProcess) -> None:
    assert_error(server.client.get(f"/v1/models/{MODEL}/versions/7"), 404,
                 f"Could not find version 7 of model {MODEL}")
    assert_error(server.client.get("/v1/models/nope"), 404,
                 "Could not find any versions of model nope")
    assert_error(server.client.get("/v1/models/versions/1"), 400,
                 "Missing model name in request.")


def test_metadata(server: ServerProcess) -> None:
    response = server.client.get(f"/v1/models/{MODEL}/metadata")
    assert response.status_code == 200 and response.headers["content-type"] == JSON
    assert response.text.startswith(
        '{\n"model_spec":{\n "name": "half_plus_two",\n "signature_name": "",\n'
        ' "version": "123"\n}\n,\n"metadata": {"signature_def": {\n "signature_def": {\n'
    )
    body = response.json()
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "classify_x_to_y", "regress_x2_to_y3"} <= set(signatures)
    assert signatures["serving_default"]["inputs"]["x"] == {
        "dtype": "DT_FLOAT",
        "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}],
                         "unknown_rank": False},
        "name": "serving_default_x:0",
    }
    assert signatures["serving_default"]["method_name"] == "tensorflow/serving/predict"
    versioned = server.client.get(f"/v1/models/{MODEL}/versions/123/metadata")
    assert versioned.text == response.text
    assert_error(server.client.get("/v1/models/nope/metadata"), 404,
                 "Servable not found for request: Latest(nope)")


def test_predict_row_format(server: ServerProcess) -> None:
    response = post(server, PREDICT, {"instances": [[1.0], [2.0], [5.0]]})
    assert response.status_code == 200 and response.headers["content-type"] == JSON
    assert response.text == '{\n    "predictions": [[2.5], [3.0], [4.5]\n    ]\n}'


def test_predict_columnar_format(server: ServerProcess) -> None:
    response = post(server, PREDICT, {"inputs": {"x": [[1.0], [2.0]]}})
    assert response.text == (
        '{\n    "outputs": [\n        [\n            2.5\n        ],\n'
        '        [\n            3.0\n        ]\n    ]\n}'
    )
    assert post(server, PREDICT, {"inputs": [[-4.0]]}).json() == {"outputs": [[0.0]]}


def test_predict_matches_tensorflow(server: ServerProcess) -> None:
    for (signature, case), data in expected_cases(HALF_PLUS_TWO).items():
        if signature != "serving_default":
            continue
        x, y = data["in"]["x"], data["out"]["y"]
        row = post(server, PREDICT, {"instances": x.tolist()})
        columnar = post(server, PREDICT, {"signature_name": signature, "inputs": x.tolist()})
        assert row.status_code == columnar.status_code == 200, (case, row.text)
        np.testing.assert_allclose(np.array(row.json()["predictions"], np.float32), y,
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(columnar.json()["outputs"], np.float32), y,
                                   rtol=1e-5, atol=1e-6)


def test_signature_name_and_b64_strings(server: ServerProcess) -> None:
    response = post(server, PREDICT, {"signature_name": "regress_x2_to_y3",
                                      "instances": [[4.0]]})
    assert response.json() == {"predictions": [[5.0]]}
    data = expected_cases(HALF_PLUS_TWO)[("classify_x_to_y", "batch3")]
    examples = [{"b64": base64.b64encode(bytes(e)).decode()} for e in data["in"]["inputs"]]
    response = post(server, PREDICT, {"signature_name": "classify_x_to_y",
                                      "instances": examples})
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(np.array(response.json()["predictions"], np.float32),
                               data["out"]["scores"], rtol=1e-5, atol=1e-6)


def test_versions_and_labels(server: ServerProcess) -> None:
    ok = post(server, f"/v1/models/{MODEL}/versions/123:predict", {"instances": [[0.0]]})
    assert ok.json() == {"predictions": [[2.0]]}
    assert_error(post(server, f"/v1/models/{MODEL}/versions/7:predict", {"instances": [[0.0]]}),
                 404, f"Servable not found for request: Specific({MODEL}, 7)")
    assert_error(post(server, f"/v1/models/{MODEL}/labels/stable:predict",
                      {"instances": [[0.0]]}),
                 400, "Unrecognized servable version label: stable")
    assert_error(post(server, "/v1/models/nope:predict", {"instances": [[0.0]]}),
                 404, "Servable not found for request: Latest(nope)")


PREDICT_ERRORS = [
    (b"", "JSON Parse error: The document is empty"),
    (b"instances = [1, 2]", "JSON Parse error: Invalid value. at offset: 0"),
    (b"[1]", "JSON Value: [1] Is not object"),
    ({"signature_name": 100},
     ('JSON Value: {\n    "signature_name": 100\n} not formatted correctly. '
      "'signature_name' key must be a string value.")),
    ({"signature_name": "nope", "instances": [[1.0]]},
     'Serving signature name: "nope" not found in signature def'),
    ({}, "Missing 'inputs' or 'instances' key"),
    ({"instances": [[1.0]], "inputs": [[1.0]]},
     ('JSON Value: {\n    "instances": [[1.0]],\n    "inputs": [[1.0]]\n} Not formatted '
      "correctly expecting only one of 'inputs' or 'instances' keys to exist ")),
    ({"instances": {"x": 1}},
     ('JSON Value: {\n    "instances": {\n        "x": 1\n    }\n} Expecting \'instances\' to '
      "be an list/array")),
    ({"instances": []}, 'JSON Value: {\n    "instances": []\n} No values in \'instances\' array'),
    ({"instances": ["x", "y"]},
     ("Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
      'JSON Value: "x" Type: String is not of expected type: float')),
    ({"instances": [[1.0], [2.0, 3.0]]},
     ("Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
      "Expecting tensor size: 1 but got: 2")),
    ({"instances": [{"x": [1.0]}, [2.0]]}, "Expecting object but got list at item 1 of input list"),
    ({"instances": [{"x": [1.0], "z": [1.0]}]},
     ("Failed to process element: 0 key: z of 'instances' list. Error: INVALID_ARGUMENT: "
      "JSON object: does not have named input: z")),
    ({"inputs": [[1.0], [2.0, 3.0]]},
     "Encountered list at unexpected size: 2 at level: 1 expected size: 1"),
    ({"inputs": {"z": [[1.0]]}}, "Missing named input: x in 'inputs' object."),
    ({"inputs": [[{"b64": "AAAA"}]]},
     'JSON Value: {\n    "b64": "AAAA"\n} Type: Object is not of expected type: float'),
    ({"inputs": [[True]]}, "JSON Value: true Type: True is not of expected type: float"),
]


@pytest.mark.parametrize(("body", "message"), PREDICT_ERRORS)
def test_predict_errors(server: ServerProcess, body: Any, message: str) -> None:
    assert_error(post(server, PREDICT, body), 400, message)


def test_malformed_requests(server: ServerProcess) -> None:
    assert_error(post(server, f"/v1/models/{MODEL}/metadata", {}), 400,
                 f"Malformed request: POST /v1/models/{MODEL}/metadata")
    assert_error(server.client.put(f"/v1/models/{MODEL}"), 400,
                 f"Malformed request: PUT /v1/models/{MODEL}")
    assert_error(post(server, f"/v1/models/{MODEL}/versions/x:predict", {}), 400,
                 f"Malformed request: POST /v1/models/{MODEL}/versions/x:predict")


def test_paths_outside_v1_get_an_html_404(server: ServerProcess) -> None:
    # /v2 is the Open Inference Protocol's (tests/serving/v2).
    response = server.client.get("/v3/models/half_plus_two")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "<TITLE>404 Not Found</TITLE>" in response.text


def test_v1_prefix_is_case_insensitive(server: ServerProcess) -> None:
    response = post(server, f"/V1/MODELS/{MODEL}:predict", {"instances": [[1.0]]})
    assert response.json() == {"predictions": [[2.5]]}


def test_gzip_request_bodies(server: ServerProcess) -> None:
    body = gzip.compress(json.dumps({"instances": [[1.0], [3.0]]}).encode())
    response = post(server, PREDICT, body, headers={"Content-Encoding": "gzip"})
    assert response.json() == {"predictions": [[2.5], [3.5]]}
    broken = post(server, PREDICT, b"not gzip", headers={"Content-Encoding": "gzip"})
    assert_error(broken, 400, "JSON Parse error: The document is empty")


def test_cors_preflight_without_cors_support(server: ServerProcess) -> None:
    ok = server.client.options(PREDICT, headers={"Origin": "https://example.com"})
    assert ok.status_code == 200 and ok.content == b""
    assert "access-control-allow-origin" not in ok.headers
    refused = server.client.options(PREDICT)
    assert refused.status_code == 400 and refused.content == b""
