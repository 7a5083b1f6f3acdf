"""The feature lists of parsed ``tf.train.SequenceExample`` protos (``FastParseSequenceExample``).

A feature list is read as:

- dense: every step holds exactly ``prod(shape)`` values; the output is [batch, most steps,
  *shape], padded with zeros (empty strings), with each example's step count in ``lengths``. A
  list an example lacks is an error unless it is ``missing_assumed_empty``;
- sparse: indices [n, 3] (example, step, position), dense shape [batch, most steps, longest step];
- ragged: the values end to end, inner splits over every step, outer splits over the examples.

A step whose Feature has no kind holds no values. One record (not a batch) drops the example
dimension. ``scan_lists`` reads and type-checks every list first, as TensorFlow sizes its outputs
before it fills them; ``parse_lists`` then checks the counts and builds the arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from operator import attrgetter, itemgetter, methodcaller
from typing import Any

import numpy as np

from runtime import dtypes
from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.example_parser import LIST_KIND, ListFeature, shape_text, to_array, type_name

# Per example: None where the list is absent, else each step's values.
Column = list[list[Any] | None]
_KIND_OF = methodcaller("WhichOneof", "kind")
# A repeated field's values as a list: one C call, where iterating the container costs more.
_AS_LIST = itemgetter(slice(None))


@dataclass(frozen=True)
class ListDense:
    """A dense feature list: every step holds ``prod(shape)`` values."""

    key: str
    dtype: DataType
    shape: tuple[int, ...]
    missing_ok: bool  # feature_list_dense_missing_assumed_empty
    stride: int = field(init=False)
    kind: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stride", int(np.prod(self.shape, dtype=np.int64)))
        object.__setattr__(self, "kind", LIST_KIND[self.dtype])


@dataclass
class ParsedLists:
    """The feature lists' outputs, each kind in the op's order."""

    sparse_indices: list[np.ndarray] = field(default_factory=list)
    sparse_values: list[np.ndarray] = field(default_factory=list)
    sparse_shapes: list[np.ndarray] = field(default_factory=list)
    dense_values: list[np.ndarray] = field(default_factory=list)
    dense_lengths: list[np.ndarray] = field(default_factory=list)
    ragged_values: list[np.ndarray] = field(default_factory=list)
    ragged_outer_splits: list[np.ndarray] = field(default_factory=list)
    ragged_inner_splits: list[np.ndarray] = field(default_factory=list)


def example_name(names: Sequence[str] | None, index: int) -> str:
    return names[index] if names else "<unknown>"


def scan_lists(
    lists: list[Any],
    dense: Sequence[ListDense],
    sparse: Sequence[ListFeature],
    ragged: Sequence[ListFeature],
    names: Sequence[str] | None,
) -> tuple[list[Column], list[Column], list[Column]]:
    """Each feature's column (dense, sparse, ragged), after the check of every step's type."""
    sparse_columns = [_column(lists, s.key, s.kind, s.dtype, names) for s in sparse]
    ragged_columns = [_column(lists, s.key, s.kind, s.dtype, names) for s in ragged]
    dense_columns = [_column(lists, s.key, s.kind, s.dtype, names) for s in dense]
    return dense_columns, sparse_columns, ragged_columns


def _column(
    lists: list[Any], key: str, kind: str, dtype: DataType, names: Sequence[str] | None
) -> Column:
    values_of = attrgetter(f"{kind}.value")
    column: Column = []
    for index, feature_lists in enumerate(lists):
        feature_list = feature_lists.get(key)
        if feature_list is None:
            column.append(None)
            continue
        # Every step read through C getters; a step of another kind (or none) is looked at.
        features = feature_list.feature
        kinds = list(map(_KIND_OF, features))
        if kinds.count(kind) == len(kinds):
            column.append(list(map(values_of, features)))
            continue
        steps: list[Any] = []
        for step, (feature, found) in enumerate(zip(features, kinds)):
            if found is None:
                steps.append(())
            elif found == kind:
                steps.append(values_of(feature))
            else:
                raise InvalidArgumentError(
                    f"Name: {example_name(names, index)}, Feature list: {key}, Index: {step}.  "
                    f"Data types don't match. Expected type: {type_name(dtype)}"
                )
        column.append(steps)
    return column


def parse_lists(
    columns: tuple[list[Column], list[Column], list[Column]],
    dense: Sequence[ListDense],
    sparse: Sequence[ListFeature],
    ragged: Sequence[ListFeature],
    names: Sequence[str] | None,
    batch: bool,
) -> ParsedLists:
    dense_columns, sparse_columns, ragged_columns = columns
    result = ParsedLists()
    for dense_spec, column in zip(dense, dense_columns):
        values, lengths = _dense(dense_spec, column, names, batch)
        result.dense_values.append(values)
        result.dense_lengths.append(lengths)
    for spec, column in zip(sparse, sparse_columns):
        indices, values, shape = _sparse(spec.dtype, column, batch)
        result.sparse_indices.append(indices)
        result.sparse_values.append(values)
        result.sparse_shapes.append(shape)
    for spec, column in zip(ragged, ragged_columns):
        values, inner = ragged_rows(spec, list(chain.from_iterable(filter(None, column))))
        result.ragged_values.append(values)
        result.ragged_inner_splits.append(inner)
        if batch:
            counts = [len(steps) if steps else 0 for steps in column]
            outer = np.array([0, *accumulate(counts)], dtype=inner.dtype)
        else:
            outer = scalar_split(spec)
        result.ragged_outer_splits.append(outer)
    return result


def _dense(
    spec: ListDense, column: Column, names: Sequence[str] | None, batch: bool
) -> tuple[np.ndarray, np.ndarray]:
    """[batch, most steps, *shape] padded with zeros, and each example's step count."""
    counts = [list(map(len, steps)) if steps else [] for steps in column]
    longest = max(map(sum, counts), default=0)
    # A zero-size step makes TensorFlow divide by zero; here it is refused with the same words.
    if not spec.stride or longest % spec.stride:
        raise InvalidArgumentError(
            f"Feature list '{spec.key}' has an unexpected number of values.  Total values size: "
            f"{longest} is not consistent with output shape: {shape_text((-1, *spec.shape))}"
        )
    pad = b"" if spec.dtype == DataType.DT_STRING else 0
    flat: list[Any] = []
    for index, (steps, step_counts) in enumerate(zip(column, counts)):
        if steps is None and not spec.missing_ok:
            raise InvalidArgumentError(
                f"Name: {example_name(names, index)}, Feature list '{spec.key}' is required but "
                "could not be found.  Did you mean to include it in "
                "feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?"
            )
        if step_counts.count(spec.stride) != len(step_counts):
            step, size = next((i, n) for i, n in enumerate(step_counts) if n != spec.stride)
            raise InvalidArgumentError(
                f"Name: {example_name(names, index)}, Key: {spec.key}, Index: {step}.  Number of "
                f"values != expected.  values size: {size} but output shape: "
                f"{shape_text(spec.shape)}"
            )
        if steps:
            flat.extend(chain.from_iterable(map(_AS_LIST, steps)))
        flat.extend([pad] * (longest - len(step_counts) * spec.stride))
    rows = longest // spec.stride
    shape = (len(column), rows, *spec.shape) if batch else (rows, *spec.shape)
    lengths = np.array(list(map(len, counts)), dtype=np.int64)
    return to_array(flat, spec.dtype, shape), lengths if batch else lengths.reshape(())


