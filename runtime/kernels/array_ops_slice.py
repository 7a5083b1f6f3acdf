"""CPU kernels: array_ops slicing — StridedSlice and Slice.

StridedSlice compiles its sparse slice spec (begin/end/strides plus the five masks) into a numpy
basic-indexing key — a tuple of slices, ints and ``None`` — and indexes with it, so the hot path is
one dict lookup and one ``x[key]``. The key depends only on the input's rank and the spec, never on
its dim sizes: Python slice semantics clamp out-of-range bounds exactly as TensorFlow's
canonicalization does (for both stride signs), so TensorFlow's own clamping needs no code here.
Keys are cached per (rank, begin, end, strides), since those usually come from constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.array_ops_common import shape_str
from runtime.kernels.registry import NodeContext, kernel

_CACHE_LIMIT = 64

SliceKey = tuple[Any, ...]  # of slice | int | None, ending in Ellipsis


def strided_slice_key(
    rank: int,
    begin: list[int],
    end: list[int],
    strides: list[int],
    begin_mask: int,
    end_mask: int,
    ellipsis_mask: int,
    new_axis_mask: int,
    shrink_axis_mask: int,
) -> tuple[SliceKey, list[tuple[int, int]]]:
    """The numpy key for a StridedSlice spec on an input of ``rank`` dims.

    Also returns, for each shrunk dim, (dense dim, index) so that an out-of-range index can be
    reported the way TensorFlow does. Validation follows TensorFlow's ``ValidateStridedSliceOp``.
    """
    if ellipsis_mask & (ellipsis_mask - 1):
        raise InvalidArgumentError("Multiple ellipses in slice spec not allowed")
    sparse_dims = len(strides)
    # New axes after the ellipsis do not consume input dims, so the ellipsis covers more.
    new_after_ellipsis, seen = 0, False
    for i in range(sparse_dims):
        if seen and new_axis_mask & (1 << i):
            new_after_ellipsis += 1
        if ellipsis_mask & (1 << i):
            seen = True
    if not seen:  # an implicit ellipsis at the end keeps any trailing dims whole
        ellipsis_mask |= 1 << sparse_dims
        sparse_dims += 1

    key: list[Any] = []
    shrunk: list[tuple[int, int]] = []
    dense = 0
    for i in range(sparse_dims):
        bit = 1 << i
        if ellipsis_mask & bit:
            stop = min(rank - (sparse_dims - i) + 1 + new_after_ellipsis, rank)
            while dense < stop:
                key.append(slice(None))
                dense += 1
        elif new_axis_mask & bit:
            key.append(None)
        else:
            if dense == rank:
                raise InvalidArgumentError(
                    f"Index out of range using input dim {dense}; input has only {rank} dims"
                )
            stride = strides[i]
            if stride == 0:
                raise InvalidArgumentError(f"strides[{dense}] must be non-zero")
            if shrink_axis_mask & bit:
                # A shrunk dim takes begin as an index whatever the masks say.
                if stride < 0:
                    raise InvalidArgumentError("only stride 1 allowed on non-range indexing.")
                key.append(begin[i])
                shrunk.append((dense, begin[i]))
            else:
                key.append(
                    slice(
                        None if begin_mask & bit else begin[i],
                        None if end_mask & bit else end[i],
                        stride,
                    )
                )
            dense += 1
    key.append(Ellipsis)  # always index to an array, never to a numpy scalar
    return tuple(key), shrunk


def _check_spec_shapes(begin: np.ndarray, end: np.ndarray, strides: np.ndarray) -> None:
    n = strides.size
    if (
        strides.ndim != 1
        or begin.ndim != 1
        or end.ndim != 1
        or begin.size != n
        or end.size != n
        or n >= 32
    ):
        raise InvalidArgumentError(
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            f"{shape_str(begin.shape)}, {shape_str(end.shape)}, and "
            f"{shape_str(strides.shape)} instead."
        )


@kernel("StridedSlice")
def strided_slice(node: NodeContext) -> Callable[..., np.ndarray]:
    masks = tuple(
        int(node.attr(name))
        for name in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    )
    cache: dict[tuple[Any, ...], tuple[SliceKey, list[tuple[int, int]]]] = {}

    def compile_key(
        rank: int, begin: np.ndarray, end: np.ndarray, strides: np.ndarray
    ) -> tuple[SliceKey, list[tuple[int, int]]]:
        _check_spec_shapes(begin, end, strides)
        return strided_slice_key(rank, begin.tolist(), end.tolist(), strides.tolist(), *masks)

    def index(x: np.ndarray, found: tuple[SliceKey, list[tuple[int, int]]]) -> np.ndarray:
        try:
            out: np.ndarray = x[found[0]]
            return out
        except IndexError:
            for dim, i in found[1]:
                if not -x.shape[dim] <= i < x.shape[dim]:
                    fwd = i + x.shape[dim] if i < 0 else i
                    raise InvalidArgumentError(
                        f"slice index {fwd} of dimension {dim} out of bounds."
                    ) from None
            raise

    def slice_(
        x: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray
    ) -> np.ndarray:
        spec = (x.ndim, begin.shape, begin.tobytes(), end.tobytes(), strides.tobytes())
        found = cache.get(spec)
        if found is None:
            found = compile_key(x.ndim, begin, end, strides)
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[spec] = found
        return index(x, found)

    spec = [node.constant_input(i) for i in (1, 2, 3)]
    if all(isinstance(v, np.ndarray) for v in spec):
        begin, end, strides = spec
        by_rank: dict[int, tuple[SliceKey, list[tuple[int, int]]]] = {}

        def constant_slice(x: np.ndarray) -> np.ndarray:
            found = by_rank.get(x.ndim)
            if found is None:
                found = by_rank.setdefault(x.ndim, compile_key(x.ndim, begin, end, strides))
            return index(x, found)

        return node.bake(constant_slice, 1, 2, 3)
    return slice_


@kernel("Slice")
def slice_op(node: NodeContext) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    def slice_(x: np.ndarray, begin: np.ndarray, size: np.ndarray) -> np.ndarray:
        rank = x.ndim
        if begin.ndim != 1 or size.ndim != 1 or begin.size != rank or size.size != rank:
            raise InvalidArgumentError(
                f"Expected begin and size arguments to be 1-D tensors of size {rank}, but got "
                f"shapes {shape_str(begin.shape)} and {shape_str(size.shape)} instead."
            )
        key: list[Any] = []
        for i, (b, s, d) in enumerate(zip(begin.tolist(), size.tolist(), x.shape)):
            if s == -1:
                s = d - b
            if not 0 <= b <= d:
                raise InvalidArgumentError(f"Expected begin[{i}] in [0, {d}], but got {b}")
            if not 0 <= s <= d - b:
                raise InvalidArgumentError(f"Expected size[{i}] in [0, {d - b}], but got {s}")
            key.append(slice(b, b + s))
        key.append(Ellipsis)
        out: np.ndarray = x[tuple(key)]
        return out

    return slice_
