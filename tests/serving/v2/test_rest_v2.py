"""The Open Inference Protocol's REST API (``/v2``) on the real daemon, on loopback.

Triton's own HTTP client (``tritonclient``, in ``.venv-triton``, driven by ``triton_client.py``)
runs every recorded case of the fixture models, with JSON and binary data both ways, and its
answers are compared with TensorFlow's recorded outputs. Plain HTTP (httpx) checks the wire
details: health, metadata, nested JSON data, the binary layout, content codings, CORS, the
limits, the request metrics and the errors.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import ml_dtypes
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving.requests.inference_v2 import InferOutput, InferRequest, InferResponse
from serving.rest.content_coding import accepted
from serving.rest.v2_codec import InferBody, encode_infer_response
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, expected_cases
from tests.serving.v2.support import Results, output_array, run_triton

MODELS = ("functional_multi_io", "keras_string_lookup", "tf1_vocab_lookup", "multi_signature",
          "regex_model")
LABEL = "stable"  # keras_string_lookup's label for version 1
METRICS_PATH = "/metrics"
MAX_BODY_BYTES = 1 << 20
MAX_TENSOR_BYTES = 256 << 10
DATATYPES = {"float32": "FP32", "float64": "FP64", "int32": "INT32", "int64": "INT64",
             "bool": "BOOL"}
HEADER_LENGTH = "inference-header-content-length"
MULTI_IO = "/v2/models/functional_multi_io"


def datatype(array: np.ndarray) -> str:
    return "BYTES" if array.dtype.kind == "S" else DATATYPES[str(array.dtype)]


# (model, signature, case) -> {"in": {alias: array}, "out": {alias: array}}
CASES = {
    (model, signature, case): arrays
    for model in MODELS
    for (signature, case), arrays in expected_cases(FIXTURE_MODELS / model).items()
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("v2")
    entries = "".join(
        f'  config {{ name: "{m}" base_path: "{FIXTURE_MODELS / m}" model_platform: "tensorflow"'
        + (f' version_labels {{ key: "{LABEL}" value: 1 }}' if m == "keras_string_lookup" else "")
        + " }\n"
        for m in MODELS
    )
    (work / "models.config").write_text(f"model_config_list {{\n{entries}}}\n")
    (work / "monitoring.config").write_text(
        f'prometheus_config {{ enable: true path: "{METRICS_PATH}" }}\n'
    )
    flags = [
        f"--model_config_file={work / 'models.config'}", "--port=0",
        "--allow_version_labels_for_unavailable_models", "--rest_api_enable_cors_support",
        f"--monitoring_config_file={work / 'monitoring.config'}",
        f"--rest_api_max_body_bytes={MAX_BODY_BYTES}",
        f"--max_request_tensor_bytes={MAX_TENSOR_BYTES}",
    ]
    process = ServerProcess(flags, list(MODELS))
    yield process
    assert process.stop() == 0, process.output()


# -- Triton's client -----------------------------------------------------------------------------


def _utf8(array: np.ndarray) -> bool:
    try:
        for value in array.reshape(-1).tolist():
            value.decode()
    except UnicodeDecodeError:
        return False
    return True


def triton_plan() -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """Every recorded case as JSON and as binary data (both ways), then the extras."""
    arrays: dict[str, np.ndarray] = {}
    calls: list[dict[str, Any]] = []
    for (model, signature, case), data in CASES.items():
        inputs = []
        for alias, array in data["in"].items():
            key = f"{model}/{signature}/{case}/{alias}"
            arrays[key] = array
            inputs.append({"name": alias, "datatype": datatype(array), "key": key})
        parameters = {} if signature == "serving_default" else {"signature_name": signature}
        for form, binary in (("json", False), ("binary", True)):
            if not binary and not all(_utf8(a) for a in data["in"].values() if a.dtype.kind == "S"):
                continue  # JSON carries BYTES as strings only
            calls.append({
                "id": f"{model}/{signature}/{case}/{form}", "protocol": "http", "op": "infer",
                "model": model, "parameters": parameters,
                "inputs": [{**spec, "binary": binary} for spec in inputs],
                "outputs": [{"name": alias, "binary": binary} for alias in data["out"]],
            })
    multi_io = [{"name": "numeric", "datatype": "FP32", "binary": True,
                 "key": "functional_multi_io/serving_default/batch4/numeric"},
                {"name": "category", "datatype": "INT64", "binary": False,
                 "key": "functional_multi_io/serving_default/batch4/category"}]
    calls += [
        # Mixed forms, a request id and a version; no outputs named (then all come as binary).
        {"id": "mixed", "protocol": "http", "op": "infer", "model": "functional_multi_io",
         "version": "1", "request_id": "req-7", "inputs": multi_io,
         "outputs": [{"name": "probability", "binary": False},
                     {"name": "class_scores", "binary": True}]},
        {"id": "all_outputs", "protocol": "http", "op": "infer",
         "model": "functional_multi_io", "inputs": multi_io},
        {"id": "label", "protocol": "http", "op": "infer", "model": "keras_string_lookup",
         "version": LABEL, "inputs": [{"name": "color", "datatype": "BYTES", "binary": False,
                                       "key": "keras_string_lookup/serving_default/batch4/color"}]},
        *({"id": f"compressed/{algorithm}", "protocol": "http", "op": "infer",
           "model": "functional_multi_io", "inputs": multi_io, "compression": algorithm}
          for algorithm in ("gzip", "deflate")),
        {"id": "unknown_model", "protocol": "http", "op": "infer", "model": "nope",
         "inputs": multi_io},
        {"id": "unknown_signature", "protocol": "http", "op": "infer",
         "model": "functional_multi_io", "parameters": {"signature_name": "nope"},
         "inputs": multi_io},
        {"id": "live", "protocol": "http", "op": "server_live"},
        {"id": "ready", "protocol": "http", "op": "server_ready"},
        {"id": "model_ready", "protocol": "http", "op": "model_ready", "model": "regex_model"},
        {"id": "model_ready/v1", "protocol": "http", "op": "model_ready", "model": "regex_model",
         "version": "1"},
        {"id": "model_ready/v2", "protocol": "http", "op": "model_ready", "model": "regex_model",
         "version": "2"},
        {"id": "model_ready/nope", "protocol": "http", "op": "model_ready", "model": "nope"},
        {"id": "server_metadata", "protocol": "http", "op": "server_metadata"},
        {"id": "model_metadata", "protocol": "http", "op": "model_metadata",
         "model": "keras_string_lookup", "version": LABEL},
    ]
    return arrays, calls


@pytest.fixture(scope="module")
def triton(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Results, dict[str, np.ndarray]]:
    """The plan's results by call id, and the numeric outputs by key."""
    arrays, calls = triton_plan()
    return run_triton(server, tmp_path_factory.mktemp("triton"), arrays, calls, timeout_s=120)


