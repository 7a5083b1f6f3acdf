"""ModelService: GetModelStatus, and HandleReloadConfigRequest replacing the model list and
waiting for new models as TensorFlow Serving does. The module has its own core, since reloads
change it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import get_model_status_pb2, model_management_pb2, predict_pb2
from runtime.tensor_codec import make_tensor_proto, to_ndarray
from serving.config import ModelConfig
from serving.core.server_core import CoreOptions, ServerCore
from serving.servable import ServableId
from tests.serving.grpc.support import Client, rpc_error, serving
from tests.serving.support import FIXTURE_MODELS, HALF_PLUS_TWO

HPT = "half_plus_two"
THREE = FIXTURE_MODELS / "half_plus_three"


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("broken")
    (base / "1").mkdir()
    (base / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    return base


@pytest.fixture(scope="module")
def core() -> Iterator[ServerCore]:
    # No retries: a version that fails to load reaches END at once.
    options = CoreOptions(file_system_poll_wait_seconds=-1, file_system_settle_seconds=0,
                          max_num_load_retries=0)
    with ServerCore(options) as core:
        core.reload_config([ModelConfig(HPT, HALF_PLUS_TWO)])
        assert core.wait_until_ready(120)
        yield core


@pytest.fixture(scope="module")
def client(core: ServerCore) -> Iterator[Client]:
    with serving(core) as client:
        yield client


def config_request(*models: tuple[str, Path], labels: str = "") -> Any:
    text = "model_config_list {\n" + "".join(
        f'config {{ name: "{name}" base_path: "{path}" model_platform: "tensorflow" {labels} }}\n'
        for name, path in models
    ) + "}\n"
    from google.protobuf import text_format

    request = model_management_pb2.ReloadConfigRequest()
    text_format.Parse(text, request.config)
    return request


def status(client: Client, name: str, version: int | None = None) -> list[tuple[int, int, int,
                                                                                  str]]:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    response = client.models.GetModelStatus(request)
    return [(v.version, v.state, v.status.error_code, v.status.error_message)
            for v in response.model_version_status]


def predict(client: Client, name: str, x: float) -> float:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.inputs["x"].CopyFrom(make_tensor_proto(np.array([[x]], np.float32)))
    return float(to_ndarray(client.predictions.Predict(request).outputs["y"])[0, 0])


AVAILABLE, END = 30, 50


def test_get_model_status(client: Client) -> None:
    assert status(client, HPT) == [(123, AVAILABLE, 0, "")]
    assert status(client, HPT, 123) == [(123, AVAILABLE, 0, "")]
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = HPT
    request.model_spec.version_label = "ignored"  # labels are ignored, as upstream
    assert len(client.models.GetModelStatus(request).model_version_status) == 1
    for request, code, details in [
        (get_model_status_pb2.GetModelStatusRequest(), grpc.StatusCode.INVALID_ARGUMENT,
         "Missing ModelSpec"),
    ]:
        err = rpc_error(client.models.GetModelStatus, request)
        assert (err.code(), err.details()) == (code, details)
    err = rpc_error(status, client, "nope")
    assert (err.code(), err.details()) == (grpc.StatusCode.NOT_FOUND,
                                           "Could not find any versions of model nope")
    err = rpc_error(status, client, HPT, 0)  # version 0 is a version, not "unset"
    assert (err.code(), err.details()) == (grpc.StatusCode.NOT_FOUND,
                                           f"Could not find version 0 of model {HPT}")


def test_reload_adds_and_removes_models(client: Client, core: ServerCore) -> None:
    response = client.models.HandleReloadConfigRequest(
        config_request((HPT, HALF_PLUS_TWO), ("three", THREE)))
    assert response.HasField("status") and response.status.error_code == 0
    assert not response.metric
    # Returned only once the new model could serve.
    assert status(client, "three") == [(1, AVAILABLE, 0, "")]
    assert predict(client, "three", 2.0) == 4.0
    client.models.HandleReloadConfigRequest(config_request(("three", THREE)))
    # Models left out are unloaded, in the background as upstream.
    gone = ServableId(HPT, 123)
    assert core.monitor.wait_for(lambda m: m.state(gone).state == END, 60)  # type: ignore[union-attr]
    err = rpc_error(predict, client, HPT, 2.0)
    assert (err.code(), err.details()) == (grpc.StatusCode.NOT_FOUND,
                                           f"Servable not found for request: Latest({HPT})")
    client.models.HandleReloadConfigRequest(config_request((HPT, HALF_PLUS_TWO)))
    assert predict(client, HPT, 2.0) == 3.0


def test_reload_reports_models_that_fail_to_load(client: Client, broken: Path) -> None:
    err = rpc_error(client.models.HandleReloadConfigRequest,
                    config_request((HPT, HALF_PLUS_TWO), ("broken", broken)))
    assert err.code() == grpc.StatusCode.UNKNOWN
    prefix = "1 model(s) did not become available: {{{name: broken version: 1} due to error: "
    assert err.details().startswith(prefix), err.details()
    assert err.details().endswith("}, }")
    [(version, state, code, message)] = status(client, "broken")
    assert (version, state) == (1, END) and code != 0
    assert message in err.details()
    # Already configured models are not waited for: the same list again succeeds at once.
    client.models.HandleReloadConfigRequest(
        config_request((HPT, HALF_PLUS_TWO), ("broken", broken)))


def test_reload_refusals(client: Client, tmp_path: Path) -> None:
    cases = [
        (model_management_pb2.ReloadConfigRequest(), grpc.StatusCode.INVALID_ARGUMENT,
         ("ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
          "ModelConfigList is currently supported")),
        (config_request((HPT, HALF_PLUS_TWO), (HPT, THREE)), grpc.StatusCode.INVALID_ARGUMENT,
         f"Illegal to list model {HPT} multiple times in config list"),
        (config_request((HPT, HALF_PLUS_TWO), labels='version_labels { key: "a" value: 9 }'),
         grpc.StatusCode.FAILED_PRECONDITION,
         (f"Request to assign label to version 9 of model {HPT}, which is not currently "
          "available for inference")),
    ]
    custom = model_management_pb2.ReloadConfigRequest()
    custom.config.custom_model_config.type_url = "x"
    cases.append((custom, *cases[0][1:]))
    for request, code, details in cases:
        err = rpc_error(client.models.HandleReloadConfigRequest, request)
        assert (err.code(), err.details()) == (code, details)
    assert predict(client, HPT, 2.0) == 3.0  # nothing changed


def test_reload_metrics_are_reported(client: Client) -> None:
    request = config_request((HPT, HALF_PLUS_TWO))
    request.metric_names.extend(["x", "y"])
    response = client.models.HandleReloadConfigRequest(request)
    assert [(m.name, m.WhichOneof("value_increase"), m.int64_value_increase)
            for m in response.metric] == [("x", "int64_value_increase", 0),
                                          ("y", "int64_value_increase", 0)]


def test_reload_wait_ends_with_the_deadline(client: Client, tmp_path: Path) -> None:
    """A new model without versions never loads; the caller's deadline ends the wait, and the
    worker is free again."""
    err = rpc_error(client.models.HandleReloadConfigRequest,
                    config_request((HPT, HALF_PLUS_TWO), ("empty", tmp_path)), timeout=0.3)
    assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    client.models.HandleReloadConfigRequest(config_request((HPT, HALF_PLUS_TWO)))
    assert predict(client, HPT, 2.0) == 3.0
