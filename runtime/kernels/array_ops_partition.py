"""CPU kernels: DynamicPartition, DynamicStitch and ParallelDynamicStitch — how an embedding
lookup over a partitioned variable splits its ids by shard and puts the looked-up rows back in
the ids' order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.registry import NodeContext, kernel


def _slice_text(shape: tuple[int, ...], flat: int) -> str:
    """TensorFlow's ``SliceDebugString``: the coordinates of flat element ``flat``."""
    if not shape:
        return ""
    return "[" + ",".join(str(int(c)) for c in np.unravel_index(flat, shape)) + "]"


@kernel("DynamicPartition")
def dynamic_partition(node: NodeContext) -> Callable[..., Any]:
    num = int(node.attr("num_partitions"))

    def partition(data: np.ndarray, partitions: np.ndarray) -> np.ndarray | list[np.ndarray]:
        if data.shape[:partitions.ndim] != partitions.shape:
            raise InvalidArgumentError(
                "data.shape must start with partitions.shape, got data.shape = "
                f"{shape_str(data.shape)}, partitions.shape = {shape_str(partitions.shape)}"
            )
        ids = partitions.reshape(-1)
        bad = (ids < 0) | (ids >= num)
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidArgumentError(
                f"partitions{_slice_text(partitions.shape, i)} = {int(ids[i])} is not in "
                f"[0, {num})"
            )
        rows = data.reshape((ids.size,) + data.shape[partitions.ndim:])
        # A stable sort by partition keeps each partition's rows in input order.
        order = np.argsort(ids, kind="stable")
        bounds = np.cumsum(np.bincount(ids, minlength=num))[:-1]
        parts = np.split(rows[order], bounds)
        # A single-output node takes its array as it is, not in a list.
        return parts[0] if num == 1 else parts

    return partition


def _stitch(n: int) -> Callable[..., np.ndarray]:
    def stitch(*args: np.ndarray) -> np.ndarray:
        indices, data = args[:n], args[n:]
        index0, data0 = indices[0], data[0]
        extra = data0.shape[index0.ndim:]
        for i, (idx, d) in enumerate(zip(indices, data)):
            if d.shape[:idx.ndim] != idx.shape:
                raise InvalidArgumentError(
                    f"data[{i}].shape = {shape_str(d.shape)} does not start with "
                    f"indices[{i}].shape = {shape_str(idx.shape)}"
                )
            if i and d.shape[idx.ndim:] != extra:
                raise InvalidArgumentError(
                    f"Need data[0].shape[{index0.ndim}:] = data[{i}].shape[{idx.ndim}:], got "
                    f"data[0].shape = {shape_str(data0.shape)}, data[{i}].shape = "
                    f"{shape_str(d.shape)}, indices[0].shape = {shape_str(index0.shape)}, "
                    f"indices[{i}].shape = {shape_str(idx.shape)}"
                )
        for idx in indices:
            flat = idx.reshape(-1)
            if (flat < 0).any():
                raise InvalidArgumentError(f"indices[{int(np.argmax(flat < 0))}] is out of range")
        flat_ids = np.concatenate([idx.reshape(-1) for idx in indices]).astype(np.int64)
        rows = np.concatenate([d.reshape((idx.size,) + extra) for idx, d in zip(indices, data)])
        size = int(flat_ids.max()) + 1 if flat_ids.size else 0
        # Rows no index names stay zero (empty strings for a string tensor).
        if data0.dtype == object:
            merged = np.full((size,) + extra, b"", dtype=object)
        else:
            merged = np.zeros((size,) + extra, dtype=data0.dtype)
        # Inputs are copied in order, so of repeated indices the last one wins.
        _, last_reversed = np.unique(flat_ids[::-1], return_index=True)
        last = flat_ids.size - 1 - last_reversed
        merged[flat_ids[last]] = rows[last]
        return merged

    return stitch


@kernel("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch(node: NodeContext) -> Callable[..., Any]:
    # The parallel kernel copies inputs concurrently; copying them in order is one of the
    # outcomes it allows.
    return _stitch(int(node.attr("N")))