def check_outputs(result: dict[str, Any], expected: dict[str, np.ndarray],
                  out: dict[str, np.ndarray]) -> None:
    assert result["ok"], result["error"]
    assert sorted(result["outputs"]) == sorted(expected)
    for name, want in expected.items():
        got = output_array(result, name, out)
        assert got.shape == want.shape, name
        if want.dtype.kind == "f":
            assert got.dtype == want.dtype, name
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
        elif want.dtype.kind == "S":
            assert got.reshape(-1).tolist() == want.reshape(-1).tolist(), name
        else:
            assert got.dtype == want.dtype, name
            np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("case", list(CASES), ids="/".join)
def test_triton_client_matches_tensorflow(
    triton: tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]], case: tuple[str, str, str]
) -> None:
    results, out = triton
    expected = CASES[case]["out"]
    binary = results["/".join(case) + "/binary"]
    check_outputs(binary, expected, out)
    for output in binary["response"]["outputs"]:
        assert "data" not in output and output["parameters"]["binary_data_size"] >= 0
    assert binary["response"]["model_name"] == case[0]
    assert binary["response"]["model_version"] == "1"
    as_json = results.get("/".join(case) + "/json")
    if as_json is not None:
        check_outputs(as_json, expected, out)
        for output in as_json["response"]["outputs"]:
            assert "data" in output and "parameters" not in output
        # Both forms carry the same values, bit for bit.
        for name in expected:
            np.testing.assert_array_equal(output_array(as_json, name, out),
                                          output_array(binary, name, out))


