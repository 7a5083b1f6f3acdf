"""The same request over all four protocols of one daemon gives the same numbers: TensorFlow
Serving's REST and gRPC Predict, and the Open Inference Protocol's REST and gRPC infer (with
Triton's own client). Each answer is also compared with TensorFlow's recorded output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS, expected_cases
from tests.serving.v2.support import output_array, run_triton

# Two float32 inputs and an int64 one; strings in, int64 and float32 out.
CASES = (("functional_multi_io", "batch4"), ("keras_string_lookup", "batch4"))
DATATYPES = {"float32": "FP32", "int64": "INT64"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("four")
    entries = "".join(
        f'  config {{ name: "{m}" base_path: "{FIXTURE_MODELS / m}" model_platform: "tensorflow" }}\n'
        for m, _ in CASES
    )
    (work / "models.config").write_text(f"model_config_list {{\n{entries}}}\n")
    process = ServerProcess([f"--model_config_file={work / 'models.config'}"],
                            [m for m, _ in CASES])
    yield process
    assert process.stop() == 0, process.output()


def _recorded(model: str, case: str) -> dict[str, dict[str, np.ndarray]]:
    return expected_cases(FIXTURE_MODELS / model)[("serving_default", case)]


def _rest_v1(server: ServerProcess, model: str, inputs: dict[str, np.ndarray],
             want: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    columns = {alias: (a.astype(str) if a.dtype.kind == "S" else a).tolist()
               for alias, a in inputs.items()}
    answer = server.client.post(f"/v1/models/{model}:predict", json={"inputs": columns})
    assert answer.status_code == 200, answer.text
    outputs = answer.json()["outputs"]
    return {alias: np.asarray(outputs[alias], dtype=want[alias].dtype) for alias in want}


def _grpc_v1(server: ServerProcess, model: str, inputs: dict[str, np.ndarray]
             ) -> dict[str, np.ndarray]:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for alias, array in inputs.items():
        request.inputs[alias].CopyFrom(make_tensor_proto(array.astype(object)
                                                         if array.dtype.kind == "S" else array))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=60)
    return {alias: to_ndarray(t) for alias, t in response.outputs.items()}


def _triton(server: ServerProcess, work: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every case over v2 REST (binary outputs) and v2 gRPC, by Triton's client: arrays by
    call id ("<protocol>/<model>")."""
    arrays: dict[str, np.ndarray] = {}
    calls: list[dict[str, Any]] = []
    for model, case in CASES:
        recorded = _recorded(model, case)
        inputs = []
        for alias, array in recorded["in"].items():
            key = f"{model}/{alias}"
            arrays[key] = array
            datatype = "BYTES" if array.dtype.kind == "S" else DATATYPES[str(array.dtype)]
            inputs.append({"name": alias, "datatype": datatype, "key": key, "binary": True})
        for protocol in ("http", "grpc"):
            calls.append({"id": f"{protocol}/{model}", "protocol": protocol, "op": "infer",
                          "model": model, "inputs": inputs})
    results, out = run_triton(server, work, arrays, calls)
    answers: dict[str, dict[str, np.ndarray]] = {}
    for call_id, result in results.items():
        assert result["ok"], result
        answers[call_id] = {name: output_array(result, name, out) for name in result["outputs"]}
    return answers


def test_the_same_request_gives_the_same_numbers_over_all_four_protocols(
    server: ServerProcess, tmp_path: Path
) -> None:
    v2 = _triton(server, tmp_path)
    for model, case in CASES:
        recorded = _recorded(model, case)
        want = recorded["out"]
        answers = {
            "REST /v1": _rest_v1(server, model, recorded["in"], want),
            "gRPC Predict": _grpc_v1(server, model, recorded["in"]),
            "REST /v2": v2[f"http/{model}"],
            "gRPC ModelInfer": v2[f"grpc/{model}"],
        }
        reference = answers["gRPC Predict"]
        assert sorted(reference) == sorted(want), model
        for alias, expected in want.items():
            np.testing.assert_allclose(reference[alias], expected, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{model} {alias}: TensorFlow's output")
            for protocol, outputs in answers.items():
                got = outputs[alias]
                assert got.dtype == reference[alias].dtype, (model, alias, protocol)
                assert got.shape == reference[alias].shape, (model, alias, protocol)
                # Bit for bit: every protocol carries the same float32 values.
                np.testing.assert_array_equal(got, reference[alias],
                                              err_msg=f"{model} {alias} over {protocol}")
