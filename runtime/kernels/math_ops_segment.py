"""CPU kernels: math_ops segment reductions — Segment{Sum,Mean,Prod,Min,Max},
UnsortedSegment{Sum,Prod,Min,Max}; SparseSegment{Sum,Mean,SqrtN}[WithNumSegments] live in
``math_ops_sparse_segment``, imported here for its registrations.

Semantics follow ``core/kernels/segment_reduction_ops_impl.h``:

* sorted segments: the output has ``last id + 1`` rows; rows no id names are 0 (1 for Prod; 0
  for Min and Max too); ids must be non-decreasing and non-negative;
* unsorted segments: ``num_segments`` rows starting from the reduction's identity (0, 1, the
  type's lowest or highest value); negative ids are skipped, ids past the end are an error; rows
  are reduced in input order (``ufunc.at`` is sequential, like TensorFlow's loop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import math_ops_sparse_segment  # noqa: F401 - it registers kernels
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.math_ops_common import BFLOAT16
from runtime.kernels.registry import NodeContext, kernel


def _lowest(dtype: np.dtype) -> Any:
    if dtype == BFLOAT16 or dtype.kind == "f":
        return np.finfo(dtype).min
    return np.iinfo(dtype).min if dtype.kind in "iu" else False


def _highest(dtype: np.dtype) -> Any:
    if dtype == BFLOAT16 or dtype.kind == "f":
        return np.finfo(dtype).max
    return np.iinfo(dtype).max if dtype.kind in "iu" else True


def _index_text(shape: tuple[int, ...], flat: int) -> str:
    """TensorFlow's SliceDebugString: ``[1,2]`` for a flat position in ``shape``."""
    if not shape:
        return ""
    return "[" + ",".join(str(i) for i in np.unravel_index(flat, shape)) + "]"


# --- sorted segments ----------------------------------------------------------------------------


def _check_sorted_ids(data: np.ndarray, ids: np.ndarray) -> int:
    """Validate ``ids`` for a sorted segment op; returns the number of output rows."""
    if data.ndim < 1:
        raise InvalidArgumentError("input must be at least rank 1")
    if ids.ndim != 1:
        raise InvalidArgumentError("segment_ids should be a vector.")
    if ids.shape[0] != data.shape[0]:
        raise InvalidArgumentError(
            "segment_ids should be the same size as dimension 0 of input."
        )
    if ids.size == 0:
        return 0
    rows = int(ids[-1]) + 1
    if rows <= 0:
        raise InvalidArgumentError("segment ids must be >= 0")
    steps = np.diff(ids.astype(np.int64))
    if (steps < 0).any():
        first = int(np.flatnonzero(steps < 0)[0])
        if int(ids[first]) >= rows:
            raise InvalidArgumentError(
                f"Segment id {int(ids[first])} out of range [0, {rows}), possibly because "
                "'segment_ids' input is not sorted."
            )
        raise InvalidArgumentError("segment ids are not increasing")
    if int(ids[0]) < 0:
        raise InvalidArgumentError(
            f"Segment id {int(ids[0])} out of range [0, {rows}), possibly because "
            "'segment_ids' input is not sorted."
        )
    return rows


def _sorted_segments(
    ufunc: np.ufunc | None, empty: int = 0
) -> Callable[[NodeContext], Callable[..., np.ndarray]]:
    """Segment{Sum,Prod,Min,Max}, or SegmentMean with ``ufunc`` None; ``empty`` fills the rows
    of ids that do not occur."""

    def factory(node: NodeContext) -> Callable[..., np.ndarray]:
        def segment(data: np.ndarray, ids: np.ndarray) -> np.ndarray:
            rows = _check_sorted_ids(data, ids)
            out = np.full((rows,) + data.shape[1:], empty, data.dtype)
            if ids.size == 0:
                return out
            starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
            present = ids[starts]
            if ufunc is None:
                sums = np.add.reduceat(data, starts, axis=0)
                counts = np.diff(np.r_[starts, ids.size]).reshape((-1,) + (1,) * (data.ndim - 1))
                if data.dtype.kind in "iu":
                    # Integer means truncate, as C division does.
                    out[present] = (np.sign(sums) * (np.abs(sums) // counts)).astype(data.dtype)
                else:
                    out[present] = sums / counts.astype(data.dtype)
            else:
                out[present] = ufunc.reduceat(data, starts, axis=0)
            return out

        return segment

    return factory


kernel("SegmentSum")(_sorted_segments(np.add))
kernel("SegmentProd")(_sorted_segments(np.multiply, empty=1))
kernel("SegmentMin")(_sorted_segments(np.minimum))
kernel("SegmentMax")(_sorted_segments(np.maximum))
kernel("SegmentMean")(_sorted_segments(None))


# --- unsorted segments --------------------------------------------------------------------------


def _unsorted(ufunc: np.ufunc, identity: Callable[[np.dtype], Any]) -> Callable[..., Any]:
    def factory(node: NodeContext) -> Callable[..., np.ndarray]:
        def segment(data: np.ndarray, ids: np.ndarray, num_segments: np.ndarray) -> np.ndarray:
            if np.ndim(num_segments) != 0:
                raise InvalidArgumentError(
                    "num_segments should be a scalar, not shape "
                    f"{shape_str(np.shape(num_segments))}"
                )
            if data.shape[: ids.ndim] != ids.shape:
                raise InvalidArgumentError(
                    f"data.shape = {shape_str(data.shape)} does not start with "
                    f"segment_ids.shape = {shape_str(ids.shape)}"
                )
            rows = int(num_segments)
            if rows < 0:
                raise InvalidArgumentError(
                    f"Input num_segments == {rows} must not be negative."
                )
            inner = data.shape[ids.ndim:]
            out = np.full((rows,) + inner, identity(data.dtype), data.dtype)
            if data.size == 0:
                return out
            flat_ids = ids.reshape(-1)
            bad = flat_ids >= rows
            if bad.any():
                at = int(np.flatnonzero(bad)[0])
                raise InvalidArgumentError(
                    f"segment_ids{_index_text(ids.shape, at)} = {int(flat_ids[at])} is out of "
                    f"range [0, {rows})"
                )
            keep = flat_ids >= 0
            values = data.reshape((-1,) + inner)
            ufunc.at(out, flat_ids[keep], values[keep])
            return out

        return segment

    return factory


kernel("UnsortedSegmentSum")(_unsorted(np.add, lambda dtype: 0))
kernel("UnsortedSegmentProd")(_unsorted(np.multiply, lambda dtype: 1))
kernel("UnsortedSegmentMax")(_unsorted(np.maximum, _lowest))
kernel("UnsortedSegmentMin")(_unsorted(np.minimum, _highest))