def test_triton_client_mixed_forms_id_versions_and_compression(
    triton: tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]],
) -> None:
    results, out = triton
    expected = CASES[("functional_multi_io", "serving_default", "batch4")]["out"]
    mixed = results["mixed"]
    check_outputs(mixed, expected, out)
    response = mixed["response"]
    assert response["id"] == "req-7" and response["model_version"] == "1"
    # In the order asked for, each in the form asked for.
    assert [o["name"] for o in response["outputs"]] == ["probability", "class_scores"]
    assert "data" in response["outputs"][0] and "parameters" in response["outputs"][1]
    assert "id" not in results["all_outputs"]["response"]
    for key in ("all_outputs", "compressed/gzip", "compressed/deflate"):
        check_outputs(results[key], expected, out)
        assert all("parameters" in o for o in results[key]["response"]["outputs"]), key
    label = results["label"]
    check_outputs(label, CASES[("keras_string_lookup", "serving_default", "batch4")]["out"], out)
    assert label["response"]["model_version"] == "1"


def test_triton_client_health_metadata_and_errors(
    triton: tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]],
) -> None:
    results, _ = triton
    values = {key: results[key].get("value") for key in
              ("live", "ready", "model_ready", "model_ready/v1", "model_ready/v2",
               "model_ready/nope")}
    assert values == {"live": True, "ready": True, "model_ready": True, "model_ready/v1": True,
                      "model_ready/v2": False, "model_ready/nope": False}
    server_metadata = results["server_metadata"]["value"]
    assert server_metadata["name"] == "graphserve"
    assert server_metadata["extensions"] == ["binary_tensor_data", "parameters"]
    assert results["model_metadata"]["value"] == {
        "name": "keras_string_lookup", "versions": ["1"], "platform": "tensorflow_savedmodel",
        "inputs": [{"name": "color", "datatype": "BYTES", "shape": [-1, 3]}],
        "outputs": [{"name": "ids", "datatype": "INT64", "shape": [-1, 3]},
                    {"name": "scores", "datatype": "FP32", "shape": [-1, 3]}],
    }
    unknown = results["unknown_model"]
    assert (unknown["ok"], unknown["status"]) == (False, "404") and "nope" in unknown["error"]
    unknown = results["unknown_signature"]
    assert (unknown["ok"], unknown["status"]) == (False, "400")
    assert "no signature 'nope'" in unknown["error"]


# -- plain HTTP ---------------------------------------------------------------------------------


def infer(server: ServerProcess, body: Any, path: str = MULTI_IO, **kwargs: Any) -> httpx.Response:
    return server.client.post(f"{path}/infer", json=body, **kwargs)


def multi_io_inputs(nested: bool = True) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    case = CASES[("functional_multi_io", "serving_default", "batch4")]
    numeric, category = case["in"]["numeric"], case["in"]["category"]
    inputs = [
        {"name": "numeric", "shape": list(numeric.shape), "datatype": "FP32",
         "data": numeric.tolist() if nested else numeric.reshape(-1).tolist()},
        {"name": "category", "shape": list(category.shape), "datatype": "INT64",
         "data": category.tolist() if nested else category.reshape(-1).tolist()},
    ]
    return inputs, case["out"]


def test_health_and_metadata(server: ServerProcess) -> None:
    client = server.client
    for path in ("/v2/health/live", "/v2/health/ready", f"{MULTI_IO}/ready",
                 f"{MULTI_IO}/versions/1/ready"):
        for method in ("GET", "HEAD"):
            response = client.request(method, path)
            assert (response.status_code, response.content) == (200, b""), (method, path)
    for path in ("/v2/models/nope/ready", f"{MULTI_IO}/versions/7/ready",
                 "/v2/models/keras_string_lookup/versions/nolabel/ready"):
        response = client.get(path)
        assert (response.status_code, response.content) == (400, b""), path
    response = client.get("/v2")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json()["name"] == "graphserve"
    metadata = client.get(MULTI_IO).json()
    assert metadata == client.get(f"{MULTI_IO}/versions/1").json()
    assert metadata["inputs"] == [{"name": "category", "datatype": "INT64", "shape": [-1, 1]},
                                  {"name": "numeric", "datatype": "FP32", "shape": [-1, 6]}]
    response = client.get("/v2/models/regex_model")
    assert response.json()["inputs"][0] == {"name": "pattern", "datatype": "BYTES", "shape": []}
    response = client.get(f"{MULTI_IO}/versions/7")
    assert response.status_code == 404 and "error" in response.json()


