"""A model is data, on the real daemon over loopback: a request that names a server file for a
model's table gets PERMISSION_DENIED (REST 403 in TF Serving's ``{"error": ...}`` form, gRPC
PERMISSION_DENIED) and never the file; a file in the model's assets serves; a model bringing
Python code is refused at load with an error naming the op, while the other models serve."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from tests.serving.e2e.support import HALF_PLUS_TWO_V, state_is, version_states, wait_until
from tests.serving.rest.server_process import ServerProcess
from tests.serving.support import FIXTURE_MODELS

FILE_TABLE_V = FIXTURE_MODELS / "file_table_model" / "1"
PYFUNC_V = FIXTURE_MODELS / "pyfunc_model" / "1"
DENIED = (
    "InitializeTableFromTextFileV2 may not read '/etc/passwd': a served model reads data files "
    "only from its version directory's assets/ or assets.extra/"
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the served models' base paths are: ``root/<name>/1``."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[ServerProcess]:
    bases = {}
    for name, version in (("table", FILE_TABLE_V), ("pyfunc", PYFUNC_V), ("half", HALF_PLUS_TWO_V)):
        shutil.copytree(version, root / name / "1")
        bases[name] = root / name
    config = root / "models.config"
    config.write_text(
        "model_config_list {\n"
        + "".join(
            f'  config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" }}\n'
            for name, base in bases.items()
        )
        + "}\n"
    )
    # A refused model stays refused: no retries to wait through.
    process = ServerProcess([f"--model_config_file={config}"], ["table", "half"])
    yield process
    assert process.stop() == 0, process.output()


def _table_request(filename: str) -> dict[str, object]:
    return {"inputs": {"filename": filename, "keys": ["blue", "root"]}}


def test_rest_refuses_a_server_file_with_403(server: ServerProcess) -> None:
    response = server.client.post("/v1/models/table:predict", json=_table_request("/etc/passwd"))
    assert response.status_code == 403
    body = response.json()
    assert list(body) == ["error"]
    assert body["error"].startswith(DENIED)
    assert "root:" not in response.text


def test_rest_reads_a_file_in_the_models_assets(server: ServerProcess, root: Path) -> None:
    assets = root / "table" / "1" / "assets" / "colors.txt"
    response = server.client.post("/v1/models/table:predict", json=_table_request(str(assets)))
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    assert outputs["ids"] == [2, -1]
    assert sorted(outputs["lines"]) == ["blue", "green", "red"]


def test_grpc_refuses_a_server_file_with_permission_denied(
    server: ServerProcess, root: Path
) -> None:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "table"
    request.inputs["filename"].CopyFrom(make_tensor_proto(np.array(b"/etc/passwd", dtype=object)))
    request.inputs["keys"].CopyFrom(make_tensor_proto(np.array([b"root"], dtype=object)))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(request, timeout=60)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert (info.value.details() or "").startswith(DENIED)
        # The same channel then reads the model's own file.
        assets = root / "table" / "1" / "assets" / "colors.txt"
        request.inputs["filename"].CopyFrom(
            make_tensor_proto(np.array(str(assets).encode(), dtype=object))
        )
        response = stub.Predict(request, timeout=60)
    assert to_ndarray(response.outputs["ids"]).tolist() == [-1]


def test_a_model_with_python_code_fails_its_load_naming_the_op(server: ServerProcess) -> None:
    wait_until(state_is(server.client, "pyfunc", 1, "END"), "the pyfunc version to fail")
    (state,) = version_states(server.client, "pyfunc").values()
    assert (state["state"], state["error_code"]) == ("END", "PERMISSION_DENIED")
    message = str(state["error_message"])
    assert message.startswith("Refused by the model policy: the model at ")
    assert "EagerPyFunc (runs code the model brings along; 1 node: " in message
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "pyfunc"
        response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
            request, timeout=30
        )
    (status,) = response.model_version_status
    assert status.state == get_model_status_pb2.ModelVersionStatus.END
    assert (status.status.error_code, status.status.error_message) == (
        grpc.StatusCode.PERMISSION_DENIED.value[0],
        message,
    )
    # The others keep serving.
    response = server.client.post("/v1/models/half:predict", json={"instances": [[1.0]]})
    assert (response.status_code, response.json()) == (200, {"predictions": [[2.5]]})
    assert "Loading servable: {name: pyfunc version: 1} failed" in server.output()
