"""Examples for classify/regress: Python feature dicts -> ``tf.Example`` protos or REST JSON.

An example is a mapping of feature name to one value or a sequence of values (a list, tuple or
numpy array), or a ready ``tf.Example``. The Python kind of the values picks the feature's list,
the way TensorFlow Serving's REST API reads JSON kinds, so both transports build the same
Example: ``bytes`` and ``str`` -> ``bytes_list`` (str as UTF-8), ``int`` and ``bool`` ->
``int64_list``, ``float`` -> ``float_list``; numpy scalars and arrays follow their dtype's kind.
Mind that ``1`` is an int64 feature and ``1.0`` a float one. A feature mixing kinds is refused
before anything is sent.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from protos.tensorflow.core.example import example_pb2, feature_pb2
from serving.client.errors import InvalidArgumentError

Example = example_pb2.Example
ExampleLike = Mapping[str, Any] | Example
Kind = Literal["bytes_list", "float_list", "int64_list"]
# name -> (kind, values); kind None for a feature given no values.
Features = dict[str, tuple["Kind | None", list[Any]]]


def _kind(value: Any, name: str) -> Kind:
    if isinstance(value, (bytes, bytearray, memoryview, str, np.bytes_, np.str_)):
        return "bytes_list"
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return "int64_list"
    if isinstance(value, (float, np.floating)):
        return "float_list"
    raise InvalidArgumentError(
        f"Feature: {name} has a value of type {type(value).__name__}; expected bytes, str, int, "
        "bool or float"
    )


def _convert(value: Any, kind: Kind) -> Any:
    if kind == "bytes_list":
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if kind == "int64_list":
        return int(value)
    return float(value)


def _feature_values(name: str, value: Any) -> tuple[Kind | None, list[Any]]:
    if isinstance(value, np.ndarray):
        items: list[Any] = list(value.reshape(-1))
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    kinds = {_kind(v, name) for v in items}
    if len(kinds) > 1:
        raise InvalidArgumentError(
            f"Feature: {name} mixes value kinds {sorted(kinds)}; one feature holds one kind"
        )
    if not kinds:
        return None, []
    kind = kinds.pop()
    return kind, [_convert(v, kind) for v in items]


def _features_of_proto(example: Example) -> Features:
    out: Features = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[name] = (kind, list(getattr(feature, kind).value) if kind else [])
    return out


def features(example: ExampleLike) -> Features:
    """An example's features, normalized to (kind, values) per name."""
    if isinstance(example, Example):
        return _features_of_proto(example)
    if not isinstance(example, Mapping):
        raise InvalidArgumentError(
            f"an example is a mapping of feature name to values or a tf.Example; "
            f"found {type(example).__name__}"
        )
    return {str(name): _feature_values(str(name), value) for name, value in example.items()}


def to_proto(example: ExampleLike) -> Example:
    if isinstance(example, Example):
        return example
    proto = Example()
    for name, (kind, values) in features(example).items():
        feature: feature_pb2.Feature = proto.features.feature[name]
        if kind is not None:
            getattr(feature, kind).value.extend(values)
        else:
            feature.SetInParent()
    return proto


def _json_value(kind: Kind, value: Any) -> Any:
    if kind == "bytes_list":
        return {"b64": base64.b64encode(value).decode("ascii")}
    return value  # a Python float prints as "2.0", never as an int feature


def to_json(example: ExampleLike) -> dict[str, Any]:
    """The REST object for an example; bytes go as ``{"b64": ...}`` so any bytes survive."""
    out: dict[str, Any] = {}
    for name, (kind, values) in features(example).items():
        out[name] = [] if kind is None else [_json_value(kind, v) for v in values]
    return out


def example_list(examples: Sequence[ExampleLike]) -> list[ExampleLike]:
    """The examples as a list, refusing an empty one (TensorFlow Serving refuses it too)."""
    if isinstance(examples, (Mapping, Example)):
        raise InvalidArgumentError("examples must be a sequence of examples, not one example")
    items = list(examples)
    if not items:
        raise InvalidArgumentError("Input is empty.")
    return items
