"""The Open Inference Protocol over gRPC (``inference.GRPCInferenceService``) on the real daemon,
on the port TensorFlow Serving's services use.

Triton's own client (``tritonclient`` in ``.venv-triton``, driven by ``triton_client.py`` with a
plan, in a subprocess) makes the health, metadata and inference calls on fixture models whose
outputs TensorFlow recorded (``expected.npz``). Our generated stubs send what that client never
does: typed ``contents``, and requests that are wrong in every way a client can get one wrong.
"""

from __future__ import annotations

import shutil
import signal
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from protos.inference import grpc_service_pb2 as pb
from protos.inference import grpc_service_pb2_grpc
from serving.grpc import inference_wire
from serving.requests import inference_v2
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, expected_cases
from tests.serving.v2.support import Results, output_array, run_triton

SERVICE = "inference.GRPCInferenceService"
METRICS_PATH = "/metrics"

MULTI_IO = "functional_multi_io"  # float32 numeric [N, 6] + int64 category [N, 1]
STRINGS = "keras_string_lookup"  # strings in; int64 ids + float32 scores out
VOCAB = "tf1_vocab_lookup"  # strings in and out
SIGNATURES = "multi_signature"  # serving_default, histogram, segment_stats
MODELS = (MULTI_IO, STRINGS, VOCAB, SIGNATURES)
LABEL = "stable"  # a version label on MULTI_IO's version 1

# (model, signature, case in expected.npz)
CASES = [
    (MULTI_IO, "serving_default", "batch1"),
    (MULTI_IO, "serving_default", "batch4"),
    (MULTI_IO, "serve", "batch4"),
    (STRINGS, "serving_default", "batch4"),
    (VOCAB, "serving_default", "batch5"),
    (SIGNATURES, "serving_default", "batch6"),
    (SIGNATURES, "histogram", "batch6"),
    (SIGNATURES, "segment_stats", "batch6"),
]
EXPECTED = {
    (model, signature, case): expected_cases(FIXTURE_MODELS / model)[(signature, case)]
    for model, signature, case in CASES
}
ARRAY_DATATYPES = {"f": "FP32", "S": "BYTES"}  # by numpy kind; integers by their width


def datatype(array: np.ndarray) -> str:
    if array.dtype.kind in "iu":
        return f"{'U' if array.dtype.kind == 'u' else ''}INT{array.dtype.itemsize * 8}"
    return ARRAY_DATATYPES[array.dtype.kind]


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("v2_grpc")
    entries = "".join(
        f'  config {{ name: "{name}" base_path: "{FIXTURE_MODELS / name}" '
        f'model_platform: "tensorflow"'
        + (f' version_labels {{ key: "{LABEL}" value: 1 }}' if name == MULTI_IO else "")
        + " }\n"
        for name in MODELS
    )
    (work / "models.config").write_text(f"model_config_list {{\n{entries}}}\n")
    (work / "monitoring.config").write_text(
        f'prometheus_config {{ enable: true path: "{METRICS_PATH}" }}\n'
    )
    process = ServerProcess(
        [
            f"--model_config_file={work / 'models.config'}",
            f"--monitoring_config_file={work / 'monitoring.config'}",
            "--allow_version_labels_for_unavailable_models=true",
        ],
        list(MODELS),
    )
    try:
        yield process
    finally:
        assert process.stop() == 0, process.output()


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield channel


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> Any:
    return grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)


# --- Triton's client -----------------------------------------------------------------------


def case_id(model: str, signature: str, case: str) -> str:
    return f"infer/{model}/{signature}/{case}"


