"""TensorFlow Serving's own test models, served by the real daemon on loopback, answer as
TensorFlow Serving's own tests expect: ``tensorflow_model_server_test.py`` (over REST, and over
gRPC through the official ``tensorflow-serving-api`` stubs in TensorFlow's environment),
``http_rest_api_handler_test.cc`` (the two-version model with a version label) and
``predict_impl_test.cc`` (the stateful counter). Expected values are theirs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf import text_format

from protos.tensorflow.core.example import example_pb2
from protos.tensorflow_serving.apis import model_management_pb2, model_service_pb2_grpc
from tests.serving.rest.server_process import GRAPHSERVE, ServerProcess
from tests.serving.support import REPO

FIXTURES = REPO / "tests" / "fixtures" / "tfserving"
TF_PYTHON = REPO / ".venv-tf" / "bin" / "python"
CLIENT = REPO / "tests" / "serving" / "grpc" / "tf_client.py"
TWO_VERSIONS = "saved_model_half_plus_two_2_versions"  # http_rest_api_handler_test's name
LABEL = "Version_Label"  # ... and its label, on version 123
ALL_VERSIONS = "two_versions_all"  # the same model, with the `all` version policy
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"

MODELS = {
    "default": ("saved_model_half_plus_two_cpu", ""),
    "tf2": ("saved_model_half_plus_two_tf2_cpu", ""),
    "half_plus_three": ("saved_model_half_plus_three", ""),
    TWO_VERSIONS: ("saved_model_half_plus_two_2_versions",
                   "model_version_policy { specific { versions: 123 } }"),
    ALL_VERSIONS: ("saved_model_half_plus_two_2_versions", "model_version_policy { all {} }"),
    "counter": ("saved_model_counter", ""),
}
LABELS = {TWO_VERSIONS: {LABEL: 123}, ALL_VERSIONS: {"stable": 123, "canary": 124}}


def model_config(labels: dict[str, dict[str, int]]) -> str:
    entries = []
    for name, (directory, policy) in MODELS.items():
        label_text = "".join(
            f' version_labels {{ key: "{k}" value: {v} }}' for k, v in labels.get(name, {}).items()
        )
        entries.append(
            f'config {{ name: "{name}" base_path: "{FIXTURES / directory}" '
            f'model_platform: "tensorflow" {policy}{label_text} }}'
        )
    return "model_config_list {\n" + "\n".join(entries) + "\n}\n"


def sorted_object(obj: Any) -> Any:
    """TensorFlow Serving's SortedObject: compare JSON ignoring list order."""
    if isinstance(obj, dict):
        return sorted((k, sorted_object(v)) for k, v in obj.items())
    if isinstance(obj, list):
        return sorted(sorted_object(x) for x in obj)
    return obj


def without_defaults(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: without_defaults(v) for k, v in obj.items() if k != "defaults"}
    return obj