def test_json_nested_and_flat_data_with_the_request_id(server: ServerProcess) -> None:
    for nested in (True, False):
        inputs, expected = multi_io_inputs(nested)
        response = infer(server, {"id": "abc", "inputs": inputs})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        assert HEADER_LENGTH not in response.headers
        body = response.json()
        assert (body["model_name"], body["model_version"], body["id"]) == (
            "functional_multi_io", "1", "abc")
        for output in body["outputs"]:
            want = expected[output["name"]]
            assert output["datatype"] == "FP32" and output["shape"] == list(want.shape)
            got = np.array(output["data"], np.float32).reshape(want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    response = infer(server, {"inputs": multi_io_inputs()[0]})
    assert "id" not in response.json()


def binary_request(header: dict[str, Any], *parts: bytes) -> tuple[bytes, dict[str, str]]:
    text = json.dumps(header).encode()
    return text + b"".join(parts), {"Inference-Header-Content-Length": str(len(text))}


def split_response(response: httpx.Response) -> tuple[dict[str, Any], bytes]:
    length = int(response.headers[HEADER_LENGTH])
    assert response.headers["content-type"] == "application/octet-stream"
    return json.loads(response.content[:length]), response.content[length:]


def bytes_elements(data: bytes) -> list[bytes]:
    elements, offset = [], 0
    while offset < len(data):
        (size,) = struct.unpack_from("<I", data, offset)
        elements.append(data[offset + 4 : offset + 4 + size])
        offset += 4 + size
    return elements


def test_binary_data_both_ways_by_hand(server: ServerProcess) -> None:
    case = CASES[("regex_model", "serving_default", "batch4")]
    text = case["in"]["text"].tolist() + [b"\xff\xfe!"]  # not UTF-8, and unmarked
    raw_text = b"".join(struct.pack("<I", len(t)) + t for t in text)
    header = {
        "inputs": [
            {"name": "text", "shape": [len(text)], "datatype": "BYTES",
             "parameters": {"binary_data_size": len(raw_text)}},
            {"name": "pattern", "shape": [], "datatype": "BYTES", "data": ["(a+)+$"]},
        ],
        "parameters": {"binary_data_output": True},
        "outputs": [{"name": "matches", "parameters": {"binary_data": False}},
                    {"name": "is_word"}, {"name": "marked"}],
    }
    body, headers = binary_request(header, raw_text)
    response = server.client.post("/v2/models/regex_model/infer", content=body, headers=headers)
    assert response.status_code == 200, response.text
    head, binary = split_response(response)
    outputs = {o["name"]: o for o in head["outputs"]}
    assert outputs["matches"]["data"] == case["out"]["matches"].tolist() + [False]
    size = outputs["is_word"]["parameters"]["binary_data_size"]
    assert size == len(text)  # a byte per BOOL
    assert list(binary[:size]) == case["out"]["is_word"].tolist() + [False]
    assert bytes_elements(binary[size:]) == case["out"]["marked"].tolist() + [b"\xff\xfe!"]
    # Not UTF-8, so binary even when asked for as JSON; the rest stays JSON.
    header.pop("parameters")
    header["outputs"] = [{"name": "marked"}, {"name": "matches"}]
    body, headers = binary_request(header, raw_text)
    response = server.client.post("/v2/models/regex_model/infer", content=body, headers=headers)
    head, binary = split_response(response)
    marked, matches = head["outputs"]
    assert "data" not in marked and marked["parameters"]["binary_data_size"] == len(binary)
    assert bytes_elements(binary)[-1] == b"\xff\xfe!"
    assert matches["data"] == case["out"]["matches"].tolist() + [False]


def test_signature_selection_and_output_choice(server: ServerProcess) -> None:
    case = CASES[("multi_signature", "segment_stats", "batch6")]
    data, segment = case["in"]["data"], case["in"]["segment"]
    body, headers = binary_request({
        "parameters": {"signature_name": "segment_stats"},
        "inputs": [
            {"name": "data", "shape": list(data.shape), "datatype": "FP32",
             "parameters": {"binary_data_size": data.nbytes}},
            {"name": "segment", "shape": list(segment.shape), "datatype": "INT32",
             "parameters": {"binary_data_size": segment.nbytes}},
        ],
        "outputs": [{"name": "largest", "parameters": {"binary_data": True}}],
    }, data.astype("<f4").tobytes(), segment.astype("<i4").tobytes())
    response = server.client.post("/v2/models/multi_signature/infer", content=body,
                                  headers=headers)
    head, binary = split_response(response)
    (largest,) = head["outputs"]
    assert (largest["name"], largest["shape"]) == ("largest", [4, 3])
    np.testing.assert_array_equal(np.frombuffer(binary, "<f4").reshape(4, 3),
                                  case["out"]["largest"])


def test_compressed_bodies(server: ServerProcess) -> None:
    inputs, expected = multi_io_inputs()
    plain = json.dumps({"inputs": inputs}).encode()
    for coding, packed in (("gzip", gzip.compress(plain)), ("deflate", zlib.compress(plain)),
                           ("deflate", zlib.compress(plain)[2:-4])):  # raw deflate too
        for accept in ("gzip", "deflate", "br;q=1, gzip;q=0.5", "identity"):
            response = server.client.post(
                f"{MULTI_IO}/infer", content=packed,
                headers={"Content-Encoding": coding, "Accept-Encoding": accept})
            assert response.status_code == 200, response.text
            # httpx inflates what it asked for; the header says what was sent.
            sent = response.headers.get("content-encoding")
            assert sent == {"identity": None, "deflate": "deflate"}.get(accept, "gzip")
            outputs = {o["name"]: o["data"] for o in response.json()["outputs"]}
            np.testing.assert_allclose(np.reshape(outputs["probability"], (4, 1)),
                                       expected["probability"], rtol=1e-5, atol=1e-6)
    truncated = gzip.compress(plain)[:-9]
    for coding, packed in (("gzip", b"not gzip"), ("br", plain), ("gzip", truncated)):
        response = server.client.post(f"{MULTI_IO}/infer", content=packed,
                                      headers={"Content-Encoding": coding})
        assert response.status_code == 400 and coding in response.json()["error"], coding


def test_large_requests(server: ServerProcess) -> None:
    """Bodies and answers large enough to be parsed, encoded and compressed off the event
    loop: the batch of four recorded rows, repeated."""
    case = CASES[("functional_multi_io", "serving_default", "batch4")]
    repeat = 1500
    numeric = np.tile(case["in"]["numeric"], (repeat, 1))
    category = np.tile(case["in"]["category"], (repeat, 1))
    expected = {name: np.tile(array, (repeat, 1)) for name, array in case["out"].items()}
    inputs = [
        {"name": "numeric", "shape": list(numeric.shape), "datatype": "FP32",
         "data": numeric.reshape(-1).tolist()},
        {"name": "category", "shape": list(category.shape), "datatype": "INT64",
         "data": category.reshape(-1).tolist()},
    ]
    # The repeated rows compress to little; a member the protocol does not know (ignored)
    # that does not compress makes the body large on the wire too.
    noise = np.random.default_rng(0).bytes(24 << 10).hex()
    packed = gzip.compress(json.dumps({"inputs": inputs, "noise": noise}).encode())
    assert len(packed) > 16 << 10
    response = server.client.post(f"{MULTI_IO}/infer", content=packed, headers={
        "Content-Encoding": "gzip", "Accept-Encoding": "gzip"})
    assert response.status_code == 200, response.text
    assert response.headers["content-encoding"] == "gzip"
    for output in response.json()["outputs"]:
        want = expected[output["name"]]
        got = np.array(output["data"], np.float32).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for spec, array in zip(inputs, (numeric, category), strict=True):
        spec.pop("data")
        spec["parameters"] = {"binary_data_size": array.nbytes}
    body, headers = binary_request({"inputs": inputs, "outputs": [
        {"name": "class_scores", "parameters": {"binary_data": True}}]},
        numeric.tobytes(), category.tobytes())
    response = server.client.post(f"{MULTI_IO}/infer", content=body, headers=headers)
    head, binary = split_response(response)
    assert head["outputs"][0]["shape"] == [4 * repeat, 3]
    np.testing.assert_allclose(np.frombuffer(binary, "<f4").reshape(-1, 3),
                               expected["class_scores"], rtol=1e-5, atol=1e-6)


def test_limits(server: ServerProcess) -> None:
    inputs, _ = multi_io_inputs()
    big = json.dumps({"inputs": inputs, "pad": "x" * MAX_BODY_BYTES}).encode()
    response = server.client.post(f"{MULTI_IO}/infer", content=big)
    assert response.status_code == 413 and "larger than" in response.json()["error"]
    response = server.client.post(f"{MULTI_IO}/infer", content=gzip.compress(big),
                                  headers={"Content-Encoding": "gzip"})
    assert response.status_code == 413
    values = np.zeros(MAX_TENSOR_BYTES // 4 + 1, np.float32)
    body, headers = binary_request({"parameters": {"signature_name": "histogram"}, "inputs": [
        {"name": "values", "shape": [values.size], "datatype": "FP32",
         "parameters": {"binary_data_size": values.nbytes}}]}, values.tobytes())
    response = server.client.post("/v2/models/multi_signature/infer", content=body,
                                  headers=headers)
    assert response.status_code == 429 and "bytes" in response.json()["error"]
    assert infer(server, {"inputs": inputs}).status_code == 200  # still serving


def error_of(response: httpx.Response) -> tuple[int, str]:
    assert response.headers["content-type"] == "application/json"
    return response.status_code, str(response.json()["error"])


def with_input(change: dict[str, Any], index: int = 0) -> dict[str, Any]:
    inputs, _ = multi_io_inputs()
    inputs[index] = {**inputs[index], **change}
    return {"inputs": inputs}


ERRORS = {
    "bad datatype": (with_input({"datatype": "FLOAT32"}), 400, "unknown datatype 'FLOAT32'"),
    "wrong datatype": (with_input({"datatype": "FP64"}), 400, "expects FP32"),
    "wrong element count": (with_input({"shape": [4, 5]}), 400, "24 values given"),
    "ragged data": (with_input({"data": [[1.0], [1.0, 2.0]]}), 400, "not a regular array"),
    "float for an integer": (with_input({"data": [[1.5]] * 4}, 1), 400, "INT64 data holds"),
    "negative shape": (with_input({"shape": [-1, 6]}), 400, "'shape'"),
    "no data": (with_input({"data": None}), 400, "has no data"),
    "unknown input": (with_input({"name": "nope"}), 400, "nope"),
    "missing input": ({"inputs": multi_io_inputs()[0][:1]}, 400, "category"),
    "no inputs": ({}, 400, "'inputs'"),
    "unknown signature": ({**with_input({}), "parameters": {"signature_name": "nope"}}, 400,
                          "no signature 'nope'"),
    "signature not a string": ({**with_input({}), "parameters": {"signature_name": 3}}, 400,
                               "signature_name"),
    "unknown output": ({**with_input({}), "outputs": [{"name": "nope"}]}, 400,
                       "output tensor alias not found in signature: nope"),
    "classification": ({**with_input({}), "outputs": [
        {"name": "probability", "parameters": {"classification": 2}}]}, 400, "classification"),
    "id not a string": ({**with_input({}), "id": 5}, 400, "'id'"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_infer_errors(server: ServerProcess, name: str) -> None:
    body, status, message = ERRORS[name]
    got_status, got = error_of(infer(server, body))
    assert got_status == status and message in got, got


def test_wire_errors(server: ServerProcess) -> None:
    client = server.client
    status, message = error_of(client.post(f"{MULTI_IO}/infer", content=b"{\"inputs\": ["))
    assert status == 400 and "JSON Parse error" in message
    status, message = error_of(client.post(f"{MULTI_IO}/infer", content=b"[1, 2]"))
    assert status == 400 and "JSON object" in message
    inputs, _ = multi_io_inputs()
    plain = json.dumps({"inputs": inputs}).encode()
    for value in ("abc", "-1", str(len(plain) + 1)):
        response = client.post(f"{MULTI_IO}/infer", content=plain,
                               headers={"Inference-Header-Content-Length": value})
        status, message = error_of(response)
        assert status == 400 and "Inference-Header-Content-Length" in message, value
    # Binary sizes that do not add up to the binary data.
    header = with_input({"data": None, "parameters": {"binary_data_size": 96}})
    header["inputs"][0].pop("data")
    for extra in (b"\0" * 95, b"\0" * 97):
        body, headers = binary_request(header, extra)
        status, message = error_of(client.post(f"{MULTI_IO}/infer", content=body,
                                               headers=headers))
        assert status == 400 and "binary data" in message, len(extra)
    status, message = error_of(client.post("/v2/models/nope/infer", json=with_input({})))
    assert status == 404 and "nope" in message
    status, message = error_of(client.post(f"{MULTI_IO}/versions/nolabel/infer",
                                           json=with_input({})))
    assert status in (400, 404) and "nolabel" in message
    for path in ("/v2/nope", "/v2/models", "/v2/models/x/versions", "/v2/models/x/stats",
                 "/v2/repository/index"):
        status, message = error_of(client.get(path))
        assert status == 404, path
    response = client.get(f"{MULTI_IO}/infer")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    response = client.post("/v2/health/ready")
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"


def test_version_labels(server: ServerProcess) -> None:
    case = CASES[("keras_string_lookup", "serving_default", "batch1")]
    color = case["in"]["color"]
    body = {"inputs": [{"name": "color", "shape": list(color.shape), "datatype": "BYTES",
                        "data": [v.decode() for v in color.reshape(-1).tolist()]}]}
    for version in ("", f"/versions/{LABEL}", "/versions/1"):
        response = infer(server, body, f"/v2/models/keras_string_lookup{version}")
        assert response.status_code == 200, response.text
        outputs = {o["name"]: o["data"] for o in response.json()["outputs"]}
        assert outputs["ids"] == case["out"]["ids"].reshape(-1).tolist()
        assert response.json()["model_version"] == "1"


def test_cors(server: ServerProcess) -> None:
    response = server.client.options(f"{MULTI_IO}/infer", headers={
        "Origin": "http://example.com", "Access-Control-Request-Method": "POST"})
    assert response.status_code == 200
    assert "Inference-Header-Content-Length" in response.headers["access-control-allow-headers"]
    response = server.client.get("/v2/health/live")
    assert response.headers["access-control-allow-origin"] == "*"
    assert "Inference-Header-Content-Length" in response.headers["access-control-expose-headers"]


def scrape(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = server.client.get(METRICS_PATH)
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_infer_counts_in_the_request_metrics(server: ServerProcess) -> None:
    count = ":tensorflow:serving:request_count_total"
    latency = ":tensorflow:serving:request_latency_count"
    model = "functional_multi_io"
    keys = [(count, (("model_name", model), ("status", "OK"))),
            (count, (("model_name", model), ("status", "INVALID_ARGUMENT"))),
            (latency, (("API", "infer"), ("entrypoint", "REST"), ("model_name", model)))]
    before = scrape(server)
    inputs, _ = multi_io_inputs()
    for _ in range(3):
        assert infer(server, {"inputs": inputs}).status_code == 200
    assert infer(server, {"inputs": inputs[:1]}).status_code == 400
    for path in ("/v2/health/ready", MULTI_IO, f"{MULTI_IO}/ready"):  # not counted
        assert server.client.get(path).status_code == 200
    after = scrape(server)
    assert [after.get(k, 0) - before.get(k, 0) for k in keys] == [3, 1, 3]


# -- the codec's corners, without a server -------------------------------------------------------


def test_non_finite_floats_and_bfloat16_in_json() -> None:
    values = np.array([[1.5, np.nan], [np.inf, -np.inf]], np.float32)
    response = InferResponse("m", "3", "", [
        InferOutput("y", "FP32", values),
        InferOutput("h", "FP16", values.astype(np.float16)),
        InferOutput("b", "BF16", np.array([0.1, 2.0], ml_dtypes.bfloat16)),
    ])
    body, json_length = encode_infer_response(response, InferBody(InferRequest("m", "", [])))
    assert json_length is None
    assert body.count(b'"data":[1.5,NaN,Infinity,-Infinity]') == 2
    assert b'"data":[0.100097656,2.0]' in body  # float32's shortest text of bfloat16's 0.1
    parsed = json.loads(body)  # Python's json reads the tokens, as Triton's clients do
    assert parsed["model_version"] == "3" and "id" not in parsed
    assert np.array_equal(np.array(parsed["outputs"][0]["data"], np.float32),
                          values.reshape(-1), equal_nan=True)


def test_accepted_encodings() -> None:
    assert accepted(None) is None and accepted(b"br") is None and accepted(b"gzip;q=0") is None
    assert accepted(b"gzip, deflate") == "gzip" and accepted(b"*") == "gzip"
    assert accepted(b"gzip;q=0.5, deflate") == "deflate"