def triton_plan() -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """(input arrays by key, calls)."""
    arrays: dict[str, np.ndarray] = {}
    calls: list[dict[str, Any]] = [
        {"id": "live", "op": "server_live"},
        {"id": "ready", "op": "server_ready"},
        {"id": "metadata", "op": "server_metadata"},
        {"id": "metadata/multi_io", "op": "model_metadata", "model": MULTI_IO},
        {"id": "metadata/vocab/v1", "op": "model_metadata", "model": VOCAB, "version": "1"},
        {"id": "metadata/nope", "op": "model_metadata", "model": "nope"},
    ]
    for model, version in [(m, "") for m in MODELS] + [
        (MULTI_IO, "1"), (MULTI_IO, LABEL), (MULTI_IO, "2"), (MULTI_IO, "canary"), ("nope", ""),
    ]:
        calls.append({"id": f"model_ready/{model}/{version}", "op": "model_ready",
                      "model": model, "version": version})

    def infer_call(call_id: str, key: tuple[str, str, str], **extra: Any) -> dict[str, Any]:
        model, signature, _ = key
        inputs = []
        for alias, array in EXPECTED[key]["in"].items():
            arrays[f"{'/'.join(key)}/{alias}"] = array
            inputs.append({"name": alias, "datatype": datatype(array),
                           "key": f"{'/'.join(key)}/{alias}"})
        call = {"id": call_id, "op": "infer", "model": model, "inputs": inputs, **extra}
        if signature != "serving_default":
            call["parameters"] = {"signature_name": signature}
        return call

    for key in CASES:
        calls.append(infer_call(case_id(*key), key))
    multi_io = (MULTI_IO, "serving_default", "batch4")
    calls += [
        # Requested outputs, in an order of their own; an id to echo; a version, a label.
        infer_call("infer/outputs", multi_io, outputs=[{"name": "probability"},
                                                       {"name": "class_scores"}],
                   request_id="request-7"),
        infer_call("infer/version", multi_io, version="1"),
        infer_call("infer/label", multi_io, version=LABEL),
        infer_call("error/model", multi_io, model="nope"),
        infer_call("error/version", multi_io, version="2"),
        infer_call("error/label", multi_io, version="canary"),
        infer_call("error/signature", multi_io, parameters={"signature_name": "nope"}),
        infer_call("error/output", multi_io, outputs=[{"name": "nope"}]),
    ]
    return arrays, calls


@pytest.fixture(scope="module")
def triton(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Results, dict[str, np.ndarray]]:
    """Every call of the plan, made by Triton's client: (results by call id, output arrays)."""
    arrays, calls = triton_plan()
    for call in calls:
        call["protocol"] = "grpc"
    return run_triton(server, tmp_path_factory.mktemp("triton_client"), arrays, calls,
                      timeout_s=120)


def ok(triton: Any, call_id: str) -> dict[str, Any]:
    result: dict[str, Any] = triton[0][call_id]
    assert (result["ok"], result["error"]) == (True, ""), call_id
    return result


def triton_outputs(triton: Any, call_id: str) -> dict[str, np.ndarray]:
    """The outputs Triton's client decoded, by name (BYTES as ``S`` arrays)."""
    result = ok(triton, call_id)
    return {name: output_array(result, name, triton[1], strings=bytes)
            for name in result["outputs"]}


def test_health_and_server_metadata(triton: Any) -> None:
    assert ok(triton, "live")["value"] is True
    assert ok(triton, "ready")["value"] is True
    assert ok(triton, "metadata")["value"] == {
        "name": "graphserve",
        "version": inference_v2.server_version(),
        "extensions": list(inference_v2.EXTENSIONS),
    }


def test_model_ready(triton: Any) -> None:
    ready = {
        call_id.removeprefix("model_ready/"): result["value"]
        for call_id, result in triton[0].items() if call_id.startswith("model_ready/")
    }
    assert ready == {
        **{f"{m}/": True for m in MODELS},
        f"{MULTI_IO}/1": True, f"{MULTI_IO}/{LABEL}": True,
        f"{MULTI_IO}/2": False, f"{MULTI_IO}/canary": False, "nope/": False,
    }


def test_model_metadata(triton: Any) -> None:
    assert ok(triton, "metadata/multi_io")["value"] == {
        "name": MULTI_IO,
        "versions": ["1"],
        "platform": "tensorflow_savedmodel",
        "inputs": [{"name": "category", "datatype": "INT64", "shape": ["-1", "1"]},
                   {"name": "numeric", "datatype": "FP32", "shape": ["-1", "6"]}],
        "outputs": [{"name": "class_scores", "datatype": "FP32", "shape": ["-1", "3"]},
                    {"name": "probability", "datatype": "FP32", "shape": ["-1", "1"]}],
    }
    vocab = ok(triton, "metadata/vocab/v1")["value"]
    assert vocab["inputs"] == [{"name": "tokens", "datatype": "BYTES", "shape": ["-1", "4"]}]
    assert [(o["name"], o["datatype"]) for o in vocab["outputs"]] == [
        ("classes", "BYTES"), ("scores", "FP32"), ("token_ids", "INT64")]
    missing = triton[0]["metadata/nope"]
    assert (missing["ok"], missing["status"]) == (False, "StatusCode.NOT_FOUND")


