"""CPU kernels: DynamicPartition, DynamicStitch and ParallelDynamicStitch — how an embedding
lookup over a partitioned variable splits its ids by shard and puts the looked-up rows back in
the ids' order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


# Up to this many ids, Python lists beat numpy's fixed cost per call (about a microsecond): an
# embedding lookup partitions and stitches the few ids of a request.
SMALL_IDS = 64


def _partition_error(partitions: np.ndarray, num: int) -> InvalidArgumentError:
    ids = partitions.reshape(-1)
    i = int(np.argmax((ids < 0) | (ids >= num)))
    return InvalidArgumentError(
        f"partitions{_slice_text(partitions.shape, i)} = {int(ids[i])} is not in [0, {num})"
    )


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
        rows = data.reshape((ids.size,) + data.shape[partitions.ndim:])
        if ids.size <= SMALL_IDS:
            id_list = ids.tolist()
            if id_list and (min(id_list) < 0 or max(id_list) >= num):
                raise _partition_error(partitions, num)
            members: list[list[int]] = [[] for _ in range(num)]
            for i, p in enumerate(id_list):
                members[p].append(i)
            parts = [rows[m] for m in members]
        else:
            bad = (ids < 0) | (ids >= num)
            if bad.any():
                raise _partition_error(partitions, num)
            # A stable sort by partition keeps each partition's rows in input order.
            grouped = rows[np.argsort(ids, kind="stable")]
            ends = np.cumsum(np.bincount(ids, minlength=num)).tolist()
            parts = [grouped[start:end] for start, end in zip([0] + ends, ends)]
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
        if sum(idx.size for idx in indices) <= SMALL_IDS:
            return _stitch_small(indices, data, extra)
        for idx in indices:
            flat = idx.reshape(-1)
            if (flat < 0).any():
                raise InvalidArgumentError(f"indices[{int(np.argmax(flat < 0))}] is out of range")
        flat_ids = np.concatenate([idx.reshape(-1) for idx in indices]).astype(np.int64)
        rows = np.concatenate([d.reshape((idx.size,) + extra) for idx, d in zip(indices, data)])
        merged = _merged(int(flat_ids.max()) + 1 if flat_ids.size else 0, extra, data0.dtype)
        # Inputs are copied in order, so of repeated indices the last one wins.
        _, last_reversed = np.unique(flat_ids[::-1], return_index=True)
        last = flat_ids.size - 1 - last_reversed
        merged[flat_ids[last]] = rows[last]
        return merged

    return stitch


def _merged(size: int, extra: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    # Rows no index names stay zero (empty strings for a string tensor).
    if dtype == object:
        return np.full((size,) + extra, b"", dtype=object)
    return np.zeros((size,) + extra, dtype=dtype)


def _stitch_small(indices: Sequence[np.ndarray], data: Sequence[np.ndarray],
                  extra: tuple[int, ...]) -> np.ndarray:
    """The stitch of a few ids, over Python lists."""
    id_lists = [idx.reshape(-1).tolist() for idx in indices]
    for ids in id_lists:
        if ids and min(ids) < 0:
            first = next(i for i, v in enumerate(ids) if v < 0)
            raise InvalidArgumentError(f"indices[{first}] is out of range")
    every = [i for ids in id_lists for i in ids]
    merged = _merged(max(every) + 1 if every else 0, extra, data[0].dtype)
    if len(set(every)) == len(every):
        for ids, idx, d in zip(id_lists, indices, data):
            if ids:
                merged[ids] = d.reshape((idx.size,) + extra)
        return merged
    # Inputs are copied in order, so of repeated indices the last one wins.
    last = {index: position for position, index in enumerate(every)}
    rows = np.concatenate([d.reshape((idx.size,) + extra) for idx, d in zip(indices, data)])
    merged[list(last)] = rows[list(last.values())]
    return merged


@kernel("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch(node: NodeContext) -> Callable[..., Any]:
    # The parallel kernel copies inputs concurrently; copying them in order is one of the
    # outcomes it allows.
    return _stitch(int(node.attr("N")))
