"""CPU kernels: SparseSegment{Sum,Mean,SqrtN}[WithNumSegments], the embedding-bag reductions
behind feature columns (``core/kernels/segment_reduction_ops_impl.h``).

They reduce ``data[indices]`` by sorted ids, summing in TensorFlow's order (the first ``n % 8``
rows, or 8 or 9, then blocks of 8, each block summed on its own) and scaling a mean by ``1/n``
below 10 rows and dividing by ``n`` from 10 on: float results match bit for bit.

Valid inputs take a vectorized path that adds in the same order: every segment (or group of at
most 9 rows) at once, left to right with ``np.add.accumulate`` (``np.add.reduceat`` will not
do: its float loop adds the rows after the first pairwise). Invalid inputs run the per-segment
loop, which raises what TensorFlow says for the first bad segment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.math_ops_common import BFLOAT16, FLOAT32
from runtime.kernels.registry import NodeContext, kernel

# --- the vectorized path ------------------------------------------------------------------------


def _running_sums(
    rows: np.ndarray, starts: np.ndarray, counts: np.ndarray, longest: int
) -> np.ndarray:
    """Per run i, ``rows[starts[i]] + rows[starts[i] + 1] + ...`` over ``counts[i]`` rows
    (``longest`` at most), added left to right."""
    if counts.size * longest <= 2 * rows.shape[0] + 64:
        # Padded to the longest run, a run's prefix sums are sequential (accumulate never sums
        # pairwise), and the padding after its end never reaches its sum.
        padded = rows.take(starts[:, None] + np.arange(longest), axis=0, mode="clip")
        prefix = np.add.accumulate(padded, axis=1, dtype=rows.dtype)
        summed: np.ndarray = prefix[np.arange(counts.size), counts - 1]
        return summed
    # Longest runs first, so that the runs still going at step k are a prefix: slices, not masks.
    order = np.argsort(-counts, kind="stable")
    first = starts[order]
    total = rows[first]
    live = counts.size
    for k, ended in enumerate(np.bincount(counts)[1:-1].tolist(), 1):
        live -= ended  # runs of k rows are done
        total[:live] += rows[first[:live] + k]
    result: np.ndarray = np.empty_like(total)
    result[order] = total
    return result


def _sums_in_tensorflow_order(
    rows: np.ndarray, starts: np.ndarray, counts: np.ndarray, longest: int
) -> np.ndarray:
    """Each segment's sum grouped as ``_sum_in_tensorflow_order`` groups it."""
    if longest <= 9:  # the head group covers the whole segment
        return _running_sums(rows, starts, counts, longest)
    head = counts & 7
    head[head == 0] = 8
    head[head == 1] = 9
    np.minimum(head, counts, out=head)
    groups = (counts - head) // 8 + 1
    first = np.cumsum(groups) - groups
    owner = np.repeat(np.arange(counts.size), groups)
    k = np.arange(owner.size) - first[owner]  # a group's place within its segment
    group_starts = starts[owner] + np.where(k == 0, 0, head[owner] + 8 * (k - 1))
    group_counts = np.where(k == 0, head[owner], 8)
    sums = _running_sums(rows, group_starts, group_counts, 9)
    return _running_sums(sums, first, groups, int(groups.max()))


# (dtype, mode) -> for n up to 9, what ``_reduce`` multiplies the sum of n rows by.
_FACTORS: dict[tuple[np.dtype, str], np.ndarray] = {}