@pytest.mark.parametrize("key", CASES, ids=["/".join(k) for k in CASES])
def test_infer_matches_tensorflow(triton: Any, key: tuple[str, str, str]) -> None:
    result = ok(triton, case_id(*key))
    response = result["response"]
    want = EXPECTED[key]["out"]
    assert (response["model_name"], response["model_version"]) == (key[0], "1")
    assert [o["name"] for o in response["outputs"]] == sorted(want)
    for output in response["outputs"]:
        array = want[output["name"]]
        assert output["datatype"] == datatype(array), output
        assert [int(d) for d in output["shape"]] == list(array.shape), output
    got = triton_outputs(triton, case_id(*key))
    for name, array in want.items():
        assert_same(got[name], array, f"{case_id(*key)}: {name}")


def test_infer_outputs_id_versions_and_labels(triton: Any) -> None:
    want = EXPECTED[(MULTI_IO, "serving_default", "batch4")]["out"]
    response = ok(triton, "infer/outputs")["response"]
    assert [o["name"] for o in response["outputs"]] == ["probability", "class_scores"]
    assert response["id"] == "request-7"
    for call_id in ("infer/outputs", "infer/version", "infer/label"):
        got = triton_outputs(triton, call_id)
        for name, array in want.items():
            assert_same(got[name], array, f"{call_id}: {name}")
        assert ok(triton, call_id)["response"]["model_version"] == "1"


@pytest.mark.parametrize(("call_id", "status", "words"), [
    ("error/model", "NOT_FOUND", "nope"),
    ("error/version", "NOT_FOUND", "2"),
    ("error/label", "INVALID_ARGUMENT", "canary"),
    ("error/signature", "INVALID_ARGUMENT", "signature 'nope'"),
    ("error/output", "INVALID_ARGUMENT", "nope"),
])
def test_infer_errors(triton: Any, call_id: str, status: str, words: str) -> None:
    result = triton[0][call_id]
    assert (result["ok"], result["status"]) == (False, f"StatusCode.{status}"), result
    assert words in result["error"], result


# --- our stubs: typed contents and malformed requests ------------------------------------------


def typed_input(name: str, array: np.ndarray) -> pb.ModelInferRequest.InferInputTensor:
    tensor = pb.ModelInferRequest.InferInputTensor(
        name=name, datatype=datatype(array), shape=array.shape
    )
    field = {"FP32": "fp32_contents", "INT64": "int64_contents", "INT32": "int_contents",
             "BYTES": "bytes_contents"}[tensor.datatype]
    getattr(tensor.contents, field).extend(array.reshape(-1).tolist())
    return tensor


def decode_outputs(response: pb.ModelInferResponse) -> dict[str, np.ndarray]:
    """The raw outputs, as Triton's client reads them."""
    arrays = {}
    assert len(response.raw_output_contents) == len(response.outputs)
    for output, raw in zip(response.outputs, response.raw_output_contents, strict=True):
        if output.datatype == "BYTES":
            values = inference_v2.split_bytes(raw, int(np.prod(output.shape)), output.name)
            arrays[output.name] = np.array(values, dtype=bytes).reshape(output.shape)
        else:
            dtype = inference_v2.numpy_dtype(output.datatype).newbyteorder("<")
            arrays[output.name] = np.frombuffer(raw, dtype).reshape(output.shape)
    return arrays


@pytest.mark.parametrize("key", [
    (MULTI_IO, "serving_default", "batch4"),
    (STRINGS, "serving_default", "batch4"),
    (SIGNATURES, "segment_stats", "batch6"),
], ids=lambda k: "/".join(k))
def test_typed_contents(stub: Any, key: tuple[str, str, str]) -> None:
    model, signature, _ = key
    request = pb.ModelInferRequest(model_name=model, id="typed")
    for name, array in EXPECTED[key]["in"].items():
        request.inputs.append(typed_input(name, array))
    if signature != "serving_default":
        request.parameters["signature_name"].string_param = signature
    response = stub.ModelInfer(request, timeout=30)
    assert (response.model_name, response.model_version, response.id) == (model, "1", "typed")
    got = decode_outputs(response)
    assert sorted(got) == sorted(EXPECTED[key]["out"])
    for name, array in EXPECTED[key]["out"].items():
        assert_same(got[name], array, name)


