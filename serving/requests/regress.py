"""Regress: run a regression signature on serialized tf.Examples.

TensorFlow Serving's checks and messages (``servables/tensorflow/regressor.cc``): exactly one
input, aliased ``inputs``, and exactly one output, aliased ``outputs``, a DT_FLOAT tensor of
shape [batch] or [batch, 1]. The method name is only checked when ``method_name_check`` is on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from serving.requests.example_signature import (
    INPUTS,
    OUTPUTS,
    REGRESS_METHOD_NAME,
    debug_string,
    dtype_name,
    examples_tensor,
    find_signature_def,
    shape_text,
    signature_key,
)
from serving.requests.model_spec import ModelSpec
from serving.requests.predict import checked_inputs
from serving.requests.run_timing import timed_run
from serving.servable import ServableManager


@dataclass(frozen=True)
class RegressRequest:
    model_spec: ModelSpec
    examples: Sequence[bytes]  # serialized tf.Examples (context already merged in)


@dataclass(frozen=True)
class RegressResponse:
    """``model_spec`` carries the model name, resolved version and resolved signature key;
    ``regressions`` one value per example (float32 values, as Python floats)."""

    model_spec: ModelSpec
    regressions: list[float]


def check_regression_signature(sig: Any, method_name_check: bool) -> None:
    """Refuse a SignatureDef proto ``sig`` that cannot regress."""
    if method_name_check and sig.method_name != REGRESS_METHOD_NAME:
        raise InvalidArgumentError(
            f"Expected regression signature method_name to be {REGRESS_METHOD_NAME}. "
            f"Was: {sig.method_name}"
        )
    if len(sig.inputs) != 1:
        raise InvalidArgumentError("Expected one input Tensor.")
    if len(sig.outputs) != 1:
        raise InvalidArgumentError("Expected one output Tensor.")
    if INPUTS not in sig.inputs:
        raise InvalidArgumentError(
            f"No regression inputs found in SignatureDef: {debug_string(sig)}"
        )
    if OUTPUTS not in sig.outputs:
        raise InvalidArgumentError(
            f"No regression outputs found in SignatureDef: {debug_string(sig)}"
        )


def regression_result(output: np.ndarray, num_examples: int) -> list[float]:
    """Validate the fetched tensor; one value per example."""
    if not (output.ndim == 1 or (output.ndim == 2 and output.shape[1] == 1)):
        raise InvalidArgumentError(
            "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] but got "
            f"{shape_text(output)}"
        )
    if output.shape[0] != num_examples:
        raise InvalidArgumentError(
            "Input batch size did not match output batch size: "
            f"{num_examples} vs. {output.shape[0]}"
        )
    if dtype_name(output) != DataType.DT_FLOAT.name:
        raise InvalidArgumentError(
            f"Expected output Tensor of DT_FLOAT.  Got: {dtype_name(output)}"
        )
    values: list[float] = output.reshape(-1).tolist()
    return values


def regress(
    manager: ServableManager,
    request: RegressRequest,
    *,
    method_name_check: bool = False,
    api: str = "Regress",
) -> RegressResponse:
    """``api``: the API its run is timed under (MultiInference runs its tasks through here)."""
    spec = request.model_spec
    key = signature_key(spec.signature_name)
    with manager.handle(spec.servable_request()) as handle:
        model = handle.servable
        check_regression_signature(find_signature_def(model, key), method_name_check)
        tensor = examples_tensor(request.examples)
        inputs = checked_inputs(model.signatures[key], {INPUTS: tensor})
        outputs = timed_run(model, handle.id.name, api, key, inputs, [OUTPUTS])
        regressions = regression_result(np.asarray(outputs[OUTPUTS]), len(tensor))
        return RegressResponse(ModelSpec(handle.id.name, handle.id.version, None, key), regressions)
