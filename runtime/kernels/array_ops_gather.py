"""CPU kernels: array_ops indexing — GatherV2, Gather, OneHot, Where. GatherNd and ScatterNd live
in ``array_ops_gather_nd`` and Unique in ``array_ops_unique``, imported here for their
registrations.

Out-of-range indices are an error, as on TensorFlow's CPU (negative ones included: TensorFlow
does not wrap them the way numpy does).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels import array_ops_unique  # noqa: F401  (imported for its registration)
from runtime.kernels.array_ops_common import normalize_axis, scalar_int, shape_str
from runtime.kernels.array_ops_gather_nd import index_str
from runtime.kernels.registry import NodeContext, kernel


def _check_gather_indices(indices: np.ndarray, limit: int) -> None:
    if indices.size == 0:
        return
    if indices.min() >= 0 and indices.max() < limit:
        return
    flat = int(np.flatnonzero((indices < 0) | (indices >= limit))[0])
    value = indices.reshape(-1)[flat]
    raise InvalidArgumentError(
        f"indices[{index_str(indices.shape, flat)}] = {value} is not in [0, {limit})"
    )


_INT32 = np.dtype(np.int32)
_UINT32 = np.dtype(np.uint32)


def _take(params: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """np.take with TensorFlow's bounds (negative indices are errors); numpy's errors escape."""
    # The ndarray method: a third of np.take's cost on the short vectors of a request.
    take = params.take if isinstance(params, np.ndarray) else partial(np.take, params)
    # Seen as unsigned, negative int32 indices become huge, so numpy's own bounds check rejects
    # them too; other index types are checked for negatives first.
    if indices.dtype == _INT32:
        return take(indices.view(_UINT32), axis, None, "raise")
    if indices.size and indices.min() < 0:
        raise IndexError("negative index")
    return take(indices, axis, None, "raise")


def _gather(params: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    _check_gather_indices(indices, params.shape[axis])
    if batch_dims == 0:
        return np.take(params, indices, axis=axis)
    # Each of the leading batch_dims pairs one params slice with one indices slice.
    batch_shape = params.shape[:batch_dims]
    batch = int(np.prod(batch_shape, dtype=np.int64))
    p = params.reshape((batch,) + params.shape[batch_dims:])
    i = indices.reshape((batch,) + indices.shape[batch_dims:])
    inner_axis = axis - batch_dims + 1  # the gathered axis within p
    # Bring the gathered axis next to the batch axis, gather with advanced indexing (result:
    # batch, indices dims, params dims before the axis, params dims after), then reorder.
    p = np.moveaxis(p, inner_axis, 1)
    b = np.arange(batch).reshape((batch,) + (1,) * (i.ndim - 1))
    out = p[b, i]
    n_idx, n_before = i.ndim - 1, inner_axis - 1
    order = (
        [0]
        + list(range(1 + n_idx, 1 + n_idx + n_before))
        + list(range(1, 1 + n_idx))
        + list(range(1 + n_idx + n_before, out.ndim))
    )
    out = out.transpose(order)
    result: np.ndarray = out.reshape(batch_shape + out.shape[1:])
    return result


def _gather_v2(params: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    rank = params.ndim
    axis = normalize_axis(axis, rank)
    if batch_dims != 0:
        if batch_dims < 0:
            batch_dims += indices.ndim
        if not 0 <= batch_dims <= indices.ndim:
            raise InvalidArgumentError(
                f"Expected batch_dims in the range [{-indices.ndim}, {indices.ndim}], but got "
                f"{batch_dims}"
            )
        if batch_dims >= rank:
            raise InvalidArgumentError(
                f"batch_dims ({batch_dims}) must be less than rank(params) ({rank})."
            )
        if axis < batch_dims:
            raise InvalidArgumentError(
                f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis})."
            )
        for d in range(batch_dims):
            if params.shape[d] != indices.shape[d]:
                raise InvalidArgumentError(
                    f"params.shape[{d}]: {params.shape[d]} should be equal to "
                    f"indices.shape[{d}]: {indices.shape[d]}"
                )
    return _gather(params, indices, axis, batch_dims)


@kernel("GatherV2")
def gather_v2(node: NodeContext) -> Callable[..., np.ndarray]:
    batch_dims = int(node.attr("batch_dims"))

    def gather(params: np.ndarray, indices: np.ndarray, axis: np.ndarray) -> np.ndarray:
        return gather_on(params, indices, scalar_int(axis, "axis"))

    def gather_on(params: np.ndarray, indices: np.ndarray, a: int) -> np.ndarray:
        if batch_dims == 0:
            try:
                return _take(params, indices, a)
            except (IndexError, ValueError):
                pass  # the slow path below says what is wrong, as TensorFlow does
        return _gather_v2(params, indices, a, batch_dims)

    axis = node.constant_input(2)
    if isinstance(axis, np.ndarray) and axis.size == 1 and axis.dtype.kind in "iu":
        a = scalar_int(axis, "axis")
        fixed = node.constant_input(1)
        if (
            batch_dims == 0
            and isinstance(fixed, np.ndarray)
            and fixed.dtype.kind == "i"
            and (fixed.size == 0 or int(fixed.min()) >= 0)
        ):
            # Constant indices (a shape's dims, a table's rows): checked for negatives once,
            # numpy's own bounds check does the rest.
            known = fixed.astype(np.intp)

            def gather_fixed(params: np.ndarray) -> np.ndarray:
                try:
                    if isinstance(params, np.ndarray):
                        return params.take(known, a)
                except (IndexError, ValueError):
                    pass
                return gather_on(params, fixed, a)

            return node.bake(gather_fixed, 1, 2)
        return node.bake(lambda params, indices: gather_on(params, indices, a), 2)
    return gather


@kernel("_GatherWrapNegative")
def gather_wrap_negative(node: NodeContext) -> Callable[..., np.ndarray]:
    """GatherV2 (batch_dims 0) after ``indices < 0 ? indices + n : indices``, n the size of the
    gathered axis: numpy's own take, whose indices may be negative that way."""

    def gather(params: np.ndarray, indices: np.ndarray, axis: np.ndarray) -> np.ndarray:
        return gather_on(params, indices, scalar_int(axis, "axis"))

    def gather_on(params: np.ndarray, indices: np.ndarray, a: int) -> np.ndarray:
        if indices.dtype.kind in "iu":
            try:
                return np.take(params, indices, axis=a, mode="raise")
            except (IndexError, ValueError):
                pass
        n = params.shape[normalize_axis(a, params.ndim)]
        wrapped = np.where(indices < 0, indices + indices.dtype.type(n), indices)
        return _gather_v2(params, wrapped, a, 0)  # reports what is wrong, as GatherV2 would

    axis = node.constant_input(2)
    if isinstance(axis, np.ndarray) and axis.size == 1 and axis.dtype.kind in "iu":
        a = scalar_int(axis, "axis")
        return node.bake(lambda params, indices: gather_on(params, indices, a), 2)
    return gather


