"""Batch mode of tf.Example parsing: a vector of serialized examples.

protobuf (``upb``) decodes each record; then each wanted feature is read across the whole batch
with ``map`` over C-implemented getters (``itemgetter``, ``attrgetter``, ``len``), so that the
interpreter runs a few steps per feature rather than per feature and example. Those reads see
value counts only. Where a count alone cannot tell (an empty list: absent, unset, or another type?)
the feature's kind is looked at; anything wrong, or rare, sends the batch to
``example_batch_checked``, which walks it example by example and raises TensorFlow's message for
the first bad example. Both build the same ``Columns``; the arrays are made here, the sparse
features' indices all at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, pairwise
from operator import attrgetter, itemgetter, methodcaller
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from protos.tensorflow.core.example import example_pb2
from runtime import dtypes
from runtime.dtypes import DataType
from runtime.kernels.example_batch_checked import gather_checked
from runtime.kernels.example_parser import (
    NUMPY,
    Columns,
    DenseFeature,
    ListFeature,
    Parsed,
    to_array,
)

_FROM_STRING = example_pb2.Example.FromString
_FEATURE_MAP = attrgetter("features.feature")
_KIND_OF = methodcaller("WhichOneof", "kind")
# A repeated field's values as a list: one C call, where iterating the container costs more.
_AS_LIST = itemgetter(slice(None))
_FIRST = itemgetter(0)

# Per dense feature: its getter from a feature map, its values' getter, its kind, stride,
# whether it has a variable length, and its default's values.
_DensePlan = tuple[Callable[[Any], Any], Callable[[Any], Any], str, int, bool, list[Any]]
# Per sparse or ragged feature: its getter from a feature map, its values' getter, its kind.
_ListPlan = tuple[Callable[[Any], Any], Callable[[Any], Any], str]


@dataclass(frozen=True)
class BatchPlan:
    """One node's features, with what each batch needs of them worked out once."""

    dense: list[DenseFeature]
    sparse: list[ListFeature]
    ragged: list[ListFeature]
    dense_plan: tuple[_DensePlan, ...] = field(init=False)
    list_plan: tuple[_ListPlan, ...] = field(init=False)
    fast: bool = field(init=False)

    def __post_init__(self) -> None:
        dense_plan = tuple(
            (itemgetter(spec.key), attrgetter(f"{spec.kind}.value"), spec.kind, spec.stride,
             spec.variable, spec.default.reshape(-1).tolist())
            for spec in self.dense
        )
        list_plan = tuple(
            (itemgetter(spec.key), attrgetter(f"{spec.kind}.value"), spec.kind)
            for spec in (*self.sparse, *self.ragged)
        )
        object.__setattr__(self, "dense_plan", dense_plan)
        object.__setattr__(self, "list_plan", list_plan)
        # With a zero-size row an empty list is a complete one; the checked walk sorts it out.
        object.__setattr__(self, "fast", all(spec.stride > 0 for spec in self.dense))


def parse_batch(records: Sequence[Any], names: Sequence[str] | None, plan: BatchPlan) -> Parsed:
    """Parse a vector of serialized examples."""
    columns = _gather(records, plan) if plan.fast else None
    if columns is None:
        columns = gather_checked(records, names, plan.dense, plan.sparse, plan.ragged)
    return _arrays(columns, plan, len(records))


def _gather(records: Sequence[Any], plan: BatchPlan) -> Columns | None:
    """The batch's values per feature, or None where the checked walk must decide."""
    try:
        maps = list(map(_FEATURE_MAP, map(_FROM_STRING, records)))
    except TypeError:
        if not any(isinstance(r, str) for r in records):
            return None
        return _gather([r.encode() if isinstance(r, str) else r for r in records], plan)
    except DecodeError:
        return None
    batch = len(maps)
    columns = Columns([], [], [], [])
    for get, values_of, kind, stride, variable, fill in plan.dense_plan:
        # A key an example lacks is added to its (private) map, as a Feature with no kind.
        values = list(map(values_of, map(get, maps)))
        counts = list(map(len, values))
        if variable:
            if not _settled(maps, get, counts, kind, stride):
                return None
            columns.dense_counts.append(counts)
        else:
            if counts.count(stride) != batch and not _fill(maps, get, values, counts, stride, fill):
                return None
            columns.dense_counts.append([])
            if stride == 1:
                columns.dense_values.append(list(map(_FIRST, values)))
                continue
        columns.dense_values.append(list(chain.from_iterable(map(_AS_LIST, values))))
    for get, values_of, kind in plan.list_plan:
        values = list(map(values_of, map(get, maps)))
        counts = list(map(len, values))
        if not _settled(maps, get, counts, kind, 1):
            return None
        columns.list_values.append(list(chain.from_iterable(map(_AS_LIST, values))))
        columns.list_counts.append(counts)
    return columns


