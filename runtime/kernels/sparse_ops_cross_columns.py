"""The columns of a feature cross (see ``sparse_ops_cross``): TensorFlow's checks of the inputs,
and which features each output combines, found in three ways by size: columns with one feature
per row in row order need no product at all, small crosses are enumerated over Python lists, and
large ones are computed with numpy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from runtime.dtypes import DataType
from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str

U64 = np.uint64
# Below these sizes Python lists beat numpy's fixed cost per call (about a microsecond): the
# entries a layout walks, the combinations a product enumerates.
SMALL_ENTRIES = 128
SMALL_OUTPUTS = 64


def is_string(x: np.ndarray) -> bool:
    return x.dtype == object or x.dtype.kind in "SU"


# Named tuples rather than frozen dataclasses: built on every call, and half the cost.
class Columns(NamedTuple):
    """The crossed columns: each one's feature values (flat), each sparse column's feature rows
    (``indices[:, 0]``) and each dense column's width. Sparse columns come first."""

    batch: int
    features: tuple[np.ndarray, ...]
    rows: tuple[np.ndarray, ...]
    widths: tuple[int, ...]

    @property
    def sparse(self) -> int:
        return len(self.rows)


class Product(NamedTuple):
    """The combinations a cross emits: their ``[n, 2]`` output indices, the widest row's count
    and, per column, which of its features each combines — None when output ``i`` combines
    feature ``i`` of every column."""

    indices: np.ndarray
    picks: tuple[np.ndarray, ...] | None
    width: int

    def shape(self, batch: int) -> np.ndarray:
        return np.array([batch, self.width], np.int64)


def validate(indices: Sequence[np.ndarray], values: Sequence[np.ndarray],
             shapes: Sequence[np.ndarray], dense: Sequence[np.ndarray],
             internal_string: bool = False) -> int:
    """TensorFlow's input checks for a cross (``ValidateInput``); returns the batch size."""
    for i, ind in enumerate(indices):
        if ind.ndim != 2:
            raise InvalidArgumentError(
                f"Input indices should be a matrix but received shape {shape_str(ind.shape)} "
                f"at position {i}"
            )
        if ind.shape[1] != 2:
            raise InvalidArgumentError(
                f"Expected D2 of index to be 2 got {ind.shape[1]} at position {i}"
            )
    for i, (ind, val) in enumerate(zip(indices, values)):
        if internal_string and not is_string(val):
            raise InvalidArgumentError(
                f"Input values should be of internal type {int(DataType.DT_STRING)} but "
                f"received {int(DataType.DT_INT64)}"
            )
        if val.ndim != 1:
            raise InvalidArgumentError(
                f"Input values should be a vector but received shape {shape_str(val.shape)} "
                f"at position {i}"
            )
        if ind.shape[0] != val.shape[0]:
            raise InvalidArgumentError(
                f"Expected size of values to be {ind.shape[0]} got {val.shape[0]} at position {i}"
            )
    for i, shape in enumerate(shapes):
        if shape.ndim != 1:
            raise InvalidArgumentError(
                f"Input shapes should be a vector but received shape {shape_str(shape.shape)} "
                f"at position {i}"
            )
        if shape.size != 2:
            raise InvalidArgumentError(
                f"shape should imply a 2D tensor, but got {shape_str(shape.shape)} at position {i}"
            )
    for i, d in enumerate(dense):
        if internal_string and not is_string(d):
            raise InvalidArgumentError(
                f"Dense inputs should be of internal type {int(DataType.DT_STRING)} but "
                f"received {int(DataType.DT_INT64)}"
            )
        if d.ndim != 2:
            raise InvalidArgumentError(
                f"Dense inputs should be a matrix but received shape {shape_str(d.shape)} at "
                f"position {i}"
            )
    batch = int(shapes[0][0]) if shapes else (dense[0].shape[0] if dense else 0)
    for i, shape in enumerate(shapes):
        if int(shape[0]) != batch:
            raise InvalidArgumentError(
                f"Expected batch size {batch} got {int(shape[0])} at position {i}"
            )
    for i, d in enumerate(dense):
        if d.shape[0] != batch:
            raise InvalidArgumentError(
                f"Expected batch size {batch} got {d.shape[0]} at dense tensor {i}"
            )
    return batch


def gather_columns(indices: Sequence[np.ndarray], values: Sequence[np.ndarray],
                   dense: Sequence[np.ndarray], batch: int) -> Columns:
    return Columns(batch, tuple(values) + tuple(d.reshape(-1) for d in dense),
                   tuple(ind[:, 0] for ind in indices), tuple(d.shape[1] for d in dense))


def _one_per_row(rows: np.ndarray, batch: int) -> bool:
    if rows.size != batch:
        return False
    if batch <= SMALL_ENTRIES:
        return bool(rows.tolist() == list(range(batch)))
    return bool(np.array_equal(rows, np.arange(batch)))


