"""Classify: run a classification signature on serialized tf.Examples.

TensorFlow Serving's checks and messages (``servables/tensorflow/classifier.cc``): the signature
needs exactly one input, aliased ``inputs``, and one or two outputs among which ``classes``
(DT_STRING, [batch, num_classes]) and/or ``scores`` (DT_FLOAT, same shape). Its method name is
only checked when ``method_name_check`` is on (``--enable_signature_method_name_check``);
otherwise any signature of that shape classifies. Without ``classes`` every label is empty,
without ``scores`` every score is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from serving.requests.example_signature import (
    CLASSES,
    CLASSIFY_METHOD_NAME,
    INPUTS,
    SCORES,
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

Classification = list[tuple[bytes, float]]  # (label, score) per class


@dataclass(frozen=True)
class ClassifyRequest:
    model_spec: ModelSpec
    examples: Sequence[bytes]  # serialized tf.Examples (context already merged in)


@dataclass(frozen=True)
class ClassifyResponse:
    """``model_spec`` carries the model name, resolved version and resolved signature key."""

    model_spec: ModelSpec
    classifications: list[Classification]


def check_classification_signature(sig: Any, method_name_check: bool) -> list[str]:
    """The output aliases a classification fetches (``classes`` before ``scores``) from the
    SignatureDef proto ``sig``."""
    if method_name_check and sig.method_name != CLASSIFY_METHOD_NAME:
        raise InvalidArgumentError(
            f"Expected classification signature method_name to be {CLASSIFY_METHOD_NAME}. "
            f"Was: {sig.method_name}"
        )
    inputs, outputs = sig.inputs, sig.outputs
    if len(inputs) != 1:
        raise InvalidArgumentError("Expected one input Tensor.")
    if len(outputs) not in (1, 2):
        raise InvalidArgumentError(f"Expected one or two output Tensors, found {len(outputs)}")
    if INPUTS not in inputs:
        raise InvalidArgumentError(
            f"No classification inputs found in SignatureDef: {debug_string(sig)}"
        )
    aliases = [alias for alias in (CLASSES, SCORES) if alias in outputs]
    if not aliases:
        raise InvalidArgumentError(
            "Expected classification signature outputs to contain at least one of "
            f'"{CLASSES}" or "{SCORES}". Signature was: {debug_string(sig)}'
        )
    return aliases


def _check_output(array: np.ndarray, name: str, dtype: DataType, num_examples: int) -> None:
    if array.ndim != 2:
        raise InvalidArgumentError(
            f"Expected Tensor shape: [batch_size num_classes] but got {shape_text(array)}"
        )
    if dtype_name(array) != dtype.name:
        raise InvalidArgumentError(
            f"Expected {name} Tensor of {dtype.name}. Got: {dtype_name(array)}"
        )
    if array.shape[0] != num_examples:
        raise InvalidArgumentError(
            f"Expected {name} output batch size of {num_examples}. Got: {array.shape[0]}"
        )


def classification_result(
    classes: np.ndarray | None, scores: np.ndarray | None, num_examples: int
) -> list[Classification]:
    """Validate the fetched tensors and pair labels with scores, per example."""
    if classes is not None:
        _check_output(classes, "classes", DataType.DT_STRING, num_examples)
    if scores is not None:
        _check_output(scores, "scores", DataType.DT_FLOAT, num_examples)
    if classes is not None and scores is not None and classes.shape[1] != scores.shape[1]:
        raise InvalidArgumentError(
            "Tensors class and score should match in dim_size(1). "
            f"Got {classes.shape[1]} vs. {scores.shape[1]}"
        )
    present = classes if classes is not None else scores
    num_classes = 0 if present is None else present.shape[1]
    labels = (
        [[bytes(label) for label in row] for row in classes.tolist()]
        if classes is not None
        else [[b""] * num_classes] * num_examples
    )
    values = scores.tolist() if scores is not None else [[0.0] * num_classes] * num_examples
    return [list(zip(labels[i], values[i], strict=True)) for i in range(num_examples)]


def classify(
    manager: ServableManager,
    request: ClassifyRequest,
    *,
    method_name_check: bool = False,
    api: str = "Classify",
) -> ClassifyResponse:
    """``api``: the API its run is timed under (MultiInference runs its tasks through here)."""
    spec = request.model_spec
    key = signature_key(spec.signature_name)
    with manager.handle(spec.servable_request()) as handle:
        model = handle.servable
        aliases = check_classification_signature(find_signature_def(model, key), method_name_check)
        tensor = examples_tensor(request.examples)
        inputs = checked_inputs(model.signatures[key], {INPUTS: tensor})
        outputs = timed_run(model, handle.id.name, api, key, inputs, aliases)
        classifications = classification_result(
            None if CLASSES not in outputs else np.asarray(outputs[CLASSES]),
            None if SCORES not in outputs else np.asarray(outputs[SCORES]),
            len(tensor),
        )
        return ClassifyResponse(
            ModelSpec(handle.id.name, handle.id.version, None, key), classifications
        )