def raw_request(**changes: Any) -> pb.ModelInferRequest:
    """A good raw request for MULTI_IO's serving_default batch4, with ``changes``: input
    fields by input name (``{"numeric": {"datatype": "FP64"}}``), or ``raw`` (the contents)."""
    case = EXPECTED[(MULTI_IO, "serving_default", "batch4")]["in"]
    request = pb.ModelInferRequest(model_name=MULTI_IO)
    raws = []
    for name, array in case.items():
        fields = {"name": name, "datatype": datatype(array), "shape": array.shape,
                  **changes.get(name, {})}
        request.inputs.add(**fields)
        raws.append(inference_v2.raw_bytes(array))
    request.raw_input_contents.extend(changes.get("raw", raws))
    return request


def typed_request(field: str, values: list[Any], datatype_: str, shape: list[int]) -> Any:
    request = pb.ModelInferRequest(model_name=STRINGS)
    tensor = request.inputs.add(name="color", datatype=datatype_, shape=shape)
    if values:  # else no contents at all
        getattr(tensor.contents, field).extend(values)
    return request


def raw_color(raw: bytes) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=STRINGS)
    request.inputs.add(name="color", datatype="BYTES", shape=[1, 3])
    request.raw_input_contents.append(raw)
    return request


def signature_parameter(value: pb.InferParameter) -> pb.ModelInferRequest:
    request = raw_request()
    request.parameters["signature_name"].CopyFrom(value)
    return request


def output_parameter() -> pb.ModelInferRequest:
    request = raw_request()
    request.outputs.add(name="class_scores").parameters["classification"].int64_param = 2
    return request


CATEGORY = EXPECTED[(MULTI_IO, "serving_default", "batch4")]["in"]["category"]
NUMERIC = EXPECTED[(MULTI_IO, "serving_default", "batch4")]["in"]["numeric"]

