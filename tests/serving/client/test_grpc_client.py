"""GrpcClient over real gRPC on loopback, against a scripted servicer on our generated stubs.

``test_grpc_server.py`` runs the client against graphserve's own gRPC server. The scripted
servicer adds what that server cannot be made to do on demand: hold a request until the client
gives up (deadlines), and fail a reload through the response's status field. It decodes what the
client sent, answers half_plus_two's numbers (y = 0.5x + 2) computed with numpy, and fails with
TensorFlow Serving's codes and messages; requests are recorded to check what went on the wire.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import numpy as np
import pytest

from protos.tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)
from runtime import tensor_codec
from runtime.errors import Code
from serving.client import (
    DeadlineExceededError,
    FailedPreconditionError,
    GrpcClient,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
    VersionStatus,
    connect,
)
from serving.client.cli import main
from tests.serving.client.test_rest_client import silent_server
from tests.serving.rest.server_process import free_port

MODEL = "half_plus_two"


class Scripted(
    prediction_service_pb2_grpc.PredictionServiceServicer,
    model_service_pb2_grpc.ModelServiceServicer,
):
    def __init__(self) -> None:
        self.requests: list[Any] = []

    def _check(self, request: Any, context: grpc.ServicerContext) -> None:
        self.requests.append(request)
        spec = request.model_spec
        if spec.name == "slow":  # answers nothing until the client gives up
            done = threading.Event()
            context.add_callback(done.set)
            done.wait(60)
            context.abort(grpc.StatusCode.CANCELLED, "client went away")
        if spec.name != MODEL:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Servable not found for request: Latest({spec.name})"
            )
        if spec.WhichOneof("version_choice") == "version_label":
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Unrecognized servable version label: {spec.version_label}",
            )

    def Predict(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check(request, context)
        if request.model_spec.signature_name not in ("", "serving_default"):
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f'Serving signature key "{request.model_spec.signature_name}" not found.',
            )
        if "x" not in request.inputs:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "input size does not match signature")
        x = tensor_codec.to_ndarray(request.inputs["x"])
        response = predict_pb2.PredictResponse()
        response.outputs["y"].CopyFrom(tensor_codec.from_ndarray(0.5 * x + np.float32(2)))
        response.model_spec.name = MODEL
        response.model_spec.version.value = 123
        return response

    def Classify(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check(request, context)
        response = classification_pb2.ClassificationResponse()
        for example in request.input.example_list.examples:
            x = example.features.feature["x"].float_list.value[0]
            response.result.classifications.add().classes.add(label="", score=0.5 * x + 2)
        return response

    def Regress(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check(request, context)
        response = regression_pb2.RegressionResponse()
        with_context = request.input.example_list_with_context
        context_x = with_context.context.features.feature["x"].float_list.value
        for example in with_context.examples:
            x = (example.features.feature["x"].float_list.value or context_x)[0]
            response.result.regressions.add(value=0.5 * x + 2)
        return response

    def GetModelMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check(request, context)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = MODEL
        response.model_spec.version.value = 123
        signatures = get_model_metadata_pb2.SignatureDefMap()
        info = signatures.signature_def["serving_default"].inputs["x"]
        info.name, info.dtype = "x:0", 1
        response.metadata["signature_def"].Pack(signatures)
        return response

    def GetModelStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check(request, context)
        response = get_model_status_pb2.GetModelStatusResponse()
        response.model_version_status.add(version=123, state=30)
        return response

    def HandleReloadConfigRequest(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        response = model_management_pb2.ReloadConfigResponse()
        for config in request.config.model_config_list.config:
            if not config.base_path.startswith("/"):
                response.status.error_code = Code.FAILED_PRECONDITION
                response.status.error_message = f"base path {config.base_path} is relative"
        return response


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[str, Scripted]]:
    servicer = Scripted()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(servicer, server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", servicer
    server.stop(grace=None)


@pytest.fixture
def client(scripted: tuple[str, Scripted]) -> Iterator[GrpcClient]:
    with GrpcClient(scripted[0], timeout=30) as grpc_client:
        yield grpc_client


def test_predict_round_trip(client: GrpcClient, scripted: tuple[str, Scripted]) -> None:
    x = np.array([[1.0], [2.0], [-5.0]], np.float32)
    outputs = client.predict(
        MODEL, {"x": x}, version=123, signature_name="serving_default", output_filter=["y"]
    )
    assert outputs["y"].dtype == np.float32
    np.testing.assert_array_equal(outputs["y"], 0.5 * x + 2)
    sent = scripted[1].requests[-1]
    assert sent.model_spec.version.value == 123 and list(sent.output_filter) == ["y"]
    # A Python literal is float32, as tf.make_tensor_proto would make it.
    assert client.predict(MODEL, {"x": [[1.0]]})["y"].dtype == np.float32


def test_classify_regress_status_metadata(client: GrpcClient) -> None:
    assert client.classify(MODEL, [{"x": 1.0}, {"x": 3.0}]) == [[("", 2.5)], [("", 3.5)]]
    assert client.regress(MODEL, [{}, {"x": 2.0}], context={"x": 10.0}) == [7.0, 3.0]
    assert client.get_model_status(MODEL) == [VersionStatus(123, "AVAILABLE")]
    metadata = client.get_model_metadata(MODEL)
    assert metadata["model_spec"]["version"] == 123
    assert metadata["signature_def"]["serving_default"]["inputs"]["x"]["dtype"] == "DT_FLOAT"


def test_status_codes_and_messages(client: GrpcClient) -> None:
    with pytest.raises(NotFoundError) as not_found:
        client.predict("nope", {"x": [[1.0]]})
    assert not_found.value.message == "Servable not found for request: Latest(nope)"
    assert not_found.value.code_name == "NOT_FOUND" and not_found.value.http_status is None
    with pytest.raises(InvalidArgumentError, match="^Unrecognized servable version label: c"):
        client.get_model_status(MODEL, label="c")
    with pytest.raises(FailedPreconditionError, match='Serving signature key "s" not found.'):
        client.predict(MODEL, {"x": [[1.0]]}, signature_name="s")
    with pytest.raises(InvalidArgumentError, match="input size does not match"):
        client.predict(MODEL, {"z": [[1.0]]})
    with pytest.raises(InvalidArgumentError, match="cannot be supplied"):
        client.predict(MODEL, {"x": [[1.0]]}, version=1, label="a")


def test_reload_config(client: GrpcClient, scripted: tuple[str, Scripted]) -> None:
    client.reload_config([(MODEL, "/models/half_plus_two")])
    sent = scripted[1].requests[-1]
    assert [c.name for c in sent.config.model_config_list.config] == [MODEL]
    with pytest.raises(FailedPreconditionError, match="base path models/x is relative"):
        client.reload_config([("x", "models/x")])


def test_deadlines(scripted: tuple[str, Scripted]) -> None:
    with GrpcClient(scripted[0], timeout=0.3) as slow:
        with pytest.raises(DeadlineExceededError):
            slow.predict("slow", {"x": [[1.0]]})
        with pytest.raises(DeadlineExceededError):
            slow.get_model_status("slow", timeout=0.1)
    with (
        silent_server() as port,
        GrpcClient(f"127.0.0.1:{port}", timeout=0.3) as silent,
        pytest.raises(DeadlineExceededError),
    ):
        silent.get_model_status(MODEL)


def test_unreachable_server() -> None:
    with connect(f"127.0.0.1:{free_port()}", timeout=10) as unreachable:
        assert isinstance(unreachable, GrpcClient)
        with pytest.raises(UnavailableError):
            unreachable.get_model_status(MODEL)


def test_cli_over_grpc(scripted: tuple[str, Scripted], capsys: pytest.CaptureFixture[str]) -> None:
    target = scripted[0]
    assert main(["predict", "--server", target, "--model", MODEL, "--input", "x=[[1.0], [3]]"]) == 0
    assert capsys.readouterr().out == '{\n  "y": [[2.5], [3.5]]\n}\n'
    # The literal was typed from the signature's metadata before it was sent.
    assert scripted[1].requests[-1].inputs["x"].dtype == 1
    assert (
        main(["reload", "--server", target, "--model_name", "m", "--model_base_path", "/models/m"])
        == 0
    )
    assert capsys.readouterr().out == "reloaded\n"
    assert main(["status", "--server", target, "--model", "nope"]) == 1
    assert capsys.readouterr().err == ("NOT_FOUND: Servable not found for request: Latest(nope)\n")