@kernel("Gather")
def gather_v1(node: NodeContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def gather(params: np.ndarray, indices: np.ndarray) -> np.ndarray:
        if params.ndim == 0:
            raise InvalidArgumentError("params must be at least 1 dimensional")
        try:
            return _take(params, indices, 0)
        except IndexError:
            return _gather_v2(params, indices, 0, 0)

    return gather


@kernel("OneHot")
def one_hot(node: NodeContext) -> Callable[..., np.ndarray]:
    axis = int(node.attr("axis"))

    def one_hot_(
        indices: np.ndarray, depth: np.ndarray, on_value: np.ndarray, off_value: np.ndarray
    ) -> np.ndarray:
        rank = indices.ndim
        if axis != -1 and not 0 <= axis <= rank:
            raise InvalidArgumentError(
                f"Expected axis to be -1 or between [0, {rank + 1}).  But received: {axis}"
            )
        if depth.ndim != 0:
            raise InvalidArgumentError(f"depth must be a scalar, but got: {shape_str(depth.shape)}")
        if on_value.ndim != 0:
            raise InvalidArgumentError(
                f"on_value must be a scalar, but got: {shape_str(on_value.shape)}"
            )
        if off_value.ndim != 0:
            raise InvalidArgumentError(
                f"off_value must be a scalar, but got: {shape_str(off_value.shape)}"
            )
        n = int(depth)
        if n < 0:
            raise InvalidArgumentError(f"depth must be non-negative, got: {n}")
        # Indices outside [0, depth), negative ones included, select no class at all.
        hot = indices[..., None] == np.arange(n, dtype=np.int64)
        out = np.where(hot, on_value, off_value)
        if axis != -1 and axis != rank:
            out = np.moveaxis(out, -1, axis)
        return out

    return one_hot_


@kernel("Where")
def where(node: NodeContext) -> Callable[[np.ndarray], np.ndarray]:
    def where_(condition: np.ndarray) -> np.ndarray:
        if condition.ndim == 0:
            raise InvalidArgumentError("WhereOp : Unhandled input dimensions: 0")
        return np.argwhere(condition).astype(np.int64, copy=False)

    return where_
