"""``ParseSingleSequenceExample``: one serialized ``tf.train.SequenceExample``, read the way
TensorFlow's kernel for that op reads it (a full proto walk, not the fast parser), with its
messages.

Context features are dense (exactly ``prod(shape)`` values; a key that is absent takes its default
or is required, a key present with no kind is a type mismatch) or sparse (indices [n, 1]).
Feature lists are dense ([steps, *shape]; a missing list is an error unless it is named in
``feature_list_dense_missing_assumed_empty``; a step with no kind is a type mismatch) or sparse
(indices [n, 2]: step, position; a step with no kind holds no values). A type mismatch quotes the
Feature in protobuf's text format, as TensorFlow's ``DebugString`` does (without the marker
protobuf puts in front of it, which changes from run to run by design).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from protos.tensorflow.core.example import example_pb2
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.example_parser import (
    KIND_WORD,
    DenseFeature,
    ListFeature,
    Parsed,
    shape_text,
    to_array,
    type_name,
)
from runtime.kernels.sequence_lists import ListDense, ParsedLists

_FROM_STRING = example_pb2.SequenceExample.FromString
_ESCAPES = {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord('"'): '\\"',
    ord("'"): "\\'",
    ord("\\"): "\\\\",
}


@dataclass(frozen=True)
class SingleConfig:
    context_dense: tuple[DenseFeature, ...]
    context_sparse: tuple[ListFeature, ...]
    list_dense: tuple[ListDense, ...]
    list_sparse: tuple[ListFeature, ...]


def parse_single_sequence(
    record: Any, name: str, config: SingleConfig
) -> tuple[Parsed, ParsedLists]:
    try:
        message = _FROM_STRING(record.encode() if isinstance(record, str) else record)
    except DecodeError:
        raise InvalidArgumentError(
            f"Could not parse example input, value: '{show_record(record)}'"
        ) from None
    context = Parsed([], [], [], [], [], [])
    features = message.context.feature
    for spec in config.context_dense:
        feature = features.get(spec.key)
        if feature is None:
            if spec.default.size == 0:
                raise InvalidArgumentError(
                    f"Name: {name}, Context feature '{spec.key}' is required but could not be "
                    "found."
                )
            context.dense_values.append(spec.default.reshape(spec.shape).copy())
            continue
        where = f"Name: {name}, Context feature: {spec.key}"
        values = _typed_values(feature, spec.kind, spec.dtype, where, unset_ok=False)
        _check_count(values, spec.dtype, spec.shape, name, spec.key, 0)
        context.dense_values.append(to_array(values, spec.dtype, spec.shape))
    for sparse_spec in config.context_sparse:
        feature = features.get(sparse_spec.key)
        where = f"Name: {name}, Context feature: {sparse_spec.key}"
        values = (
            []
            if feature is None
            else _typed_values(feature, sparse_spec.kind, sparse_spec.dtype, where, unset_ok=True)
        )
        context.sparse_indices.append(np.arange(len(values), dtype=np.int64).reshape(-1, 1))
        context.sparse_values.append(to_array(values, sparse_spec.dtype, (len(values),)))
        context.sparse_shapes.append(np.array([len(values)], dtype=np.int64))
    return context, _lists(message.feature_lists.feature_list, name, config)


def _lists(lists: Any, name: str, config: SingleConfig) -> ParsedLists:
    result = ParsedLists()
    for spec in config.list_dense:
        feature_list = lists.get(spec.key)
        if feature_list is None and not spec.missing_ok:
            raise InvalidArgumentError(
                f"Name: {name}, Feature list '{spec.key}' is required but could not be found.  "
                "Did you mean to include it in feature_list_dense_missing_assumed_empty or "
                "feature_list_dense_defaults?"
            )
        steps = [] if feature_list is None else feature_list.feature
        flat: list[Any] = []
        for step, feature in enumerate(steps):
            where = f"Name: {name}, Feature list: {spec.key}, Index: {step}"
            values = _typed_values(feature, spec.kind, spec.dtype, where, unset_ok=False)
            _check_count(values, spec.dtype, spec.shape, name, spec.key, step)
            flat.extend(values)
        result.dense_values.append(to_array(flat, spec.dtype, (len(steps), *spec.shape)))
    for sparse_spec in config.list_sparse:
        feature_list = lists.get(sparse_spec.key)
        steps = [] if feature_list is None else feature_list.feature
        per_step = [
            _typed_values(
                feature,
                sparse_spec.kind,
                sparse_spec.dtype,
                f"Name: {name}, Feature List: {sparse_spec.key}, Index: {step}",
                unset_ok=True,
            )
            for step, feature in enumerate(steps)
        ]
        indices = [(step, i) for step, values in enumerate(per_step) for i in range(len(values))]
        flat = [item for values in per_step for item in values]
        longest = max(map(len, per_step), default=0)
        result.sparse_indices.append(np.array(indices, dtype=np.int64).reshape(-1, 2))
        result.sparse_values.append(to_array(flat, sparse_spec.dtype, (len(flat),)))
        result.sparse_shapes.append(np.array([len(per_step), longest], dtype=np.int64))
    return result


def _typed_values(
    feature: Any, kind: str, dtype: DataType, where: str, unset_ok: bool
) -> list[Any]:
    """The Feature's values, or TensorFlow's message when its kind is not ``kind``."""
    found = feature.WhichOneof("kind")
    if found == kind:
        return list(getattr(feature, kind).value)
    if found is None and unset_ok:
        return []
    raise InvalidArgumentError(
        f"{where}.  Data types don't match. Expected type: {type_name(dtype)}  Feature is: "
        f"{feature_text(feature)}"
    )


def _check_count(
    values: Sequence[Any], dtype: DataType, shape: tuple[int, ...], name: str, key: str, index: int
) -> None:
    expected = int(np.prod(shape, dtype=np.int64))
    if len(values) == expected:
        return
    word = KIND_WORD[dtype]
    # TensorFlow's bytes message spells the key and the size differently.
    key_text, size = (
        (f"Key {key}", "Values") if dtype == DataType.DT_STRING else (f"Key: {key}", "values")
    )
    raise InvalidArgumentError(
        f"Name: {name}, {key_text}, Index: {index}.  Number of {word} values != expected.  "
        f"{size} size: {len(values)} but output shape: {shape_text(shape)}"
    )


def feature_text(feature: Any) -> str:
    """A Feature in protobuf's C++ text format (``Message::DebugString``)."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return ""
    text = _VALUE_TEXT[kind]
    lines = "".join(f"  value: {text(v)}\n" for v in getattr(feature, kind).value)
    return f"{kind} {{\n{lines}}}\n"


def _float_text(value: float) -> str:
    """C++ ``SimpleFtoa``: six significant digits, nine where six would not read back."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = f"{value:.6g}"
    return text if float(np.float32(text)) == value else f"{value:.9g}"


def _bytes_text(value: bytes) -> str:
    """C++ ``CEscape`` in double quotes: octal for what is not printable ASCII."""
    out = [_ESCAPES.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in value]
    return '"' + "".join(out) + '"'


def show_record(record: Any) -> str:
    raw = record if isinstance(record, bytes) else str(record).encode()
    return raw.decode("utf-8", "backslashreplace")


_VALUE_TEXT: dict[str, Callable[[Any], str]] = {
    "float_list": _float_text,
    "int64_list": str,
    "bytes_list": _bytes_text,
}
