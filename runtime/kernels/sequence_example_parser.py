"""Parsing serialized ``tf.train.SequenceExample`` protos, as TensorFlow's
``FastParseSequenceExample`` does (``ParseSequenceExample`` and ``ParseSequenceExampleV2``).

A SequenceExample holds ``context`` features (one Feature per key, as a tf.Example does) and
``feature_lists`` (per key, one Feature per step of the sequence). Context features are read as
dense (exactly ``prod(shape)`` values, or the default for an example that lacks the key; a key
present with no kind counts as present with no values), sparse (indices [n, 2]: example,
position) or ragged (values and row splits [batch + 1]). Feature lists are ``sequence_lists``'s.

A vector of records is a batch; a scalar is one record without the batch dimension (sparse
indices lose their example column; ragged outer splits are a scalar, which TensorFlow leaves
unwritten and which is 0 here). Errors come in TensorFlow's order: a record that does not decode;
then type mismatches, context features before feature lists; then, feature by feature (context
dense, sparse, ragged; list dense, sparse, ragged), missing and miscounted values. Messages are
TensorFlow's.

Decoding is protobuf's (``upb``) where TensorFlow walks the wire format itself: the two agree on
every well-formed record, and both refuse a record that does not decode. This module holds a
node's feature config, the decoding and the context features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from protos.tensorflow.core.example import example_pb2
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.example_parser import DenseFeature, ListFeature, Parsed, to_array, type_name
from runtime.kernels.sequence_lists import (
    ListDense,
    ParsedLists,
    example_name,
    parse_lists,
    ragged_rows,
    scalar_split,
    scan_lists,
)

_FROM_STRING = example_pb2.SequenceExample.FromString


@dataclass(frozen=True)
class SequenceConfig:
    """One node's features. ``conflict`` is TensorFlow's message for a key asked for in two
    forms, raised when a batch is parsed (after the batch's own checks, as TensorFlow does)."""

    context_dense: tuple[DenseFeature, ...]
    context_sparse: tuple[ListFeature, ...]
    context_ragged: tuple[ListFeature, ...]
    list_dense: tuple[ListDense, ...]
    list_sparse: tuple[ListFeature, ...]
    list_ragged: tuple[ListFeature, ...]
    conflict: str | None = field(init=False)

    def __post_init__(self) -> None:
        conflict = _conflict(
            "Context feature", self.context_sparse, self.context_ragged, self.context_dense
        ) or _conflict("Sequence feature", self.list_sparse, self.list_ragged, self.list_dense)
        object.__setattr__(self, "conflict", conflict)


def _conflict(
    what: str,
    sparse: Sequence[ListFeature],
    ragged: Sequence[ListFeature],
    dense: Sequence[DenseFeature | ListDense],
) -> str | None:
    # TensorFlow files each key under one form; sparse first, then ragged, then dense.
    sparse_keys = {spec.key for spec in sparse}
    for spec in ragged:
        if spec.key in sparse_keys:
            return f"{what} {spec.key} cannot be both ragged and sparse"
    ragged_keys = {spec.key for spec in ragged}
    for dense_spec in dense:
        if dense_spec.key in sparse_keys or dense_spec.key in ragged_keys:
            return f"{what} {dense_spec.key} cannot be both dense and sparse"
    return None


def parse_sequences(
    records: Sequence[Any], names: Sequence[str] | None, config: SequenceConfig, batch: bool
) -> tuple[Parsed, ParsedLists]:
    """Parse serialized SequenceExamples: a batch, or one record (``batch`` False)."""
    if names and len(names) != len(records):
        raise InvalidArgumentError(
            "example_names must be empty or have the correct number of elements"
        )
    if config.conflict is not None:
        raise InvalidArgumentError(config.conflict)
    contexts, lists = _decode(records, names)
    # Every feature's types are checked (context first) before any count is.
    specs: tuple[ListFeature | DenseFeature, ...] = (
        *config.context_sparse,
        *config.context_ragged,
        *config.context_dense,
    )
    columns = [_context_column(contexts, s.key, s.kind, s.dtype, names) for s in specs]
    list_columns = scan_lists(
        lists, config.list_dense, config.list_sparse, config.list_ragged, names
    )
    sparse_columns = columns[: len(config.context_sparse)]
    ragged_columns = columns[len(sparse_columns) : len(sparse_columns) + len(config.context_ragged)]
    dense_columns = columns[len(sparse_columns) + len(ragged_columns) :]
    context = Parsed([], [], [], [], [], [])
    for dense_spec, (present, values) in zip(config.context_dense, dense_columns):
        context.dense_values.append(_dense(dense_spec, present, values, names, batch))
    for sparse_spec, (_, values) in zip(config.context_sparse, sparse_columns):
        indices, flat, shape = _sparse(sparse_spec.dtype, values, batch)
        context.sparse_indices.append(indices)
        context.sparse_values.append(flat)
        context.sparse_shapes.append(shape)
    for ragged_spec, (_, values) in zip(config.context_ragged, ragged_columns):
        flat, splits = ragged_rows(ragged_spec, values)
        context.ragged_values.append(flat)
        context.ragged_splits.append(splits if batch else scalar_split(ragged_spec))
    parsed_lists = parse_lists(
        list_columns, config.list_dense, config.list_sparse, config.list_ragged, names, batch
    )
    return context, parsed_lists


def _decode(records: Sequence[Any], names: Sequence[str] | None) -> tuple[list[Any], list[Any]]:
    """Each record's context feature map and feature list map."""
    contexts, lists = [], []
    for index, record in enumerate(records):
        try:
            message = _FROM_STRING(record.encode() if isinstance(record, str) else record)
        except DecodeError:
            raise InvalidArgumentError(
                f"Invalid protocol message input, example id: {example_name(names, index)}"
            ) from None
        contexts.append(message.context.feature)
        lists.append(message.feature_lists.feature_list)
    return contexts, lists


def _context_column(
    contexts: list[Any], key: str, kind: str, dtype: DataType, names: Sequence[str] | None
) -> tuple[list[bool], list[Any]]:
    """Per example: whether the key is there, and its values (empty without a kind)."""
    present, values = [], []
    for index, features in enumerate(contexts):
        feature = features.get(key)
        present.append(feature is not None)
        found = None if feature is None else feature.WhichOneof("kind")
        if found is None:
            values.append(())
            continue
        if found != kind:
            raise InvalidArgumentError(
                f"Name: {example_name(names, index)}, Context feature: {key}.  Data types don't "
                f"match. Expected type: {type_name(dtype)}"
            )
        values.append(getattr(feature, kind).value)
    return present, values


def _dense(
    spec: DenseFeature,
    present: list[bool],
    values: list[Any],
    names: Sequence[str] | None,
    batch: bool,
) -> np.ndarray:
    # TensorFlow sizes the output from the longest list seen (or the default) first.
    default = spec.default.reshape(-1).tolist()
    longest = max((len(v) for v in values), default=0)
    longest = max(longest, len(default))
    if longest != spec.stride:
        raise InvalidArgumentError(
            f"Inconsistent max number of elements for feature {spec.key}: expected "
            f"{spec.stride}, but found {longest}"
        )
    flat: list[Any] = []
    for index, (here, items) in enumerate(zip(present, values)):
        if not here:
            if not default:
                raise InvalidArgumentError(
                    f"Feature: {spec.key} (data type: {type_name(spec.dtype)}) is required but "
                    "could not be found."
                )
            flat.extend(default)
        elif len(items) != longest:
            raise InvalidArgumentError(
                f"Unexpected number of elements in example {example_name(names, index)}"
            )
        else:
            flat.extend(items)
    shape = (len(values), *spec.shape) if batch else spec.shape
    return to_array(flat, spec.dtype, shape)


def _sparse(
    dtype: DataType, values: list[Any], batch: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices [n, 2] (example, position), or [n, 1] for one record; values; dense shape."""
    counts = np.array([len(v) for v in values], dtype=np.int64)
    flat = [item for items in values for item in items]
    total = len(flat)
    starts = np.cumsum(counts) - counts
    positions = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
    longest = int(counts.max()) if counts.size else 0
    if batch:
        examples = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        indices = np.stack([examples, positions], axis=1)
        shape = np.array([counts.size, longest], dtype=np.int64)
    else:
        indices = positions.reshape(total, 1)
        shape = np.array([longest], dtype=np.int64)
    return indices, to_array(flat, dtype, (total,)), shape
