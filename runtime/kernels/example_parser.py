"""Parsing serialized ``tf.train.Example`` protos into tensors, as TensorFlow's fast parser does.

Used by ``ParseExample``, ``ParseExampleV2`` and ``ParseSingleExample``. A feature is read
one of four ways:

- dense, fixed shape: every example gives exactly ``prod(shape)`` values, or the feature's default
  fills in for a missing one (no default: the feature is required);
- dense, variable length (first dimension -1): each example gives a multiple of the remaining
  dimensions' size; rows are padded with the (single-element) default to the longest example;
- sparse: ``indices`` [total, 2] (example, position), ``values``, ``dense_shape`` [batch, longest];
- ragged: the values of all examples and ``row_splits`` [batch + 1].

A vector of examples is parsed in batch mode (messages name the example and its index); a scalar
in single mode (``ParseSingleExample``'s messages and shapes: no batch dimension, sparse indices
[n, 1], empty ragged splits). A feature whose ``kind`` is unset counts as missing; a key that
appears twice in one example keeps its last value, as protobuf's map does. Messages are
TensorFlow's.

Decoding is protobuf's (``upb``). This module holds the feature specs, the checks TensorFlow makes
when the op is built, and single mode; batch mode is ``example_batch``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from protos.tensorflow.core.example import example_pb2
from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError

_FROM_STRING = example_pb2.Example.FromString

# The Feature oneof member that carries each supported dtype, and back.
LIST_KIND = {
    DataType.DT_FLOAT: "float_list",
    DataType.DT_INT64: "int64_list",
    DataType.DT_STRING: "bytes_list",
}
KIND_DTYPE = {kind: dtype for dtype, kind in LIST_KIND.items()}
KIND_WORD = {DataType.DT_FLOAT: "float", DataType.DT_INT64: "int64", DataType.DT_STRING: "bytes"}
NUMPY = {DataType.DT_FLOAT: np.float32, DataType.DT_INT64: np.int64, DataType.DT_STRING: object}


def type_name(dtype: DataType) -> str:
    return dtypes.short_name(dtype)


def shape_text(shape: Sequence[int]) -> str:
    """``PartialTensorShape::DebugString``: ``[?,2]``."""
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


@dataclass(frozen=True)
class DenseFeature:
    key: str
    dtype: DataType
    shape: tuple[int, ...]
    default: np.ndarray
    variable: bool = field(init=False)
    stride: int = field(init=False)  # values per row (variable) or per example (fixed)
    kind: str = field(init=False)

    def __post_init__(self) -> None:
        variable = bool(self.shape) and self.shape[0] == -1
        inner = self.shape[1:] if variable else self.shape
        object.__setattr__(self, "variable", variable)
        object.__setattr__(self, "stride", int(np.prod(inner, dtype=np.int64)))
        object.__setattr__(self, "kind", LIST_KIND[self.dtype])


@dataclass(frozen=True)
class ListFeature:
    """A sparse or ragged feature."""

    key: str
    dtype: DataType
    split_dtype: DataType = DataType.DT_INT64  # ragged only

    @property
    def kind(self) -> str:
        return LIST_KIND[self.dtype]


@dataclass
class Parsed:
    sparse_indices: list[np.ndarray]
    sparse_values: list[np.ndarray]
    sparse_shapes: list[np.ndarray]
    dense_values: list[np.ndarray]
    ragged_values: list[np.ndarray]
    ragged_splits: list[np.ndarray]


@dataclass
class Columns:
    """What a batch parse gathers before building arrays, per feature in example order: a dense
    feature's values (a fixed-shape feature's with its defaults filled in) and, for a
    variable-length one, each example's value count (empty for a fixed-shape one); then the
    values and counts of each sparse, then ragged, feature."""

    dense_values: list[list[Any]]
    dense_counts: list[list[int]]
    list_values: list[list[Any]]
    list_counts: list[list[int]]


def check_dense_shapes(shapes: Sequence[tuple[int, ...] | None]) -> list[tuple[int, ...]]:
    """The declared dense shapes, refusing what TensorFlow refuses when the op is built."""
    checked = []
    for d, shape in enumerate(shapes):
        if shape is None:
            raise InvalidArgumentError(f"dense_shapes[{d}] has unknown rank")
        inner = shape[1:] if shape and shape[0] == -1 else shape
        if any(dim < 0 for dim in inner):
            raise InvalidArgumentError(
                f"dense_shapes[{d}] has unknown rank or unknown inner dimensions: "
                f"{shape_text(shape)}"
            )
        checked.append(tuple(shape))
    return checked


def check_types(types: Sequence[int]) -> list[DataType]:
    result = []
    for t in types:
        dtype = DataType.of(t)
        if dtype not in LIST_KIND:
            raise InvalidArgumentError(f"Invalid config dtype: {type_name(dtype)}")
        result.append(dtype)
    return result


def dense_features(
    keys: Sequence[str],
    types: Sequence[DataType],
    shapes: Sequence[tuple[int, ...]],
    defaults: Sequence[np.ndarray],
) -> list[DenseFeature]:
    """Dense features with their defaults, after TensorFlow's checks of the defaults."""
    if len(defaults) != len(types):
        raise InvalidArgumentError(
            "Expected len(dense_defaults) == len(dense_keys) but got: "
            f"{len(defaults)} vs. {len(types)}"
        )
    features = []
    for d, (key, dtype, shape, default) in enumerate(zip(keys, types, shapes, defaults)):
        default = np.asarray(default)
        feature = DenseFeature(key, dtype, shape, default)
        if feature.variable:
            if default.size != 1:
                raise InvalidArgumentError(
                    f"dense_shape[{d}] is a variable length shape: {shape_text(shape)}, "
                    f"therefore def_value[{d}] must contain a single element (the padding "
                    f"element).  But its shape is: {shape_text(default.shape)}"
                )
        elif default.size > 0 and (
            default.ndim != len(shape)
            or any(s not in (-1, dim) for s, dim in zip(shape, default.shape))
        ):
            raise InvalidArgumentError(
                f"def_value[{d}].shape() == {shape_text(default.shape)} is not compatible with "
                f"dense_shapes_[{d}] == {shape_text(shape)}"
            )
        default_type = _dtype_of(default)
        if default_type != dtype:
            raise InvalidArgumentError(
                f"dense_defaults[{d}].dtype() == {_type_text(default_type, default)} != "
                f"dense_types_[{d}] == {type_name(dtype)}"
            )
        features.append(feature)
    return features


