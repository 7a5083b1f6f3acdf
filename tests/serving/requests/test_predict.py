"""The predict request layer on real models: resolution, validation, TensorFlow's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from serving.core.server_core import ServerCore
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import PredictRequest, PredictResponse, predict
from tests.serving.support import HALF_PLUS_TWO, expected_cases

X = np.array([[1.0], [2.0], [5.0]], dtype=np.float32)


def run(store: ServerCore, spec: ModelSpec, inputs: object, **kw: object) -> PredictResponse:
    return predict(store, PredictRequest(spec, inputs, **kw))  # type: ignore[arg-type]


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
    with pytest.raises(InvalidArgumentError) as info:
        run(store, spec, lambda signature: {"x": X})
    assert info.value.message == 'Serving signature name: "nope" not found in signature def'


def test_decoder_receives_the_signature(store: ServerCore) -> None:
    seen = []

    def decoder(signature: object) -> dict[str, np.ndarray]:
        seen.append(signature)
        return {"x": X}

    run(store, ModelSpec("half_plus_two"), decoder)
    assert [s.key for s in seen] == ["serving_default"]  # type: ignore[attr-defined]


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