def _scale(sums: np.ndarray, counts: np.ndarray, longest: int, mode: str) -> None:
    """Mean or SqrtN in place, as ``_reduce`` scales one segment; 1-row segments stay as they
    are."""
    one = sums.dtype.type(1)
    factors = _FACTORS.get((sums.dtype, mode))
    if factors is None:
        factors = np.array([one] + [one / _divisor(one, n, mode) for n in range(1, 10)], sums.dtype)
        _FACTORS[(sums.dtype, mode)] = factors
    shape = (-1,) + (1,) * (sums.ndim - 1)
    if longest < 10:
        short, factor = counts > 1, factors[counts]
    else:
        short, factor = (counts > 1) & (counts < 10), factors[np.minimum(counts, 9)]
    np.multiply(sums, factor.reshape(shape), out=sums, where=short.reshape(shape))
    if longest >= 10:
        long = np.flatnonzero(counts >= 10)
        divisors = [_divisor(one, n, mode) for n in counts[long].tolist()]
        sums[long] /= np.array(divisors, sums.dtype).reshape(shape)


# Each signed index type's unsigned twin and the largest limit the twin can check alone.
_UNSIGNED: dict[np.dtype, tuple[np.dtype, int]] = {
    np.dtype(np.int32): (np.dtype(np.uint32), 2**31 - 1),
    np.dtype(np.int64): (np.dtype(np.uint64), 2**63 - 1),
}


def _in_range(indices: np.ndarray, limit: int) -> bool:
    """Whether every index is in ``[0, limit)``."""
    unsigned = _UNSIGNED.get(indices.dtype)
    if unsigned is not None and limit <= unsigned[1]:
        # Seen as unsigned, negative indices are huge: one reduction checks both ends.
        return int(indices.view(unsigned[0]).max()) < limit
    return int(indices.min()) >= 0 and int(indices.max()) < limit


def _fast(
    data: np.ndarray, indices: np.ndarray, ids: np.ndarray, rows: int, mode: str
) -> np.ndarray | None:
    """The result for valid, non-empty input, or None where the loop must say what is wrong
    (or, for an integer mean, round as it does)."""
    work = FLOAT32 if data.dtype == BFLOAT16 else data.dtype
    if data.ndim == 0 or (mode != "sum" and work.kind != "f"):
        return None
    if int(ids[0]) < 0 or not _in_range(indices, data.shape[0]):
        return None
    # count_nonzero: a fraction of the cost of any() on short arrays.
    if not np.count_nonzero(ids[1:] <= ids[:-1]):  # one row a segment: no sums, no scaling
        if rows == ids.size and int(ids[-1]) == rows - 1:  # and every segment present
            dense: np.ndarray = data.take(indices, axis=0)
            return dense
        out = np.zeros((rows,) + data.shape[1:], data.dtype)
        out[ids] = data[indices]
        return out
    if np.count_nonzero(ids[1:] < ids[:-1]):
        return None
    edges = np.empty(ids.size, bool)
    edges[0] = True
    np.not_equal(ids[1:], ids[:-1], out=edges[1:])
    starts = np.flatnonzero(edges)
    counts = np.empty_like(starts)
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = ids.size - starts[-1]
    longest = int(counts.max())
    picked = data[indices].astype(work, copy=False)
    sums = _sums_in_tensorflow_order(picked, starts, counts, longest)
    if mode != "sum":
        _scale(sums, counts, longest, mode)
    if starts.size == rows:  # every segment present, in order
        return sums.astype(data.dtype, copy=False)
    out = np.zeros((rows,) + data.shape[1:], data.dtype)
    out[ids[starts]] = sums
    return out


# --- the per-segment loop: the reference, and what reports bad input ---------------------------


def _sequential_sum(rows: np.ndarray) -> np.ndarray:
    # Left to right, as C++ evaluates ``a + b + c``; numpy's sum is pairwise along a
    # contiguous axis.
    total: np.ndarray = rows[0].copy()
    for row in rows[1:]:
        total += row
    return total


def _sum_in_tensorflow_order(rows: np.ndarray) -> np.ndarray:
    """The sum of ``rows`` grouped as TensorFlow's SparseSegment kernels group it: the first
    ``n % 8`` rows (8 for 0, 9 for 1), then each following block of 8 summed on its own."""
    n = rows.shape[0]
    head = n & 7
    head = 8 if head == 0 else 9 if head == 1 else head
    total = _sequential_sum(rows[:head])
    for start in range(head, n, 8):
        total += _sequential_sum(rows[start:start + 8])
    return total