def _dtype_of(array: np.ndarray) -> DataType | None:
    try:
        return dtypes.from_numpy(array.dtype)
    except ValueError:
        return None


def _type_text(dtype: DataType | None, array: np.ndarray) -> str:
    return type_name(dtype) if dtype is not None else str(array.dtype)


def _show(record: Any) -> str:
    raw = record if isinstance(record, bytes) else str(record).encode()
    return raw.decode("utf-8", "backslashreplace")


def feature_map(record: Any) -> Any:
    """An example's feature map; a record that does not parse gets TensorFlow's message."""
    try:
        return _FROM_STRING(record).features.feature
    except TypeError:
        if isinstance(record, str):
            return feature_map(record.encode())
        raise
    except DecodeError:
        raise InvalidArgumentError(
            f"Could not parse example input, value: '{_show(record)}'"
        ) from None


def to_array(values: list[Any], dtype: DataType, shape: tuple[int, ...]) -> np.ndarray:
    """Python values as a tensor of ``dtype`` (strings as an object array of bytes)."""
    if dtype == DataType.DT_STRING:
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array.reshape(shape)
    return np.array(values, dtype=NUMPY[dtype]).reshape(shape)


# -- single mode ------------------------------------------------------------------------------


def parse_single(
    record: Any,
    dense: Sequence[DenseFeature],
    sparse: Sequence[ListFeature],
    ragged: Sequence[ListFeature],
) -> Parsed:
    """Parse one serialized example (a scalar input)."""
    features = feature_map(record)
    result = Parsed([], [], [], [], [], [])
    for spec in dense:
        feature = features.get(spec.key)
        kind = None if feature is None else feature.WhichOneof("kind")
        if kind is None:
            if spec.variable:
                result.dense_values.append(to_array([], spec.dtype, (0, *spec.shape[1:])))
            elif spec.default.size == 0:
                raise InvalidArgumentError(
                    f"Feature: {spec.key} (data type: {type_name(spec.dtype)}) is required but "
                    "could not be found."
                )
            else:
                result.dense_values.append(spec.default.reshape(spec.shape).copy())
            continue
        if kind != spec.kind:
            raise InvalidArgumentError(
                f"Key: {spec.key}.  Data types don't match. Data type: "
                f"{type_name(KIND_DTYPE[kind])} but expected type: {type_name(spec.dtype)}"
            )
        values = getattr(feature, kind).value
        if spec.variable:
            if len(values) % spec.stride:
                raise InvalidArgumentError(
                    f"Error while parsing feature with key {spec.key}: number of elements should "
                    f"be divisible by {spec.stride}, found {len(values)} instead"
                )
            shape = (len(values) // spec.stride, *spec.shape[1:])
        elif len(values) != spec.stride:
            detail = (
                f"Parsing {kind} failed."
                if len(values) > spec.stride and spec.dtype == DataType.DT_STRING
                else f"Some {kind} slice was not parsed."
            )
            raise InvalidArgumentError(
                f"Key: {spec.key}.  Can't parse serialized Example: {detail}"
            )
        else:
            shape = spec.shape
        result.dense_values.append(to_array(list(values), spec.dtype, shape))
    for specs, is_sparse in ((sparse, True), (ragged, False)):
        for list_spec in specs:
            feature = features.get(list_spec.key)
            kind = None if feature is None else feature.WhichOneof("kind")
            if kind is not None and kind != list_spec.kind:
                raise InvalidArgumentError(
                    f"Key: {list_spec.key}.  Data types don't match. Expected type: "
                    f"{type_name(list_spec.dtype)}, Actual type: {type_name(KIND_DTYPE[kind])}"
                )
            items = list(getattr(feature, kind).value) if kind is not None else []
            values = to_array(items, list_spec.dtype, (len(items),))
            if is_sparse:
                result.sparse_indices.append(np.arange(len(items), dtype=np.int64)[:, None])
                result.sparse_values.append(values)
                result.sparse_shapes.append(np.array([len(items)], dtype=np.int64))
            else:
                result.ragged_values.append(values)
                result.ragged_splits.append(
                    np.zeros(0, dtype=dtypes.to_numpy(list_spec.split_dtype))
                )
    return result