def _fill(
    maps: list[Any],
    get: Callable[[Any], Any],
    values: list[Any],
    counts: list[int],
    stride: int,
    default: list[Any],
) -> bool:
    """Put a fixed-shape feature's default in for each example that lacks the feature; False
    where an example has it with the wrong count or type, or lacks it and there is no default."""
    if not default:
        return False
    for i, count in enumerate(counts):
        if count != stride:
            if count or _KIND_OF(get(maps[i])) is not None:
                return False
            values[i] = default
    return True


def _settled(
    maps: list[Any], get: Callable[[Any], Any], counts: list[int], kind: str, stride: int
) -> bool:
    """Whether a variable-length feature's counts need no message: every example with no values
    has no kind or the right one, and every count is a whole number of rows."""
    if 0 in counts:
        kinds = {_KIND_OF(get(m)) for m, count in zip(maps, counts) if not count}
        if not kinds <= {None, kind}:
            return False
    return stride == 1 or not any(count % stride for count in counts)


def _arrays(columns: Columns, plan: BatchPlan, batch: int) -> Parsed:
    result = Parsed([], [], [], [], [], [])
    for dense, values, counts, (*_, fill) in zip(
        plan.dense, columns.dense_values, columns.dense_counts, plan.dense_plan
    ):
        if dense.variable:
            result.dense_values.append(_pad_rows(values, counts, dense, fill[0], batch))
        else:
            result.dense_values.append(_vector(values, dense.dtype).reshape(batch, *dense.shape))
    num_sparse = len(plan.sparse)
    if num_sparse:
        indices, shapes = _sparse_layout(columns.list_counts[:num_sparse], batch)
        result.sparse_indices.extend(indices)
        result.sparse_shapes.extend(shapes)
        for sparse, values in zip(plan.sparse, columns.list_values):
            result.sparse_values.append(_vector(values, sparse.dtype))
    for ragged, values, counts in zip(
        plan.ragged, columns.list_values[num_sparse:], columns.list_counts[num_sparse:]
    ):
        result.ragged_values.append(_vector(values, ragged.dtype))
        splits = [0, *accumulate(counts)]
        result.ragged_splits.append(np.array(splits, dtype=dtypes.to_numpy(ragged.split_dtype)))
    return result


def _vector(values: list[Any], dtype: DataType) -> np.ndarray:
    if dtype == DataType.DT_STRING:
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    return np.array(values, dtype=NUMPY[dtype])


def _sparse_layout(
    counts_per_feature: list[list[int]], batch: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each sparse feature's indices [n, 2] (example, position) and dense shape [batch, longest],
    made for all the features together: a few numpy calls, however many features."""
    bounds = [0, *accumulate(map(sum, counts_per_feature))]
    total = bounds[-1]
    counts = np.array(counts_per_feature, dtype=np.int64).reshape(-1)
    starts = counts.cumsum() - counts
    if batch == 1:  # a request of one example, the most common: every row is 0
        indices = np.zeros((total, 2), dtype=np.int64)
    else:
        indices = np.empty((total, 2), dtype=np.int64)
        indices[:, 0] = (np.arange(counts.size, dtype=np.int64) % max(batch, 1)).repeat(counts)
    indices[:, 1] = np.arange(total, dtype=np.int64) - starts.repeat(counts)
    longest = [max(feature_counts, default=0) for feature_counts in counts_per_feature]
    shapes = np.array([[batch, n] for n in longest], dtype=np.int64)
    return [indices[a:b] for a, b in pairwise(bounds)], list(shapes)


def _pad_rows(
    values: list[Any], counts: list[int], spec: DenseFeature, pad: Any, batch: int
) -> np.ndarray:
    """[batch, longest, *inner]: each example's rows, then the padding value."""
    inner = spec.shape[1:]
    longest = max(counts, default=0) // spec.stride if spec.stride else 0
    per_example = longest * spec.stride
    out = _full(pad, spec.dtype, batch * per_example)
    if values:
        count_array = np.array(counts, dtype=np.int64)
        starts = np.cumsum(count_array) - count_array
        offsets = np.arange(batch, dtype=np.int64) * per_example - starts
        positions = np.repeat(offsets, count_array) + np.arange(len(values), dtype=np.int64)
        out[positions] = to_array(values, spec.dtype, (len(values),))
    return out.reshape((batch, longest, *inner))


def _full(value: Any, dtype: DataType, size: int) -> np.ndarray:
    if dtype == DataType.DT_STRING:
        array = np.empty(size, dtype=object)
        array[:] = [value] * size
        return array
    return np.full(size, value, dtype=NUMPY[dtype])