def load_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One daemon serving every model. As in TensorFlow Serving's handler test, the version
    labels arrive by a config reload once the versions are AVAILABLE."""
    config = tmp_path_factory.mktemp("tfserving") / "models.config"
    config.write_text(model_config({}))
    server = ServerProcess([f"--model_config_file={config}"], list(MODELS))
    try:
        request = model_management_pb2.ReloadConfigRequest()
        text_format.Parse(model_config(LABELS), request.config)
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = model_service_pb2_grpc.ModelServiceStub(channel)
            response = stub.HandleReloadConfigRequest(request, timeout=60)
        assert response.status.error_code == 0, response.status.error_message
        yield server
    finally:
        assert server.stop() == 0, server.output()


# --- REST, as tensorflow_model_server_test.py -----------------------------------------------


def post(server: ServerProcess, path: str, body: Any) -> tuple[int, Any]:
    response = server.client.post(f"/v1/models/{path}", json=body)
    return response.status_code, response.json()


def get(server: ServerProcess, path: str) -> tuple[int, Any]:
    response = server.client.get(f"/v1/models/{path}")
    return response.status_code, response.json()


@pytest.mark.parametrize("model", ["default", "tf2"])
def test_rest_predict_classify_regress(server: ServerProcess, model: str) -> None:
    instances = [2.0] if model == "tf2" else [2.0, 3.0, 4.0]  # the TF2 signature takes x: [1]
    expected = [0.5 * x + 2 for x in instances]
    assert post(server, f"{model}:predict", {"instances": instances}) == (
        200, {"predictions": expected})
    assert post(server, f"{model}:predict", {"inputs": instances}) == (
        200, {"outputs": expected})
    assert post(server, f"{model}:classify",
                {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}) == (
        200, {"results": [[["", 3.0]]]})
    assert post(server, f"{model}:regress",
                {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}) == (
        200, {"results": [3.0]})


def test_rest_status_and_metadata(server: ServerProcess) -> None:
    assert get(server, "default") == (200, {
        "model_version_status": [{
            "version": "123",
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }]
    })
    status, metadata = get(server, "default/metadata")
    assert status == 200
    assert sorted_object(metadata) == sorted_object(load_json("half_plus_two_model_metadata.json"))


def test_rest_tf2_metadata(server: ServerProcess) -> None:
    """The recorded TF2 metadata predates SignatureDef.defaults; all else matches exactly."""
    status, metadata = get(server, "tf2/metadata")
    assert status == 200
    recorded = load_json("saved_model_half_plus_two_tf2_2_versions_metadata.json")
    assert metadata["model_spec"] == {"name": "tf2", "signature_name": "", "version": "123"}
    assert without_defaults(metadata["metadata"]) == without_defaults(recorded["metadata"])
    signatures = metadata["metadata"]["signature_def"]["signature_def"]
    # The export script's `predict(self, x=tf.constant([0], shape=[1]))`.
    default_x = signatures["serving_default"]["defaults"]["x"]
    assert default_x["dtype"] == "DT_FLOAT" and default_x["float_val"] == [0.0]
    assert default_x["tensor_shape"]["dim"] == [{"size": "1", "name": ""}]


def test_rest_half_plus_three(server: ServerProcess) -> None:
    assert post(server, "half_plus_three:predict", {"instances": [2.0, 3.0]}) == (
        200, {"predictions": [4.0, 4.5]})


# --- REST, as http_rest_api_handler_test.cc ---------------------------------------------------


def test_handler_predict(server: ServerProcess) -> None:
    m = TWO_VERSIONS
    assert post(server, f"{m}:predict", {"instances": [[1.0, 2.0], [3.0, 4.0]]}) == (
        200, {"predictions": [[2.5, 3.0], [3.5, 4.0]]})
    assert post(server, f"{m}/versions/123:predict", {"instances": [1.0, 2.0]}) == (
        200, {"predictions": [2.5, 3.0]})
    assert post(server, f"{m}/labels/{LABEL}:predict", {"instances": [1.0, 2.0]}) == (
        200, {"predictions": [2.5, 3.0]})
    assert post(server, f"{m}/versions/123:predict",
                {"signature_name": "serving_default", "instances": [3.0, 4.0]}) == (
        200, {"predictions": [3.5, 4.0]})
    assert post(server, f"{m}/versions/123:predict",
                {"signature_name": "serving_default", "inputs": [3.0, 4.0]}) == (
        200, {"outputs": [3.5, 4.0]})


def test_handler_regress_and_classify(server: ServerProcess) -> None:
    m = TWO_VERSIONS
    regress = {"signature_name": "regress_x_to_y", "examples": [{"x": 80.0}]}
    for path in (m, f"{m}/versions/123", f"{m}/labels/{LABEL}"):
        assert post(server, f"{path}:regress", regress) == (200, {"results": [42]})
    assert post(server, f"{m}:classify",
                {"signature_name": "classify_x_to_y", "examples": [{"x": 20.0}]}) == (
        200, {"results": [[["", 12]]]})
    assert post(server, f"{m}/labels/{LABEL}:classify",
                {"signature_name": "classify_x_to_y", "examples": [{"x": 10.0}]}) == (
        200, {"results": [[["", 7]]]})


def test_handler_status_and_metadata(server: ServerProcess) -> None:
    m = TWO_VERSIONS
    expected = {"model_version_status": [{
        "version": "123", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""},
    }]}
    for path in (m, f"{m}/versions/123", f"{m}/labels/{LABEL}"):
        assert get(server, path) == (200, expected)
    # CompareJson: exact equality (object members in any order).
    assert get(server, f"{m}/metadata") == (
        200, load_json("saved_model_half_plus_two_2_versions_metadata.json"))


def test_handler_errors(server: ServerProcess) -> None:
    m = TWO_VERSIONS
    for path in ("foo:predict", "foo/versions/50:predict", f"{m}99:predict"):
        status, _ = post(server, path, {"instances": [1]})
        assert status == 404, path

    def error(body: str, path: str = f"{m}:predict") -> tuple[int, str]:
        response = server.client.post(f"/v1/models/{path}", content=body)
        return response.status_code, str(response.json()["error"])

    status, message = error("")
    assert status == 400 and "JSON Parse error: The document is empty" in message
    status, message = error("instances = [1, 2]")
    assert status == 400 and "JSON Parse error: Invalid value" in message
    status, message = error('{ "instances": ["x", "y"] }')
    assert status == 400 and "not of expected type: float" in message
    status, message = error('{ "instances": ["x", "y"] }', f"{m}/labels/nope:predict")
    assert status == 400 and "Unrecognized servable version label" in message
    status, message = error('{ "signature_name": 100 }')
    assert status == 400 and "'signature_name' key must be a string value." in message


def test_two_versions_with_the_all_policy(server: ServerProcess) -> None:
    status, body = get(server, ALL_VERSIONS)
    assert status == 200
    assert sorted((v["version"], v["state"]) for v in body["model_version_status"]) == [
        ("123", "AVAILABLE"), ("124", "AVAILABLE")]
    for path in ("versions/123", "versions/124", "labels/stable", "labels/canary"):
        assert post(server, f"{ALL_VERSIONS}/{path}:predict", {"instances": [1.0]}) == (
            200, {"predictions": [2.5]}), path
    status, metadata = get(server, f"{ALL_VERSIONS}/labels/canary/metadata")
    assert status == 200 and metadata["model_spec"]["version"] == "124"


def test_rest_counter(server: ServerProcess) -> None:
    """A signature without inputs cannot be called over REST, in TensorFlow Serving either (its
    JSON request needs an input map); one with inputs changes the state."""
    status, body = post(server, "counter:predict", {"signature_name": "get_counter", "inputs": {}})
    assert (status, body) == (400, {"error": "Failed to get input map for signature: get_counter"})

    def incr_by(delta: float) -> float:
        status, body = post(server, "counter:predict",
                            {"signature_name": "incr_counter_by", "inputs": {"delta": delta}})
        assert status == 200, body
        return float(body["outputs"])

    first = incr_by(2.0)
    assert incr_by(2.0) == first + 2.0
    # Back to where it was, so the gRPC sequence sees the counter at 0 whatever the test order.
    assert incr_by(-4.0) == first - 2.0


# --- gRPC through the official client -------------------------------------------------------


def serialized_examples(*xs: float) -> np.ndarray:
    out = []
    for x in xs:
        example = example_pb2.Example()
        example.features.feature["x"].float_list.value.append(x)
        out.append(example.SerializeToString())
    # numpy's fixed-width bytes would drop a trailing NUL; these end in a float's exponent byte.
    assert not any(data.endswith(b"\x00") for data in out)
    return np.array(out)


def grpc_plan() -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    arrays = {
        "x": np.array([2.0], dtype=np.float32),  # VerifyPredictRequest: float_val 2.0, dim [1]
        "delta": np.array(3.0, dtype=np.float32),  # predict_impl_test: float_val 3, no shape
        "x=2": serialized_examples(2.0),
        "x=80": serialized_examples(80.0),
        "x=20": serialized_examples(20.0),
    }
    calls: list[dict[str, Any]] = []
    x = {"x": "x"}
    for name in ("default", "tf2", "half_plus_three"):
        spec = {"name": name, "signature_name": "serving_default"}
        calls.append({"id": f"predict/{name}/filter", "rpc": "Predict", "spec": spec,
                      "inputs": x, "output_filter": ["y"]})
        calls.append({"id": f"predict/{name}", "rpc": "Predict", "spec": spec, "inputs": x})
    for name in ("default", "tf2"):
        for signature, rpc in (("classify_x_to_y", "Classify"), ("regress_x_to_y", "Regress")):
            calls.append({"id": f"{rpc}/{name}", "rpc": rpc, "examples": "x=2",
                          "spec": {"name": name, "signature_name": signature}})
        calls.append({"id": f"MultiInference/{name}", "rpc": "MultiInference", "examples": "x=2",
                      "tasks": [
                          {"spec": {"name": name, "signature_name": "regress_x_to_y"},
                           "method_name": REGRESS},
                          {"spec": {"name": name, "signature_name": "classify_x_to_y"},
                           "method_name": CLASSIFY}]})
        calls.append({"id": f"metadata/{name}", "rpc": "GetModelMetadata",
                      "spec": {"name": name}})
    calls.append({"id": f"metadata/{TWO_VERSIONS}", "rpc": "GetModelMetadata",
                  "spec": {"name": TWO_VERSIONS}})
    calls.append({"id": "status/default", "rpc": "GetModelStatus", "spec": {"name": "default"}})
    calls.append({"id": f"status/{ALL_VERSIONS}", "rpc": "GetModelStatus",
                  "spec": {"name": ALL_VERSIONS}})
    for key, where in (("v123", {"version": 123}), ("v124", {"version": 124}),
                       ("stable", {"version_label": "stable"}),
                       ("canary", {"version_label": "canary"})):
        calls.append({"id": f"predict/{ALL_VERSIONS}/{key}", "rpc": "Predict",
                      "spec": {"name": ALL_VERSIONS, **where}, "inputs": x})
    calls.append({"id": f"regress/{ALL_VERSIONS}/v123", "rpc": "Regress", "examples": "x=80",
                  "spec": {"name": ALL_VERSIONS, "version": 123,
                           "signature_name": "regress_x_to_y"}})
    calls.append({"id": f"classify/{ALL_VERSIONS}/canary", "rpc": "Classify",
                  "examples": "x=20", "spec": {"name": ALL_VERSIONS, "version_label": "canary",
                                               "signature_name": "classify_x_to_y"}})
    # predict_impl_test.cc's PredictionWithCustomizedSignatures, in its order.
    for i, (signature, inputs, output_filter) in enumerate([
        ("get_counter", {}, []),
        ("incr_counter", {}, []),
        ("reset_counter", {}, []),
        ("incr_counter", {}, ["output"]),
        ("incr_counter_by", {"delta": "delta"}, []),
    ]):
        calls.append({"id": f"counter/{i}/{signature}", "rpc": "Predict", "inputs": inputs,
                      "spec": {"name": "counter", "version": 123, "signature_name": signature},
                      "output_filter": output_filter})
    return arrays, calls


@pytest.fixture(scope="module")
def official_client(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]]:
    """Every gRPC call of the plan, made by tensorflow-serving-api in TensorFlow's environment;
    (results by call id, output arrays)."""
    if not TF_PYTHON.exists():
        pytest.skip("needs TensorFlow's environment (.venv-tf)")
    # The counter's calls run once, in order; the REST test leaves the counter as it found it.
    work = tmp_path_factory.mktemp("official_client")
    arrays, calls = grpc_plan()
    np.savez(work / "in.npz", **arrays)
    (work / "plan.json").write_text(json.dumps({
        "address": f"127.0.0.1:{server.grpc_port}", "arrays": str(work / "in.npz"),
        "out_arrays": str(work / "out.npz"), "calls": calls,
    }))
    run = subprocess.run([str(TF_PYTHON), str(CLIENT), str(work / "plan.json")],
                         check=False, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-5000:]
    results = {r["id"]: r for r in json.loads(run.stdout)}
    assert list(results) == [c["id"] for c in calls]
    with np.load(work / "out.npz", allow_pickle=False) as data:
        outputs = {key: data[key] for key in data.files}
    return results, outputs


def ok(official_client: Any, call_id: str) -> dict[str, Any]:
    result: dict[str, Any] = official_client[0][call_id]
    assert (result["code"], result["details"]) == ("OK", ""), call_id
    return result


def output(official_client: Any, call_id: str, alias: str) -> np.ndarray:
    result = ok(official_client, call_id)
    info = result["outputs"][alias]
    # TensorFlow Serving answers with typed fields (float_val), not tensor_content.
    assert info["dtype"] == "DT_FLOAT" and not info["in_tensor_content"], (call_id, info)
    return official_client[1][info["key"]]


@pytest.mark.parametrize(("name", "expected"), [
    ("default", 3.0), ("tf2", 3.0), ("half_plus_three", 4.0)])
def test_grpc_predict(official_client: Any, name: str, expected: float) -> None:
    """VerifyPredictRequest: one float 2.0 in, y = [expected] out, with and without a filter."""
    for call_id in (f"predict/{name}/filter", f"predict/{name}"):
        result = ok(official_client, call_id)
        assert sorted(result["outputs"]) == ["y"]
        assert output(official_client, call_id, "y").tolist() == [expected]
        assert result["spec"] == {"name": name, "version": 123,
                                  "signature_name": "serving_default"}


@pytest.mark.parametrize("name", ["default", "tf2"])
def test_grpc_classify_regress_multi_inference(official_client: Any, name: str) -> None:
    classify = ok(official_client, f"Classify/{name}")
    assert classify["classes"] == [[["", 3.0]]]
    assert classify["spec"] == {"name": name, "version": 123, "signature_name": "classify_x_to_y"}
    regress = ok(official_client, f"Regress/{name}")
    assert regress["values"] == [3.0]
    assert regress["spec"] == {"name": name, "version": 123, "signature_name": "regress_x_to_y"}
    results = ok(official_client, f"MultiInference/{name}")["results"]
    assert [r["kind"] for r in results] == ["regression_result", "classification_result"]
    assert results[0]["values"] == [3.0] and results[1]["classes"] == [[["", 3.0]]]
    assert [r["spec"] for r in results] == [
        {"name": name, "version": 123, "signature_name": "regress_x_to_y"},
        {"name": name, "version": 123, "signature_name": "classify_x_to_y"}]


def recorded_signatures(name: str) -> dict[str, Any]:
    """A recorded REST metadata file's signatures, in tf_client's form."""
    def info(tensor: dict[str, Any]) -> dict[str, Any]:
        shape = tensor["tensor_shape"]
        return {"name": tensor["name"], "dtype": tensor["dtype"],
                "shape": None if shape["unknown_rank"] else [int(d["size"]) for d in shape["dim"]]}

    signatures = load_json(name)["metadata"]["signature_def"]["signature_def"]
    return {
        key: {"method_name": sig["method_name"],
              "inputs": {a: info(t) for a, t in sig["inputs"].items()},
              "outputs": {a: info(t) for a, t in sig["outputs"].items()}}
        for key, sig in signatures.items()
    }


@pytest.mark.parametrize(("name", "recorded"), [
    ("default", "half_plus_two_model_metadata.json"),
    ("tf2", "saved_model_half_plus_two_tf2_2_versions_metadata.json"),
    (TWO_VERSIONS, "saved_model_half_plus_two_2_versions_metadata.json"),
])
def test_grpc_metadata(official_client: Any, name: str, recorded: str) -> None:
    """testGetModelMetadata, and the signatures against the recorded metadata."""
    result = ok(official_client, f"metadata/{name}")
    assert result["spec"] == {"name": name, "version": 123, "signature_name": ""}
    assert result["metadata_keys"] == ["signature_def"]
    assert result["type_url"] == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    assert result["signatures"] == recorded_signatures(recorded)


def test_grpc_status(official_client: Any) -> None:
    assert ok(official_client, "status/default")["versions"] == [
        {"version": 123, "state": "AVAILABLE", "error_code": 0, "error_message": ""}]
    versions = ok(official_client, f"status/{ALL_VERSIONS}")["versions"]
    assert sorted((v["version"], v["state"], v["error_code"]) for v in versions) == [
        (123, "AVAILABLE", 0), (124, "AVAILABLE", 0)]


def test_grpc_two_versions_and_labels(official_client: Any) -> None:
    for key, version in (("v123", 123), ("v124", 124), ("stable", 123), ("canary", 124)):
        call_id = f"predict/{ALL_VERSIONS}/{key}"
        assert output(official_client, call_id, "y").tolist() == [3.0]
        assert ok(official_client, call_id)["spec"]["version"] == version
    assert ok(official_client, f"regress/{ALL_VERSIONS}/v123")["values"] == [42.0]
    classify = ok(official_client, f"classify/{ALL_VERSIONS}/canary")
    assert classify["classes"] == [[["", 12.0]]] and classify["spec"]["version"] == 124


def test_grpc_counter(official_client: Any) -> None:
    """get 0, incr 1, reset 0, incr (with an output filter) 1, incr_by 3 -> 4; each a scalar."""
    expected = [0.0, 1.0, 0.0, 1.0, 4.0]
    signatures = ["get_counter", "incr_counter", "reset_counter", "incr_counter",
                  "incr_counter_by"]
    for i, (signature, value) in enumerate(zip(signatures, expected)):
        call_id = f"counter/{i}/{signature}"
        got = output(official_client, call_id, "output")
        assert got.shape == () and float(got) == value, (call_id, got)
        assert ok(official_client, call_id)["spec"] == {
            "name": "counter", "version": 123, "signature_name": signature}


# --- model config files (testGoodModelConfig, testBadModelConfig) ---------------------------


def test_good_model_config(tmp_path: Path) -> None:
    template = (FIXTURES / "good_model_config.txt").read_text()
    config = tmp_path / "good_model_config.conf"
    config.write_text(
        template.replace("${TEST_HALF_PLUS_TWO_DIR}",
                         str(FIXTURES / "saved_model_half_plus_two_cpu"))
        .replace("${TEST_HALF_PLUS_THREE_DIR}", str(FIXTURES / "saved_model_half_plus_three"))
    )
    server = ServerProcess([f"--model_config_file={config}"], ["half_plus_two", "half_plus_three"])
    try:
        for name, expected in (("half_plus_two", 3.0), ("half_plus_three", 4.0)):
            response = server.client.post(f"/v1/models/{name}:predict", json={"instances": [2.0]})
            assert response.json() == {"predictions": [expected]}
    finally:
        assert server.stop() == 0, server.output()


def test_bad_model_config() -> None:
    run = subprocess.run(
        [str(GRAPHSERVE), "--port=0", "--rest_api_port=0",
         f"--model_config_file={FIXTURES / 'bad_model_config.txt'}"],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode != 0
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in run.stderr
