"""Requests built from recorded tf.Examples: TF Serving's JSON example form, gRPC example lists,
and the recorded (inputs, outputs) of one signature."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from protos.tensorflow.core.example import example_pb2
from tests.serving.support import expected_cases


def cases(model_dir: Path, signature: str) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """(serialized examples, TensorFlow's outputs) for each recorded case of ``signature``."""
    return [
        (case["in"]["inputs"], case["out"])
        for (sig, _), case in sorted(expected_cases(model_dir).items())
        if sig == signature
    ]


def as_json(serialized: bytes) -> dict[str, Any]:
    """An Example as TensorFlow Serving's JSON example: 1 is int64, 1.0 float, "a" bytes."""
    example = example_pb2.Example.FromString(serialized)
    features: dict[str, Any] = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind is None:
            continue  # a feature with no value list reads as absent
        values = list(getattr(feature, kind).value)
        if kind == "bytes_list":
            values = [v.decode() for v in values]
        elif kind == "float_list":
            values = [float(v) for v in values]
        features[name] = values
    return features


def add_examples(request: Any, serialized: np.ndarray) -> None:
    """Put the serialized examples into a Classification/RegressionRequest's example list."""
    request.input.example_list.examples.extend(
        example_pb2.Example.FromString(bytes(s)) for s in serialized
    )
