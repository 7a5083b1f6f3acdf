"""TensorFlow Serving's JSON for :classify and :regress.

Request: ``{"signature_name": opt, "context": opt {feature: value | [values]},
"examples": [{feature: value | [values]}, ...]}``. Each object becomes a ``tf.Example``; the
JSON kind of its values picks the feature's list: strings and ``{"b64": ...}`` objects go to
``bytes_list``, integers and true/false to ``int64_list``, other numbers (``1.0``, ``1e3``,
``NaN``) to ``float_list`` as float32. With a context, every example is fed as the context's
bytes followed by its own, which protobuf parses as the two merged (the example wins).

Response: ``{"results": [[[label, score], ...] per example]}`` (classify) or
``{"results": [value, ...]}`` (regress), laid out as TensorFlow Serving's rapidjson writer lays
them out, numbers as float32 (``json_numbers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from protos.tensorflow.core.example import example_pb2
from runtime.errors import InvalidArgumentError
from serving.rest.json_numbers import float_tokens
from serving.rest.json_tensor import b64_decode, is_b64_object
from serving.rest.json_text import debug_string, json_type_name, parse_json, quote, quote_bytes

_BYTES, _FLOAT, _INT64 = "bytes_list", "float_list", "int64_list"
_KIND_NAMES = {_BYTES: "bytes", _FLOAT: "float", _INT64: "int64"}
# rapidjson keeps an integer literal as an integer only within int64 or uint64 range; beyond it
# the number is a double.
_INT64_MIN, _INT64_END, _UINT64_END = -(2**63), 2**63, 2**64


@dataclass(frozen=True)
class ExamplesBody:
    """A parsed :classify/:regress body: the signature and the examples to feed."""

    signature_name: str
    examples: list[bytes]  # serialized, context already prepended


def _format_error(document: Any, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"JSON Value: {debug_string(document)} {message}")


def _kind(value: Any, name: str) -> str:
    """Which list of the feature a JSON value belongs to."""
    if (
        value is None
        or isinstance(value, list)
        or (isinstance(value, dict) and not is_b64_object(value))
    ):
        raise InvalidArgumentError(
            f"Feature: {name} has element with unexpected JSON type: {json_type_name(value)}"
        )
    if isinstance(value, bool):
        return _INT64
    if isinstance(value, (str, dict)):
        return _BYTES
    if isinstance(value, float) or not _INT64_MIN <= value < _UINT64_END:
        return _FLOAT
    return _INT64


def _convert(value: Any, kind: str, name: str) -> Any:
    if kind == _BYTES:
        if isinstance(value, dict):
            return b64_decode(value)
        return value.encode("utf-8", "surrogateescape")
    if kind == _FLOAT:
        return float(value)  # the float list stores it as float32
    if value >= _INT64_END:
        raise InvalidArgumentError(
            f"Feature: {name} has uint64_t element. Only int64_t is supported."
        )
    return int(value)


def _feature_values(name: str, content: Any) -> tuple[str | None, list[Any]]:
    kind: str | None = None
    values = []
    for item in content if isinstance(content, list) else [content]:
        item_kind = _kind(item, name)
        if kind is not None and item_kind != kind:
            raise InvalidArgumentError(
                f"Unexpected element type in feature: {name} expecting type: {_KIND_NAMES[kind]}"
            )
        kind = item_kind
        values.append(_convert(item, kind, name))
    return kind, values


def make_example(value: Any) -> example_pb2.Example:
    """One JSON object as a tf.Example (an empty list makes a feature with no kind set)."""
    if not isinstance(value, dict):
        raise InvalidArgumentError(
            f"Example must be JSON object but got JSON {json_type_name(value)}"
        )
    example = example_pb2.Example()
    features = example.features.feature
    for name, content in value.items():
        kind, values = _feature_values(name, content)
        try:
            feature = features[name]
        except ValueError:  # protobuf keys must be UTF-8; the body had other bytes
            raise InvalidArgumentError(f"Feature name {quote(name)} is not valid UTF-8") from None
        if kind is not None:
            getattr(feature, kind).value.extend(values)
    return example


def parse_examples_body(body: bytes) -> ExamplesBody:
    """Parse a :classify or :regress body; raises InvalidArgumentError with TensorFlow Serving's
    messages (the missing-examples one names classify for both APIs, as upstream)."""
    document = parse_json(body)
    if not isinstance(document, dict):
        raise _format_error(document, "Is not object")
    signature_name = document.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise _format_error(
            document, "not formatted correctly. 'signature_name' key must be a string value."
        )
    context = b""
    if "context" in document:
        context = make_example(document["context"]).SerializeToString()
    if "examples" not in document:
        raise _format_error(
            document, "When method is classify, key 'examples' is expected and was not found"
        )
    examples = document["examples"]
    if not isinstance(examples, list):
        raise _format_error(document, "Expecting 'examples' value to be an list/array")
    if not examples:
        raise _format_error(document, "'examples' value is an empty array")
    serialized = [make_example(example).SerializeToString() for example in examples]
    if context:
        serialized = [context + example for example in serialized]
    return ExamplesBody(signature_name, serialized)


def _float32_tokens(values: Sequence[float]) -> list[str]:
    return float_tokens(np.asarray(values, dtype=np.float32))


def encode_classify_response(classifications: Sequence[Sequence[tuple[bytes, float]]]) -> bytes:
    """``{"results": ...}``: one line per example's classes, as TensorFlow Serving writes it."""
    if not classifications:
        raise InvalidArgumentError("Cannot convert empty ClassificationResults to JSON")
    rows = []
    for classes in classifications:
        scores = _float32_tokens([score for _, score in classes])
        pairs = (
            f"[{quote_bytes(label)}, {score}]"
            for (label, _), score in zip(classes, scores, strict=True)
        )
        rows.append("[" + ", ".join(pairs) + "]")
    text = '{\n    "results": [' + ", ".join(rows) + "\n    ]\n}"
    return text.encode("utf-8", "surrogateescape")


def encode_regress_response(regressions: Sequence[float]) -> bytes:
    """``{"results": [v, ...]}`` on one line."""
    if not regressions:
        raise InvalidArgumentError("Cannot convert empty RegressionResults to JSON")
    text = '{\n    "results": [' + ", ".join(_float32_tokens(regressions)) + "]\n}"
    return text.encode("utf-8", "surrogateescape")
