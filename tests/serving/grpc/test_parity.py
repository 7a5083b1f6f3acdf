"""REST and gRPC are two adapters over one request layer: the same requests through both give
the same results, and the same errors (same message, and the HTTP status of the gRPC code).

Differences are TensorFlow Serving's own: an unknown signature in Predict is REST's
INVALID_ARGUMENT pre-check but gRPC's FAILED_PRECONDITION, with different words; and REST's JSON
is decoded by the signature's input names (extra keys ignored, values typed by the signature),
so input naming and typing errors are worded by each transport's decoder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import uvicorn

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    predict_pb2,
    regression_pb2,
)
from runtime.errors import Code
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.core.server_core import ServerCore
from serving.rest.app import create_app
from serving.rest.http_status import http_status
from tests.serving.grpc.support import Client, rpc_error
from tests.serving.rest.server_process import free_port
from tests.serving.support import FIXTURE_MODELS, expected_cases

CUSTOM = expected_cases(FIXTURE_MODELS / "custom_module")[("compute", "batch4")]


@pytest.fixture(scope="module")
def rest(core: ServerCore) -> Iterator[httpx.Client]:
    """The REST adapter over the same core, served by uvicorn on a thread."""
    app = create_app(core, readiness=core.readiness)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                           access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:  # waiting for start-up, not timing anything
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        yield http
    server.should_exit = True
    thread.join(60)
    app.close()


def spec_path(name: str, version: int | None = None, label: str | None = None) -> str:
    path = f"/v1/models/{name}"
    if version is not None:
        path += f"/versions/{version}"
    if label is not None:
        path += f"/labels/{label}"
    return path


def fill_spec(out: Any, name: str, version: int | None, label: str | None,
              signature: str = "") -> None:
    out.name = name
    if version is not None:
        out.version.value = version
    if label is not None:
        out.version_label = label
    out.signature_name = signature


def both_predict(rest: httpx.Client, client: Client, name: str, inputs: dict[str, np.ndarray],
                 version: int | None = None, label: str | None = None,
                 signature: str = "") -> tuple[Any, Any]:
    """(REST JSON or error, gRPC outputs or error) for one Predict."""
    body: dict[str, Any] = {"inputs": {k: v.tolist() for k, v in inputs.items()}}
    if signature:
        body["signature_name"] = signature
    http = rest.post(spec_path(name, version, label) + ":predict", json=body)
    request = predict_pb2.PredictRequest()
    fill_spec(request.model_spec, name, version, label, signature)
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(make_tensor_proto(value))
    try:
        response = client.predictions.Predict(request)
        rpc: Any = {k: to_ndarray(v) for k, v in response.outputs.items()}
    except grpc.RpcError as err:
        rpc = err
    return http, rpc


def assert_same_error(http: Any, rpc: Any) -> None:
    assert isinstance(rpc, grpc.RpcError), rpc
    assert http.json() == {"error": rpc.details()}
    assert http.status_code == http_status(Code(rpc.code().value[0]))


def test_predict_results(rest: httpx.Client, client: Client) -> None:
    http, rpc = both_predict(rest, client, "custom", dict(CUSTOM["in"]), signature="compute")
    outputs = http.json()["outputs"]
    assert sorted(outputs) == sorted(rpc) == sorted(CUSTOM["out"])
    for alias, array in rpc.items():
        np.testing.assert_array_equal(np.array(outputs[alias], dtype=array.dtype), array)
    x = {"x": np.array([[1.0], [-3.0]], np.float32)}
    for version, label in ((None, None), (123, None), (None, "stable")):
        http, rpc = both_predict(rest, client, "half_plus_two", x, version, label)
        np.testing.assert_array_equal(np.array(http.json()["outputs"], np.float32), rpc["y"])


@pytest.mark.parametrize(("name", "version", "label", "inputs"), [
    ("nope", None, None, {"x": np.ones((1, 1), np.float32)}),
    ("half_plus_two", 7, None, {"x": np.ones((1, 1), np.float32)}),
    ("half_plus_two", None, "nope", {"x": np.ones((1, 1), np.float32)}),
])
def test_predict_errors(rest: httpx.Client, client: Client, name: str, version: int | None,
                        label: str | None, inputs: dict[str, np.ndarray]) -> None:
    assert_same_error(*both_predict(rest, client, name, inputs, version, label))


def test_unknown_signature_differs_as_upstream(rest: httpx.Client, client: Client) -> None:
    http, rpc = both_predict(rest, client, "half_plus_two", {"x": np.ones((1, 1), np.float32)},
                             signature="nope")
    assert (http.status_code, http.json()) == (
        400, {"error": 'Serving signature name: "nope" not found in signature def'})
    assert (rpc.code(), rpc.details()) == (grpc.StatusCode.FAILED_PRECONDITION,
                                           'Serving signature key "nope" not found.')


def examples_requests(signature: str, xs: list[float]) -> tuple[dict[str, Any], Any]:
    body = {"signature_name": signature, "examples": [{"x": x} for x in xs]}
    examples = []
    for x in xs:
        example = example_pb2.Example()
        example.features.feature["x"].float_list.value.append(x)
        examples.append(example)
    return body, examples


@pytest.mark.parametrize("signature", ["classify_x_to_y", "regress_x_to_y", "serving_default",
                                       "nope"])
def test_classify_and_regress(rest: httpx.Client, client: Client, signature: str) -> None:
    body, examples = examples_requests(signature, [1.0, 7.0])
    for verb, request, call in (
        ("classify", classification_pb2.ClassificationRequest(), client.predictions.Classify),
        ("regress", regression_pb2.RegressionRequest(), client.predictions.Regress),
    ):
        http = rest.post(f"/v1/models/half_plus_two:{verb}", json=body)
        fill_spec(request.model_spec, "half_plus_two", None, None, signature)
        request.input.example_list.examples.extend(examples)
        try:
            response = call(request)
        except grpc.RpcError as err:
            assert_same_error(http, err)
            continue
        assert http.status_code == 200, http.text
        if verb == "classify":
            rows = [[[c.label, c.score] for c in row.classes]
                    for row in response.result.classifications]
        else:
            rows = [r.value for r in response.result.regressions]
        assert http.json() == {"results": rows}


def test_status_and_metadata(rest: httpx.Client, client: Client) -> None:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "half_plus_two"
    versions = client.models.GetModelStatus(request).model_version_status
    http = rest.get("/v1/models/half_plus_two").json()["model_version_status"]
    assert [(int(v["version"]), v["state"]) for v in http] == \
        [(v.version, "AVAILABLE") for v in versions]
    request.model_spec.name = "nope"
    assert_same_error(rest.get("/v1/models/nope"), rpc_error(client.models.GetModelStatus,
                                                             request))
    metadata = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    metadata.model_spec.name = "half_plus_two"
    packed = client.predictions.GetModelMetadata(metadata).metadata["signature_def"]
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    packed.Unpack(signature_map)
    http = rest.get("/v1/models/half_plus_two/metadata").json()
    signatures = http["metadata"]["signature_def"]["signature_def"]
    assert sorted(signatures) == sorted(signature_map.signature_def)
    for key, sig in signature_map.signature_def.items():
        assert signatures[key]["method_name"] == sig.method_name