def _reduce(rows: np.ndarray, mode: str) -> np.ndarray:
    n = rows.shape[0]
    if n == 1:
        first: np.ndarray = rows[0]
        return first
    total = _sum_in_tensorflow_order(rows)
    if mode == "sum":
        return total
    one = rows.dtype.type(1)
    # Short segments multiply by a reciprocal, long ones divide: TensorFlow's rounding.
    scale = _divisor(one, n, mode)
    out: np.ndarray = total * (one / scale) if n < 10 else total / scale
    return out


def _divisor(one: Any, n: int, mode: str) -> Any:
    """A mean's ``n``, or SqrtN's ``sqrt(n)``, in the type of ``one``."""
    return type(one)(n if mode == "mean" else np.sqrt(np.float64(n)))


def _loop(
    data: np.ndarray, indices: np.ndarray, ids: np.ndarray, rows: int, mode: str
) -> np.ndarray:
    out = np.zeros((rows,) + data.shape[1:], data.dtype)
    work = FLOAT32 if data.dtype == BFLOAT16 else data.dtype
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], ids.size]
    limit = data.shape[0]
    for start, end in zip(starts.tolist(), ends.tolist()):
        index = int(ids[start])
        if end < ids.size and int(ids[end]) < index:
            raise InvalidArgumentError("segment ids are not increasing")
        if not 0 <= index < rows:
            raise InvalidArgumentError(
                f"Segment id {index} out of range [0, {rows}), possibly because "
                "'segment_ids' input is not sorted."
            )
        picked = indices[start:end]
        bad = (picked < 0) | (picked >= limit)
        if bad.any():
            at = start + int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(
                f"Bad: indices[{at}] == {int(indices[at])} out of range [0, {limit})"
            )
        out[index] = _reduce(data[picked].astype(work, copy=False), mode)
    return out


# --- the kernels --------------------------------------------------------------------------------


def _sparse_segments(mode: str, with_num_segments: bool) -> Callable[..., Any]:
    def factory(node: NodeContext) -> Callable[..., np.ndarray]:
        def segment(data: np.ndarray, indices: np.ndarray, ids: np.ndarray,
                    *num_segments: np.ndarray) -> np.ndarray:
            rows = -1
            if with_num_segments:
                count = num_segments[0]
                if np.ndim(count) != 0:
                    raise InvalidArgumentError(
                        "num_segments should be a scalar, not shape "
                        f"{shape_str(np.shape(count))}"
                    )
                rows = int(count)
                if rows < 0:
                    raise InvalidArgumentError("segment ids must be >= 0")
            if indices.ndim != 1:
                raise InvalidArgumentError("indices should be a vector.")
            if ids.ndim != 1:
                raise InvalidArgumentError("segment_ids should be a vector.")
            if indices.size != ids.size:
                raise InvalidArgumentError("segment_ids and indices should have same size.")
            last = int(ids[-1]) + 1 if ids.size else 0
            if with_num_segments:
                if rows < last:
                    raise InvalidArgumentError("segment ids must be < num_segments")
            else:
                rows = last
            if rows < 0:
                raise InvalidArgumentError("segment ids must be >= 0")
            if ids.size == 0:
                return np.zeros((rows,) + data.shape[1:], data.dtype)
            if rows == 0:
                raise InvalidArgumentError("segment ids must be >= 0")
            out = _fast(data, indices, ids, rows, mode)
            return _loop(data, indices, ids, rows, mode) if out is None else out

        return segment

    return factory


for _mode, _name in (("sum", "Sum"), ("mean", "Mean"), ("sqrtn", "SqrtN")):
    kernel(f"SparseSegment{_name}")(_sparse_segments(_mode, False))
    kernel(f"SparseSegment{_name}WithNumSegments")(_sparse_segments(_mode, True))
