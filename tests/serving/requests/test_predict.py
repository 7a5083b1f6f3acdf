"""The predict request layer on real models: resolution, validation, TensorFlow's numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from runtime.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError, OpError
from runtime.saved_model import Signature
from serving.core.server_core import ServerCore
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import (
    ArrayInputs,
    InputDecoder,
    PredictRequest,
    PredictResponse,
    predict,
)
from serving.rest.app import JsonInputs
from serving.rest.json_codec import parse_predict_body
from tests.serving.support import HALF_PLUS_TWO, expected_cases

X = np.array([[1.0], [2.0], [5.0]], dtype=np.float32)


def run(
    store: ServerCore, spec: ModelSpec, inputs: Mapping[str, Any] | InputDecoder, **kw: Any
) -> PredictResponse:
    """Predict with ``inputs``: a decoder, or values by alias as a Python caller has them."""
    decoder = inputs if hasattr(inputs, "decode") else ArrayInputs(inputs)  # type: ignore[arg-type]
    return predict(store, PredictRequest(spec, decoder, **kw))  # type: ignore[arg-type]


class RecordingDecoder:
    """Values by alias, typed by the caller once it has seen the signature (as REST's JSON)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = values
        self.seen: list[tuple[Signature, int | None]] = []

    def cheap(self) -> bool:
        return True

    def decode(self, signature: Signature, max_bytes: int | None) -> Mapping[str, Any]:
        self.seen.append((signature, max_bytes))
        return self.values

    def unknown_signature(self, key: str) -> OpError:
        return InvalidArgumentError(f"no {key} here")


def test_half_plus_two_matches_tensorflow(store: ServerCore) -> None:
    for (signature, _), case in expected_cases(HALF_PLUS_TWO).items():
        if signature != "serving_default":
            continue
        response = run(store, ModelSpec("half_plus_two"), case["in"])
        np.testing.assert_allclose(response.outputs["y"], case["out"]["y"], rtol=1e-5, atol=1e-6)


def test_response_names_the_resolved_version_and_signature(store: ServerCore) -> None:
    response = run(store, ModelSpec("half_plus_two"), {"x": X})
    assert response.model_spec == ModelSpec("half_plus_two", 123, None, "serving_default")
    assert list(response.outputs) == ["y"]
    for spec in (ModelSpec("half_plus_two", version=123),
                 ModelSpec("half_plus_two", version_label="stable")):
        assert run(store, spec, {"x": X}).model_spec.version == 123


def test_other_signatures_and_python_lists(store: ServerCore) -> None:
    response = run(store, ModelSpec("half_plus_two", signature_name="regress_x2_to_y3"),
                   {"inputs": [[4.0]]})
    np.testing.assert_allclose(response.outputs["outputs"], [[5.0]])


def test_unknown_model_version_and_label(store: ServerCore) -> None:
    with pytest.raises(NotFoundError, match=r"^Servable not found for request: Latest\(nope\)$"):
        run(store, ModelSpec("nope"), {"x": X})
    with pytest.raises(NotFoundError) as info:
        run(store, ModelSpec("half_plus_two", version=7), {"x": X})
    assert info.value.message == "Servable not found for request: Specific(half_plus_two, 7)"
    with pytest.raises(InvalidArgumentError, match="^Unrecognized servable version label: x$"):
        run(store, ModelSpec("half_plus_two", version_label="x"), {"x": X})
    with pytest.raises(InvalidArgumentError, match=r"^ModelSpec has no name specified\.$"):
        run(store, ModelSpec(""), {"x": X})


def test_unknown_signature_depends_on_the_transport_path(store: ServerCore) -> None:
    spec = ModelSpec("half_plus_two", signature_name="nope")
    with pytest.raises(FailedPreconditionError, match='^Serving signature key "nope" not found.$'):
        run(store, spec, {"x": X})
    json_body = JsonInputs(parse_predict_body(b'{"instances": [[1.0]]}'), cheap=True)
    with pytest.raises(InvalidArgumentError) as info:
        run(store, spec, json_body)
    assert info.value.message == 'Serving signature name: "nope" not found in signature def'
    # The same body, once the signature is known, is typed by it.
    typed = run(store, ModelSpec("half_plus_two"), json_body)
    assert typed.outputs["y"].dtype == np.float32 and typed.outputs["y"].tolist() == [[2.5]]


def test_decoder_receives_the_signature_and_the_byte_limit(store: ServerCore) -> None:
    decoder = RecordingDecoder({"x": X})
    response = predict(store, PredictRequest(ModelSpec("half_plus_two"), decoder), max_bytes=64)
    assert [(s.key, limit) for s, limit in decoder.seen] == [("serving_default", 64)]
    np.testing.assert_allclose(response.outputs["y"], X / 2 + 2)
    # An unknown signature is worded by the decoder, which then decodes nothing.
    unknown = RecordingDecoder({"x": X})
    with pytest.raises(InvalidArgumentError, match="^no nope here$"):
        run(store, ModelSpec("half_plus_two", signature_name="nope"), unknown)
    assert unknown.seen == []


def test_input_name_errors(store: ServerCore) -> None:
    spec = ModelSpec("half_plus_two")
    with pytest.raises(InvalidArgumentError) as info:
        run(store, spec, {"x": X, "z": X})
    assert info.value.message == (
        "input size does not match signature: 2!=1 len({x,z}) != len({x}). "
        "Sent extra: {z}. Missing but required: {}."
    )
    with pytest.raises(InvalidArgumentError) as info:
        run(store, spec, {})
    assert info.value.message == (
        "input size does not match signature: 0!=1 len({}) != len({x}). "
        "Sent extra: {}. Missing but required: {x}."
    )
    with pytest.raises(InvalidArgumentError) as info:
        run(store, spec, {"z": X})
    assert info.value.message == (
        "Signature input alias: x(feed name: serving_default_x:0) not found in request and no "
        "default value provided. Inputs expected to be in the request {z}, or default input "
        "alias set: "
    )


def test_wrong_dtype_is_refused(store: ServerCore) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        run(store, ModelSpec("half_plus_two"), {"x": X.astype(np.float64)})
    assert info.value.message == "Input 'x' expects a tensor of type float but double is provided"


def test_output_filter(store: ServerCore) -> None:
    spec = ModelSpec("custom", signature_name="compute")
    inputs = {"values": np.ones((2, 6), np.float32), "ids": np.array([0, 1], np.int64)}
    full = run(store, spec, inputs)
    assert list(full.outputs) == sorted(full.outputs)  # sorted alias order
    assert len(full.outputs) == 7
    picked = run(store, spec, inputs, output_filter=["picked", "features"])
    assert list(picked.outputs) == ["features", "picked"]
    np.testing.assert_array_equal(picked.outputs["picked"], full.outputs["picked"])
    with pytest.raises(InvalidArgumentError) as info:
        run(store, spec, inputs, output_filter=["nope"])
    assert info.value.message == (
        "output tensor alias not found in signature: nope Outputs expected to be in the set "
        "{any_large,features,mirrored,picked,positive_count,running,top_indices}."
    )
    with pytest.raises(InvalidArgumentError, match="^duplicate output tensor alias: picked$"):
        run(store, spec, inputs, output_filter=["picked", "picked"])