def _runs(rows: list[int], batch: int) -> tuple[list[int], list[int]]:
    """Each batch row's (start, count) among a sparse column's entries.

    TensorFlow walks the entries once, batch row by batch row, taking the run of entries whose
    row is the current one. A run is thus taken only while runs come in increasing row order
    within [0, batch): the first run out of that order stops the walk, and later entries are
    never read.
    """
    starts, counts = [0] * batch, [0] * batch
    i, n, previous = 0, len(rows), -1
    while i < n:
        row = rows[i]
        if not previous < row < batch:
            break
        end = i + 1
        while end < n and rows[end] == row:
            end += 1
        starts[row], counts[row] = i, end - i
        previous, i = row, end
    return starts, counts


def _runs_numpy(rows: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """``_runs`` over arrays."""
    starts = np.zeros(batch, np.int64)
    counts = np.zeros(batch, np.int64)
    if rows.size == 0:
        return starts, counts
    run_starts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    run_rows = rows[run_starts]
    run_lengths = np.diff(np.append(run_starts, rows.size))
    ok = (run_rows >= 0) & (run_rows < batch)
    ok[1:] &= run_rows[1:] > run_rows[:-1]
    taken = np.logical_and.accumulate(ok)
    starts[run_rows[taken]] = run_starts[taken]
    counts[run_rows[taken]] = run_lengths[taken]
    return starts, counts


def _product_small(starts: list[list[int]], counts: list[list[int]],
                   per_row: list[int]) -> Product:
    pairs = [(b, k) for b, n in enumerate(per_row) for k in range(n)]
    combos: list[tuple[int, ...]] = []
    for b, n in enumerate(per_row):
        if n:
            # itertools.product varies its last range fastest: odometer order.
            combos.extend(itertools.product(*[range(s[b], s[b] + c[b])
                                              for s, c in zip(starts, counts)]))
    picks = [np.array(p, np.int64) for p in zip(*combos)] if combos else [
        np.zeros(0, np.int64) for _ in starts]
    return Product(np.array(pairs, np.int64).reshape(-1, 2), tuple(picks),
                   max(per_row, default=0))


def _product_numpy(starts: np.ndarray, counts: np.ndarray, batch: int) -> Product:
    crosses = np.prod(counts, axis=0)
    row = np.repeat(np.arange(batch, dtype=np.int64), crosses)
    k = np.arange(row.size, dtype=np.int64) - np.repeat(np.cumsum(crosses) - crosses, crosses)
    # Odometer order: column i advances once every prod(counts[i+1:]) outputs.
    strides = np.ones_like(counts)
    if counts.shape[0] > 1:
        strides[:-1] = np.cumprod(counts[:0:-1], axis=0)[::-1]
    picks = tuple(starts[i][row] + (k // strides[i][row]) % counts[i][row]
                  for i in range(counts.shape[0]))
    width = int(crosses.max()) if crosses.size else 0
    return Product(np.stack([row, k], axis=1), picks, width)


def cross_product(columns: Columns) -> Product:
    """Every output of the cross of ``columns``, in output order."""
    batch = columns.batch
    if all(w == 1 for w in columns.widths) and all(
            _one_per_row(rows, batch) for rows in columns.rows):
        indices = np.zeros((batch, 2), np.int64)
        if batch > 1:
            indices[:, 0] = np.arange(batch)
        return Product(indices, None, 1 if batch else 0)
    # (A negative batch from a bad shape is left to numpy, whose error it has always been.)
    if batch >= 0 and sum(f.size for f in columns.features) <= SMALL_ENTRIES:
        starts, counts = [], []
        for rows in columns.rows:
            start, count = _runs(rows.tolist(), batch)
            starts.append(start)
            counts.append(count)
        for w in columns.widths:
            starts.append([b * w for b in range(batch)])
            counts.append([w] * batch)
        per_row = [math.prod(row) for row in zip(*counts)]
        if sum(per_row) <= SMALL_OUTPUTS:
            return _product_small(starts, counts, per_row)
        shape = (len(counts), batch)
        return _product_numpy(np.array(starts, np.int64).reshape(shape),
                              np.array(counts, np.int64).reshape(shape), batch)
    start_arrays, count_arrays = [], []
    for rows in columns.rows:
        start_array, count_array = _runs_numpy(rows, batch)
        start_arrays.append(start_array)
        count_arrays.append(count_array)
    for w in columns.widths:
        start_arrays.append(np.arange(batch, dtype=np.int64) * w)
        count_arrays.append(np.full(batch, w, np.int64))
    shape = (len(count_arrays), batch)
    return _product_numpy(np.array(start_arrays, np.int64).reshape(shape),
                          np.array(count_arrays, np.int64).reshape(shape), batch)