BAD_REQUESTS: dict[str, tuple[pb.ModelInferRequest, grpc.StatusCode, str]] = {
    "unknown model": (
        pb.ModelInferRequest(model_name="nope"), grpc.StatusCode.NOT_FOUND, "nope"),
    "no model": (pb.ModelInferRequest(), grpc.StatusCode.INVALID_ARGUMENT, "names no model"),
    "wrong datatype": (
        raw_request(numeric={"datatype": "FP64"}), grpc.StatusCode.INVALID_ARGUMENT,
        "input 'numeric' has datatype FP64, but model 'functional_multi_io' expects FP32"),
    "unknown datatype": (
        raw_request(numeric={"datatype": "FLOAT"}), grpc.StatusCode.INVALID_ARGUMENT,
        "unknown datatype 'FLOAT'"),
    "wrong byte count": (
        raw_request(raw=[inference_v2.raw_bytes(CATEGORY), inference_v2.raw_bytes(NUMERIC)[:-4]]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "input 'numeric': 92 bytes of data given where its shape [4, 6] of FP32 takes 96"),
    "shape that does not fit": (
        raw_request(numeric={"shape": [4, 5]}), grpc.StatusCode.INVALID_ARGUMENT,
        "input 'numeric': 96 bytes of data given where its shape [4, 5] of FP32 takes 80"),
    "negative dimension": (
        raw_request(numeric={"shape": [-4, 6]}), grpc.StatusCode.INVALID_ARGUMENT,
        "negative dimension"),
    "unknown input": (
        raw_request(numeric={"name": "numbers"}), grpc.StatusCode.INVALID_ARGUMENT,
        ("model 'functional_multi_io' has no input 'numbers' in signature 'serving_default' "
         "(its inputs: category, numeric)")),
    "input given twice": (
        raw_request(numeric={"name": "category"}), grpc.StatusCode.INVALID_ARGUMENT,
        "input 'category' is given more than once"),
    "raw contents for some inputs": (
        raw_request(raw=[inference_v2.raw_bytes(CATEGORY)]), grpc.StatusCode.INVALID_ARGUMENT,
        "raw_input_contents has 1 entries for 2 inputs"),
    "raw and typed contents": (
        raw_request(numeric={"contents": pb.InferTensorContents(fp32_contents=[1.0])}),
        grpc.StatusCode.INVALID_ARGUMENT, "input 'numeric' has contents while the request has"),
    "unknown signature": (
        signature_parameter(pb.InferParameter(string_param="nope")),
        grpc.StatusCode.INVALID_ARGUMENT, "model 'functional_multi_io' has no signature 'nope'"),
    "signature parameter not a string": (
        signature_parameter(pb.InferParameter(int64_param=1)),
        grpc.StatusCode.INVALID_ARGUMENT, "'signature_name' must be a string"),
    "unknown output": (
        raw_request(), grpc.StatusCode.INVALID_ARGUMENT,
        "output tensor alias not found in signature: nope"),
    "classification output": (
        output_parameter(), grpc.StatusCode.INVALID_ARGUMENT,
        "output 'class_scores': the parameter 'classification' is not supported"),
    "contents in the wrong field": (
        typed_request("fp32_contents", [1.0, 2.0, 3.0], "BYTES", [1, 3]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "input 'color': BYTES data goes in contents.bytes_contents, not contents.fp32_contents"),
    "too few typed values": (
        typed_request("bytes_contents", [b"red"], "BYTES", [1, 3]),
        grpc.StatusCode.INVALID_ARGUMENT, "1 values given where its shape [1, 3] holds 3"),
    "no data": (
        typed_request("bytes_contents", [], "BYTES", [1, 3]),
        grpc.StatusCode.INVALID_ARGUMENT, "input 'color' has no data"),
    "half floats as values": (
        typed_request("fp32_contents", [1.0], "FP16", [1]), grpc.StatusCode.INVALID_ARGUMENT,
        "FP16 data can only be sent in raw_input_contents"),
    "a BYTES element cut short": (
        raw_color(struct.pack("<I", 9) + b"red"), grpc.StatusCode.INVALID_ARGUMENT,
        "input 'color': a BYTES element of 9 bytes runs past the end of the data"),
    "too few BYTES elements": (
        raw_color(struct.pack("<I", 3) + b"red"), grpc.StatusCode.INVALID_ARGUMENT,
        "input 'color': 1 BYTES elements given where its shape holds 3"),
}
BAD_REQUESTS["unknown output"][0].outputs.add(name="nope")


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_requests_are_refused_clearly(stub: Any, case: str) -> None:
    request, code, words = BAD_REQUESTS[case]
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelInfer(request, timeout=30)
    err: Any = caught.value
    assert err.code() == code, err.details()
    assert words in err.details()
    assert stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live


def test_unparseable_bytes_are_invalid_argument(channel: grpc.Channel) -> None:
    call = channel.unary_unary(f"/{SERVICE}/ModelInfer")
    with pytest.raises(grpc.RpcError) as caught:
        call(b"\xff\xff\xff", timeout=30)
    err: Any = caught.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "inference.ModelInferRequest" in err.details()


def test_ready_and_metadata_with_our_stubs(stub: Any, channel: grpc.Channel) -> None:
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready
    ready = stub.ModelReady(pb.ModelReadyRequest(name=SIGNATURES, version="1"), timeout=30)
    assert ready.ready
    assert not stub.ModelReady(pb.ModelReadyRequest(name=""), timeout=30).ready
    with pytest.raises(grpc.RpcError) as caught:
        stub.ModelMetadata(pb.ModelMetadataRequest(name=MULTI_IO, version="7"), timeout=30)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    # The standard health service knows the service by name, and follows readiness for it.
    health = health_pb2_grpc.HealthStub(channel)
    status = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=30).status
    assert status == health_pb2.HealthCheckResponse.SERVING


def test_model_infer_counts_like_predict(server: ServerProcess, stub: Any) -> None:
    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        response = server.client.get(METRICS_PATH)
        assert response.status_code == 200
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples
        }

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    before = scrape()
    for _ in range(2):
        stub.ModelInfer(raw_request(), timeout=30)
    with pytest.raises(grpc.RpcError):
        stub.ModelInfer(pb.ModelInferRequest(model_name="absent"), timeout=30)
    stub.ModelReady(pb.ModelReadyRequest(name=MULTI_IO), timeout=30)  # not counted
    after = scrape()
    count = ":tensorflow:serving:request_count_total"
    assert delta(count, model_name=MULTI_IO, status="OK") == 2
    assert delta(count, model_name="absent", status="NOT_FOUND") == 1
    assert delta(":tensorflow:serving:request_latency_count", model_name=MULTI_IO,
                 API="ModelInfer", entrypoint="GRPC") == 2


