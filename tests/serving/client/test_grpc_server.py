"""GrpcClient against graphserve's own gRPC server (in-process, loopback), and against the REST
client on the same models: both transports must give the same answers and errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from serving.client import (
    FailedPreconditionError,
    GrpcClient,
    InvalidArgumentError,
    ModelConfig,
    NotFoundError,
    ServingError,
    VersionStatus,
)
from serving.client.cli import main
from serving.client.rest_client import RestClient
from serving.core.server_core import ServerCore
from serving.grpc.server import GrpcOptions, start_grpc_server
from tests.serving.client.conftest import CUSTOM, HALF_PLUS_THREE, MODELS, MULTI_IO
from tests.serving.client.test_rest_client import assert_outputs
from tests.serving.rest.server_process import free_port
from tests.serving.support import HALF_PLUS_TWO, expected_cases, start_core


def _configs() -> list[ModelConfig]:
    return [
        ModelConfig(name, path, version_labels={"stable": 123} if name == "half_plus_two" else {})
        for name, path in MODELS.items()
    ]


def _serve(core: ServerCore) -> tuple[str, object]:
    port = free_port()
    server = start_grpc_server(core, GrpcOptions(port=port, host="127.0.0.1"))
    return f"127.0.0.1:{port}", server


@pytest.fixture(scope="module")
def grpc_target() -> Iterator[str]:
    with start_core(_configs()) as core:
        target, server = _serve(core)
        yield target
        server.stop(None)  # type: ignore[attr-defined]


@pytest.fixture
def grpc_client(grpc_target: str) -> Iterator[GrpcClient]:
    with GrpcClient(grpc_target, timeout=60) as client:
        yield client


@pytest.mark.parametrize(
    ("model", "path"), [("functional_multi_io", MULTI_IO), ("custom_module", CUSTOM)]
)
def test_fixture_models_match_tensorflow(grpc_client: GrpcClient, model: str, path: Path) -> None:
    for (signature, _), tensors in sorted(expected_cases(path).items()):
        got = grpc_client.predict(model, tensors["in"], signature_name=signature)
        assert_outputs(got, tensors["out"])


def test_half_plus_two_versions_and_filter(grpc_client: GrpcClient) -> None:
    x = np.array([[1.0], [-3.0]], np.float32)
    for selection in ({}, {"version": 123}, {"label": "stable"}):
        got = grpc_client.predict("half_plus_two", {"x": x}, output_filter=["y"], **selection)  # type: ignore[arg-type]
        np.testing.assert_array_equal(got["y"], 0.5 * x + 2)
    assert grpc_client.get_model_status("half_plus_two") == [VersionStatus(123, "AVAILABLE")]


def _examples(serialized: np.ndarray) -> list[example_pb2.Example]:
    return [example_pb2.Example.FromString(bytes(s)) for s in serialized]


def test_classify_and_regress_match_tensorflow(grpc_client: GrpcClient) -> None:
    cases = expected_cases(HALF_PLUS_THREE)
    classify = cases[("classify_x_to_y", "batch3")]
    got = grpc_client.classify(
        "half_plus_three", _examples(classify["in"]["inputs"]), signature_name="classify_x_to_y"
    )
    np.testing.assert_allclose([[s for _, s in r] for r in got], classify["out"]["scores"])
    regress = cases[("regress_x_to_y2", "batch3")]
    values = grpc_client.regress(
        "half_plus_three", _examples(regress["in"]["inputs"]), signature_name="regress_x_to_y2"
    )
    np.testing.assert_allclose(values, regress["out"]["outputs"][:, 0])


@pytest.mark.parametrize(
    ("model", "selection", "error", "message"),
    [
        ("nope", {}, NotFoundError, "Servable not found for request: Latest(nope)"),
        (
            "half_plus_two",
            {"version": 7},
            NotFoundError,
            "Servable not found for request: Specific(half_plus_two, 7)",
        ),
        (
            "half_plus_two",
            {"label": "canary"},
            InvalidArgumentError,
            "Unrecognized servable version label: canary",
        ),
        (
            "half_plus_two",
            {"signature_name": "nope"},
            FailedPreconditionError,
            'Serving signature key "nope" not found.',
        ),
    ],
)
def test_errors(
    grpc_client: GrpcClient,
    model: str,
    selection: dict[str, object],
    error: type[ServingError],
    message: str,
) -> None:
    with pytest.raises(error) as raised:
        grpc_client.predict(model, {"x": np.ones((1, 1), np.float32)}, **selection)  # type: ignore[arg-type]
    assert raised.value.message == message


def test_bad_input(grpc_client: GrpcClient) -> None:
    with pytest.raises(InvalidArgumentError) as missing:
        grpc_client.predict("half_plus_two", {"z": np.ones((1, 1), np.float32)})
    assert "x" in missing.value.message and "z" in missing.value.message
    with pytest.raises(InvalidArgumentError):
        grpc_client.predict("half_plus_two", {"x": np.ones((1, 1), np.int64)})


def test_same_answers_as_rest(grpc_client: GrpcClient, rest: RestClient) -> None:
    """The REST daemon serves the same models: every API answers the same through both."""
    for model in MODELS:
        assert grpc_client.get_model_metadata(model) == rest.get_model_metadata(model)
        assert grpc_client.get_model_status(model) == rest.get_model_status(model)
    tensors = expected_cases(CUSTOM)[("compute", "batch4")]["in"]
    via_grpc = grpc_client.predict("custom_module", tensors, signature_name="compute")
    via_rest = rest.predict("custom_module", tensors, signature_name="compute")
    assert_outputs(via_rest, via_grpc)
    examples = [{"x": 1.0}, {"x": [3.0]}, {"x": 0.1}]
    for method in ("classify", "regress"):
        signature = f"{method}_x_to_y"
        assert getattr(grpc_client, method)(
            "half_plus_two", examples, signature_name=signature
        ) == getattr(rest, method)("half_plus_two", examples, signature_name=signature)
    for model, selection in (("nope", {}), ("half_plus_two", {"version": 7})):
        errors = []
        for client in (grpc_client, rest):
            with pytest.raises(ServingError) as raised:
                client.get_model_status(model, **selection)  # type: ignore[arg-type]
            errors.append((raised.value.code, raised.value.message))
        assert errors[0] == errors[1]


def test_reload_config() -> None:
    with start_core([ModelConfig("half_plus_two", HALF_PLUS_TWO)]) as core:
        target, server = _serve(core)
        try:
            with GrpcClient(target, timeout=120) as client:
                client.reload_config(
                    [("half_plus_two", HALF_PLUS_TWO), ("half_plus_three", HALF_PLUS_THREE)]
                )
                assert client.get_model_status("half_plus_three") == [VersionStatus(1, "AVAILABLE")]
                got = client.predict("half_plus_three", {"x": np.array([[2.0]], np.float32)})
                assert got["y"].tolist() == [[4.0]]  # y = 0.5x + 3
                twice = [("half_plus_two", HALF_PLUS_TWO)] * 2
                with pytest.raises(InvalidArgumentError, match="multiple times"):
                    client.reload_config(twice, timeout=30)
        finally:
            server.stop(None)  # type: ignore[attr-defined]


def test_cli_over_grpc(grpc_target: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["predict", "--server", grpc_target, "--model", "half_plus_two", "--input", "x=[[4]]"]
    assert main(argv) == 0
    assert capsys.readouterr().out == '{\n  "y": [[4.0]]\n}\n'
    assert main(["status", "--server", grpc_target, "--model", "half_plus_two"]) == 0
    assert '"state": "AVAILABLE"' in capsys.readouterr().out
    assert main(["metadata", "--server", grpc_target, "--model", "nope"]) == 1
    assert capsys.readouterr().err == "NOT_FOUND: Servable not found for request: Latest(nope)\n"
