"""A version holding only a TensorFlow Lite model, on the real server: a clear load error in the
status API (REST and gRPC), at once and not retried, while the other versions and models serve.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from protos.tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc
from runtime.errors import Code
from tests.serving.e2e.support import (
    HALF_PLUS_THREE_V,
    HALF_PLUS_TWO_V,
    state_is,
    version_states,
    wait_until,
)
from tests.serving.rest.server_process import ServerProcess

# Any bytes do: graphserve refuses the version before reading the file.
TFLITE_BYTES = b"\x1c\x00\x00\x00TFL3" + bytes(24)


def model_entry(name: str, base: Path, extra: str = "") -> str:
    return f'config {{ name: "{name}" base_path: "{base}" model_platform: "tensorflow" {extra} }}'


@pytest.mark.parametrize(
    ("flags", "code", "words"),
    [
        (["--prefer_tflite_model"], Code.UNIMPLEMENTED,
         ("TensorFlow Lite models are not supported (--prefer_tflite_model): {dir} holds "
         "model.tflite and no SavedModel; export the version as a SavedModel (saved_model.pb) "
         "to serve it")),
        ([], Code.NOT_FOUND,
         ("SavedModel file does not exist at: {dir}/{{saved_model.pbtxt|saved_model.pb}}; it "
         "holds model.tflite, and TensorFlow Lite models are not supported: export the version "
         "as a SavedModel (saved_model.pb) to serve it")),
    ],
    ids=["prefer_tflite_model", "no_flag"],
)
def test_a_tflite_only_version_is_a_load_error_and_the_rest_serves(
    tmp_path: Path, flags: list[str], code: Code, words: str
) -> None:
    base = tmp_path / "m"
    base.mkdir()
    (base / "1").symlink_to(HALF_PLUS_TWO_V, target_is_directory=True)
    tflite_dir = base / "2"
    tflite_dir.mkdir()
    (tflite_dir / "model.tflite").write_bytes(TFLITE_BYTES)
    other = tmp_path / "other"
    other.mkdir()
    (other / "1").symlink_to(HALF_PLUS_THREE_V, target_is_directory=True)
    config = tmp_path / "models.config"
    config.write_text(
        "model_config_list {\n"
        + model_entry("m", base, "model_version_policy { all {} }")
        + "\n" + model_entry("other", other) + "\n}\n"
    )
    # Default load retries (five, a minute apart): a retried version would stay LOADING for
    # minutes, past the wait below.
    server = ServerProcess([f"--model_config_file={config}", *flags], ["m", "other"])
    try:
        wait_until(state_is(server.client, "m", 2, "END"), "version 2 to fail")
        expected = words.format(dir=tflite_dir)
        assert version_states(server.client, "m") == {
            2: {"state": "END", "error_code": code.name, "error_message": expected},
            1: {"state": "AVAILABLE", "error_code": "OK", "error_message": ""},
        }
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            request = get_model_status_pb2.GetModelStatusRequest()
            request.model_spec.name = "m"
            request.model_spec.version.value = 2
            response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
                request, timeout=30
            )
        (status,) = response.model_version_status
        assert (status.version, status.state) == (2, get_model_status_pb2.ModelVersionStatus.END)
        assert (status.status.error_code, status.status.error_message) == (code.value, expected)

        for path, y in (("m", 2.5), ("m/versions/1", 2.5), ("other", 3.5)):
            response = server.client.post(
                f"/v1/models/{path}:predict", json={"instances": [[1.0]]}
            )
            assert (response.status_code, response.json()) == (200, {"predictions": [[y]]})
        missing = server.client.post("/v1/models/m/versions/2:predict",
                                     json={"instances": [[1.0]]})
        assert missing.status_code == 404
        assert "Loading servable: {name: m version: 2} failed" in server.output()
        assert "Retrying of loading servable: {name: m version: 2}" not in server.output()
    finally:
        assert server.stop() == 0, server.output()