def test_large_typed_request_and_response(stub: Any) -> None:
    """Typed contents past the size decoded on the event loop, and an answer past the size
    encoded there: both go to the workers, and come out the same."""
    case = EXPECTED[(MULTI_IO, "serving_default", "batch4")]
    repeat = 5000  # 20000 rows: ~600 kB of typed values in, 80000 values out
    request = pb.ModelInferRequest(model_name=MULTI_IO)
    for name, array in case["in"].items():
        request.inputs.append(typed_input(name, np.tile(array, (repeat, 1))))
    got = decode_outputs(stub.ModelInfer(request, timeout=60))
    for name, array in case["out"].items():
        assert_same(got[name], np.tile(array, (repeat, 1)), name)


def wait_for(condition: Any, what: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_server_ready_follows_models_and_drain(tmp_path: Path) -> None:
    """Not ready while a configured model has no version, ready once it has, not ready again
    from the drain's first moment, while the server still answers."""
    pending = tmp_path / "pending"
    pending.mkdir()
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        f'  config {{ name: "{MULTI_IO}" base_path: "{FIXTURE_MODELS / MULTI_IO}" '
        'model_platform: "tensorflow" }\n'
        f'  config {{ name: "pending" base_path: "{pending}" model_platform: "tensorflow" }}\n'
        "}\n"
    )
    process = ServerProcess(
        [f"--model_config_file={config}", "--file_system_poll_wait_seconds=1",
         "--file_system_settle_seconds=0", "--drain_delay_seconds=3"],
        [MULTI_IO],
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{process.grpc_port}") as channel:
            stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)

            def ready() -> bool:
                return bool(stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready)

            def model_ready(name: str) -> bool:
                response = stub.ModelReady(pb.ModelReadyRequest(name=name), timeout=30)
                return bool(response.ready)

            assert not ready()
            assert (model_ready(MULTI_IO), model_ready("pending")) == (True, False)
            shutil.copytree(FIXTURE_MODELS / MULTI_IO / "1", pending / "1")
            wait_for(ready, "the server to be ready")
            assert model_ready("pending")

            process.process.send_signal(signal.SIGTERM)
            wait_for(lambda: not ready(), "the drain to turn readiness off", 2.0)
            assert stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live
            assert decode_outputs(stub.ModelInfer(raw_request(), timeout=30))
        assert process.process.wait(timeout=60) == 0, process.output()
    finally:
        process.stop()  # already gone, unless the test failed first


@pytest.mark.parametrize("request_id", ["", "req-7"])
def test_the_written_response_is_protobufs_own_bytes(request_id: str) -> None:
    # The response is written as wire bytes, not built as a message: byte for byte what
    # protobuf writes, over every kind of output (an empty one, a scalar, strings).
    outputs = [
        inference_v2.InferOutput("y", "FP32", np.arange(6, dtype=np.float32).reshape(2, 3)),
        inference_v2.InferOutput("s", "BYTES", np.array([b"x", b"", b"\xff"], dtype=object)),
        inference_v2.InferOutput("e", "FP32", np.zeros((0, 3), np.float32)),
        inference_v2.InferOutput("n", "INT64", np.array(-5, dtype=np.int64)),
        inference_v2.InferOutput("b", "BOOL", np.array([True, False])),
    ]
    response = inference_v2.InferResponse("m", "12", request_id, outputs)
    message = pb.ModelInferResponse(model_name="m", model_version="12", id=request_id)
    for output in outputs:
        message.outputs.add(name=output.name, datatype=output.datatype, shape=output.shape)
        message.raw_output_contents.append(inference_v2.raw_bytes(output.array))
    for _ in range(2):  # made, then from what is kept
        assert inference_wire.infer_response(response) == message.SerializeToString()
