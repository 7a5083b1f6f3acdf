"""Proto <-> request-layer conversions the RPC tests do not pin down on their own."""

from __future__ import annotations

from pathlib import Path

from protos.tensorflow_serving.apis import model_pb2
from protos.tensorflow_serving.config import model_server_config_pb2
from runtime.errors import Code
from serving.config import ModelConfig, SpecificVersions
from serving.requests.model_spec import ModelSpec
from serving.requests.proto_convert import (
    fill_model_spec,
    model_configs,
    model_spec,
    status_response,
)
from serving.requests.status import GetModelStatusResponse, ModelVersionStatus
from serving.servable import ManagerState


def test_model_spec_version_choice() -> None:
    proto = model_pb2.ModelSpec(name="m", signature_name="s")
    assert model_spec(proto) == ModelSpec("m", None, None, "s")
    proto.version.value = 0  # set, though 0: a request for version 0
    assert model_spec(proto) == ModelSpec("m", 0, None, "s")
    proto.version_label = ""  # the oneof moves to the (empty) label
    assert model_spec(proto) == ModelSpec("m", None, "", "s")


def test_response_model_spec() -> None:
    out = model_pb2.ModelSpec()
    fill_model_spec(out, ModelSpec("m", 0))
    assert out.HasField("version") and out.version.value == 0 and out.signature_name == ""
    out = model_pb2.ModelSpec()
    fill_model_spec(out, ModelSpec("m", None, None, "serving_default"))
    assert not out.HasField("version") and out.signature_name == "serving_default"


def test_status_response_carries_errors() -> None:
    response = status_response(GetModelStatusResponse((
        ModelVersionStatus(2, ManagerState.END, Code.NOT_FOUND, "gone"),
        ModelVersionStatus(1, ManagerState.AVAILABLE),
    )))
    [failed, ok] = response.model_version_status
    assert (failed.version, failed.state, failed.status.error_code,
            failed.status.error_message) == (2, 50, 5, "gone")
    assert (ok.version, ok.state, ok.status.error_code) == (1, 30, 0)
    assert ok.HasField("status") and not ok.status.error_message


def test_model_configs_are_checked_as_a_config_file_is(tmp_path: Path) -> None:
    config = model_server_config_pb2.ModelServerConfig()
    entry = config.model_config_list.config.add(name="m", base_path="models/m",
                                                model_platform="tensorflow")
    entry.model_version_policy.specific.versions.extend([1, 3])
    entry.version_labels["stable"] = 3
    assert model_configs(config, tmp_path) == [
        ModelConfig("m", tmp_path / "models" / "m", SpecificVersions((1, 3)), {"stable": 3})]
