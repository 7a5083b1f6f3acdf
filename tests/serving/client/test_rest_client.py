"""RestClient against the real daemon: numbers from TensorFlow's recordings, errors with codes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from protos.tensorflow.core.example import example_pb2
from runtime import errors as runtime_errors
from serving.client import (
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    ServingError,
    UnavailableError,
    UnimplementedError,
    VersionStatus,
    connect,
)
from serving.client.rest_client import RestClient
from tests.serving.client.conftest import CUSTOM, HALF_PLUS_THREE, MULTI_IO
from tests.serving.rest.server_process import free_port
from tests.serving.support import expected_cases


def assert_outputs(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for alias, expected in want.items():
        assert got[alias].dtype == expected.dtype, alias
        assert got[alias].shape == expected.shape, alias
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(got[alias], expected, rtol=1e-5, atol=1e-6, err_msg=alias)
        else:
            np.testing.assert_array_equal(got[alias], expected, err_msg=alias)


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_half_plus_two(rest: RestClient) -> None:
    x = np.array([[1.0], [2.0], [-5.0]], np.float32)
    outputs = rest.predict("half_plus_two", {"x": x})
    assert list(outputs) == ["y"]
    assert outputs["y"].dtype == np.float32
    np.testing.assert_array_equal(outputs["y"], 0.5 * x + 2)
    # A Python literal is sent as JSON and typed by the server's signature.
    literal = rest.predict("half_plus_two", {"x": [[1.0], [2.0], [-5.0]]})
    np.testing.assert_array_equal(literal["y"], outputs["y"])


def test_version_and_label_select_the_same_version(rest: RestClient) -> None:
    x = {"x": np.array([[4.0]], np.float32)}
    for selection in ({"version": 123}, {"label": "stable"}, {}):
        assert rest.predict("half_plus_two", x, **selection)["y"].tolist() == [[4.0]]


@pytest.mark.parametrize(
    ("model", "path"), [("functional_multi_io", MULTI_IO), ("custom_module", CUSTOM)]
)
def test_fixture_models_match_tensorflow(rest: RestClient, model: str, path: Path) -> None:
    cases = expected_cases(path)
    assert cases
    for (signature, case), tensors in sorted(cases.items()):
        got = rest.predict(model, tensors["in"], signature_name=signature)
        assert_outputs(got, tensors["out"])


def test_output_filter(rest: RestClient) -> None:
    (signature, _), tensors = min(expected_cases(CUSTOM).items())
    assert signature == "compute"
    got = rest.predict(
        "custom_module",
        tensors["in"],
        signature_name=signature,
        output_filter=["top_indices", "any_large"],
    )
    assert list(got) == ["top_indices", "any_large"]
    assert_outputs(got, {k: tensors["out"][k] for k in ("top_indices", "any_large")})
    with pytest.raises(InvalidArgumentError) as err:
        rest.predict(
            "custom_module", tensors["in"], signature_name=signature, output_filter=["nope"]
        )
    assert err.value.message.startswith("output tensor alias not found in signature: nope")
    with pytest.raises(InvalidArgumentError, match="duplicate output tensor alias: picked"):
        rest.predict(
            "custom_module",
            tensors["in"],
            signature_name=signature,
            output_filter=["picked", "picked"],
        )


def _examples(serialized: np.ndarray) -> list[example_pb2.Example]:
    return [example_pb2.Example.FromString(bytes(s)) for s in serialized]


def test_classify_and_regress_match_tensorflow(rest: RestClient) -> None:
    cases = expected_cases(HALF_PLUS_THREE)
    for (signature, case), tensors in sorted(cases.items()):
        if signature.startswith("classify"):
            got = rest.classify(
                "half_plus_three", _examples(tensors["in"]["inputs"]), signature_name=signature
            )
            want = tensors["out"]["scores"]
            assert [[label for label, _ in r] for r in got] == [[""]] * len(want)
            np.testing.assert_allclose([[s for _, s in r] for r in got], want, rtol=1e-6)
        elif signature in ("regress_x_to_y", "regress_x_to_y2"):
            got_values = rest.regress(
                "half_plus_three", _examples(tensors["in"]["inputs"]), signature_name=signature
            )
            np.testing.assert_allclose(got_values, tensors["out"]["outputs"][:, 0], rtol=1e-6)


def test_classify_and_regress_feature_dicts(rest: RestClient) -> None:
    got = rest.classify(
        "half_plus_two",
        [{"x": 1.0}, {"x": [3.0]}, {"x": np.float32(-4)}],
        signature_name="classify_x_to_y",
    )
    assert got == [[("", 2.5)], [("", 3.5)], [("", 0.0)]]
    values = rest.regress(
        "half_plus_two",
        [{}, {"x": 2.0}],
        context={"x": 10.0},
        signature_name="regress_x_to_y",
        label="stable",
    )
    assert values == [7.0, 3.0]  # the example's own feature wins over the context's


def test_status(rest: RestClient) -> None:
    available = [VersionStatus(123, "AVAILABLE", "OK", "")]
    assert rest.get_model_status("half_plus_two") == available
    assert rest.get_model_status("half_plus_two", 123) == available
    with pytest.raises(NotFoundError) as err:
        rest.get_model_status("half_plus_two", 7)
    assert err.value.message == "Could not find version 7 of model half_plus_two"
    assert err.value.http_status == 404


def test_metadata(rest: RestClient) -> None:
    metadata = rest.get_model_metadata("half_plus_two")
    assert metadata["model_spec"] == {"name": "half_plus_two", "version": 123, "signature_name": ""}
    default = metadata["signature_def"]["serving_default"]
    assert default == {
        "method_name": "tensorflow/serving/predict",
        "inputs": {"x": {"name": "serving_default_x:0", "dtype": "DT_FLOAT", "shape": [-1, 1]}},
        "outputs": {
            "y": {"name": "StatefulPartitionedCall_4:0", "dtype": "DT_FLOAT", "shape": [-1, 1]}
        },
    }
    assert {"classify_x_to_y", "regress_x_to_y", "regress_x_to_y2"} <= set(
        metadata["signature_def"]
    )
    assert rest.get_model_metadata("half_plus_two", label="stable")["model_spec"]["version"] == 123


@pytest.mark.parametrize(
    ("model", "selection", "error", "status", "message"),
    [
        ("nope", {}, NotFoundError, 404, "Servable not found for request: Latest(nope)"),
        (
            "half_plus_two",
            {"version": 7},
            NotFoundError,
            404,
            "Servable not found for request: Specific(half_plus_two, 7)",
        ),
        (
            "half_plus_two",
            {"label": "canary"},
            InvalidArgumentError,
            400,
            "Unrecognized servable version label: canary",
        ),
        (
            "half_plus_two",
            {"signature_name": "nope"},
            InvalidArgumentError,
            400,
            'Serving signature name: "nope" not found in signature def',
        ),
    ],
)
def test_unknown_model_version_label_signature(
    rest: RestClient,
    model: str,
    selection: dict[str, object],
    error: type[ServingError],
    status: int,
    message: str,
) -> None:
    with pytest.raises(error) as raised:
        rest.predict(model, {"x": np.ones((1, 1), np.float32)}, **selection)  # type: ignore[arg-type]
    assert raised.value.message == message
    assert raised.value.http_status == status
    assert raised.value.code_name == error.code.name


def test_bad_inputs(rest: RestClient) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        rest.predict("half_plus_two", {"z": np.ones((1, 1), np.float32)})
    assert err.value.message == "Missing named input: x in 'inputs' object."
    assert isinstance(err.value, runtime_errors.InvalidArgumentError)  # one hierarchy
    with pytest.raises(InvalidArgumentError, match="is not of expected type: float"):
        rest.predict("half_plus_two", {"x": np.array([["a"]], object)})
    with pytest.raises(InvalidArgumentError, match="Feature: x"):
        rest.regress("half_plus_two", [{"y": 1.0}], signature_name="regress_x_to_y")


def test_refused_before_sending(rest: RestClient) -> None:
    with pytest.raises(InvalidArgumentError, match="cannot be supplied"):
        rest.predict("half_plus_two", {"x": [[1.0]]}, version=123, label="stable")
    with pytest.raises(InvalidArgumentError, match="Input is empty"):
        rest.classify("half_plus_two", [])
    with pytest.raises(InvalidArgumentError, match="mixes value kinds"):
        rest.classify("half_plus_two", [{"x": [1.0, "a"]}])
    with pytest.raises(InvalidArgumentError, match="positive number of seconds"):
        rest.get_model_status("half_plus_two", timeout=0)
    with pytest.raises(UnimplementedError, match="no config reload"):
        rest.reload_config([("m", "/models/m")])


def test_unreachable_and_silent_servers() -> None:
    with RestClient(f"127.0.0.1:{free_port()}") as client, pytest.raises(UnavailableError):
        client.get_model_status("m")
    with silent_server() as port, RestClient(f"127.0.0.1:{port}", timeout=0.2) as client:
        with pytest.raises(DeadlineExceededError):
            client.get_model_status("m")
        with pytest.raises(DeadlineExceededError):  # the per-call timeout wins
            client.predict("m", {"x": [1.0]}, timeout=0.1)


def test_connect_picks_the_transport(rest_server: object) -> None:
    port = rest_server.port  # type: ignore[attr-defined]
    with connect(f"http://127.0.0.1:{port}/", rest=True) as client:
        assert isinstance(client, RestClient)
        assert client.get_model_status("half_plus_three")[0].state == "AVAILABLE"


def test_answers_that_do_not_fit_the_signature_are_detected() -> None:
    f32 = np.dtype(np.float32)
    one = {"y": (f32, [-1, 1])}
    decoded = RestClient._decode([[1.5]], one)
    assert decoded is not None and decoded["y"].dtype == f32
    assert RestClient._decode({"a": [1.0], "b": [2.0]}, one) is None
    two = {"a": (f32, [-1]), "b": (np.dtype(np.int64), [-1])}
    decoded = RestClient._decode({"a": [1.0], "b": [2]}, two)
    assert decoded is not None and decoded["b"].dtype == np.int64
    assert RestClient._decode({"a": [1.0]}, two) is None
    assert RestClient._decode([1.0], two) is None
    # A lone scalar _bytes output arrives as a b64 object and is not mistaken for two outputs.
    bytes_out = RestClient._decode({"b64": "aGk="}, {"y_bytes": (np.dtype(object), [])})
    assert bytes_out is not None and bytes_out["y_bytes"][()] == b"hi"