def _sparse(
    dtype: DataType, column: Column, batch: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices [n, 3] (example, step, position), or [n, 2] for one record; values; shape."""
    step_counts = [list(map(len, steps)) if steps else [] for steps in column]
    steps_per_example = np.array(list(map(len, step_counts)), dtype=np.int64)
    counts = np.array(list(chain.from_iterable(step_counts)), dtype=np.int64)
    flat = list(chain.from_iterable(map(_AS_LIST, chain.from_iterable(filter(None, column)))))
    step_index = np.arange(counts.size, dtype=np.int64) - np.repeat(
        np.cumsum(steps_per_example) - steps_per_example, steps_per_example
    )
    positions = np.arange(len(flat), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    columns = [np.repeat(step_index, counts), positions]
    if batch:
        examples = np.repeat(np.arange(len(column), dtype=np.int64), steps_per_example)
        columns.insert(0, np.repeat(examples, counts))
    most_steps = int(steps_per_example.max(initial=0))
    longest = int(counts.max(initial=0))
    shape = [len(column), most_steps, longest] if batch else [most_steps, longest]
    values = to_array(flat, dtype, (len(flat),))
    return np.stack(columns, axis=1), values, np.array(shape, dtype=np.int64)


def ragged_rows(spec: ListFeature, rows: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The rows' values end to end, and row splits [len(rows) + 1]."""
    flat = list(chain.from_iterable(map(_AS_LIST, rows)))
    splits = np.array([0, *accumulate(map(len, rows))], dtype=dtypes.to_numpy(spec.split_dtype))
    return to_array(flat, spec.dtype, (len(flat),)), splits


def scalar_split(spec: ListFeature) -> np.ndarray:
    """The scalar TensorFlow gives as outer splits for one record (its value is unwritten)."""
    return np.zeros((), dtype=dtypes.to_numpy(spec.split_dtype))
