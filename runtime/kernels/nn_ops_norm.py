"""Batch normalization kernels: FusedBatchNorm{,V2,V3} and ``_FusedBatchNormEx``.

Inference (``is_training=False``) normalizes with the given mean and variance and passes them
through as ``batch_mean``/``batch_variance`` and the reserve spaces. Training mode normalizes with
the batch's own statistics; ``batch_variance`` is then the unbiased variance, blended with the
given running values by ``exponential_avg_factor``, and the reserve spaces hold the batch mean and
the biased variance. ``reserve_space_3`` is empty on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from runtime.errors import InvalidArgumentError
from runtime.kernels.math_ops_common import FLOAT32, Kernel, Tensor
from runtime.kernels.nn_ops_activation import fused_activation
from runtime.kernels.nn_ops_common import LOW_FLOATS
from runtime.kernels.registry import NodeContext, kernel

_CHANNEL_AXIS = {"NHWC": -1, "NDHWC": -1, "NCHW": 1, "NCDHW": 1}


def _batch_norm(node: NodeContext, with_side_inputs: bool) -> Kernel:
    fmt = str(node.attr("data_format", "NHWC"))
    if fmt not in _CHANNEL_AXIS:
        raise InvalidArgumentError(f"{node.op}: invalid data_format {fmt!r}", node=node.name,
                                   op=node.op)
    axis, rank = _CHANNEL_AXIS[fmt], len(fmt)
    reduce_axes = tuple(i for i in range(rank) if i != axis % rank)
    epsilon = float(node.attr("epsilon"))
    factor_avg = float(node.attr("exponential_avg_factor", 1.0))
    training = bool(node.attr("is_training"))
    v3 = node.op in ("FusedBatchNormV3", "_FusedBatchNormEx")  # these have reserve_space_3
    activation = None
    if with_side_inputs:
        mode = str(node.attr("activation_mode", "Identity"))
        activation = fused_activation(mode, 0.2)
    op = node.op

    def run(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, mean: np.ndarray,
            variance: np.ndarray, *side: np.ndarray) -> tuple[np.ndarray, ...]:
        if x.ndim != rank:
            raise InvalidArgumentError(
                f"{op}: input must be {rank}-dimensional for {fmt}, got {list(x.shape)}"
            )
        depth = x.shape[axis]
        stats_dtype = scale.dtype
        for name, value in (("scale", scale), ("offset", offset)):
            if value.shape != (depth,):
                raise InvalidArgumentError(
                    f"{op}: {name} must have shape [{depth}], got {list(value.shape)}"
                )
        if x.size == 0:
            # TF's convention for an empty batch: NaN statistics, zeroed reserve spaces.
            nan, zero = np.full(depth, np.nan, stats_dtype), np.zeros(depth, stats_dtype)
            empty = (x.copy(), nan, nan, zero, zero)
            return (*empty, np.zeros(0, dtype=stats_dtype)) if v3 else empty
        shape = [1] * rank
        shape[axis] = depth
        xc = x.astype(FLOAT32) if x.dtype in LOW_FLOATS else x
        if training:
            count = x.size // depth
            batch_mean = xc.mean(axis=reduce_axes, dtype=stats_dtype)
            centered = xc - batch_mean.reshape(shape)
            batch_var = np.square(centered).mean(axis=reduce_axes, dtype=stats_dtype)
            use_mean, use_var = batch_mean, batch_var
            unbiased = batch_var * stats_dtype.type(count / max(count - 1, 1))
            if factor_avg != 1.0:
                keep = stats_dtype.type(1.0 - factor_avg)
                new = stats_dtype.type(factor_avg)
                running_mean = keep * mean + new * batch_mean
                running_var = keep * variance + new * unbiased
            else:
                running_mean, running_var = batch_mean, unbiased
            outputs = (running_mean, running_var, batch_mean, batch_var)
        else:
            for name, value in (("mean", mean), ("variance", variance)):
                if value.shape != (depth,):
                    raise InvalidArgumentError(
                        f"{op}: {name} must have shape [{depth}], got {list(value.shape)}"
                    )
            use_mean, use_var = mean, variance
            outputs = (mean, variance, mean, variance)
        factor = scale / np.sqrt(use_var + stats_dtype.type(epsilon))
        y = xc * factor.reshape(shape).astype(xc.dtype, copy=False)
        y += (offset - use_mean * factor).reshape(shape).astype(xc.dtype, copy=False)
        if side:
            y += side[0]
        if activation is not None:
            y = activation(y)
        y = y.astype(x.dtype, copy=False)
        if v3:
            return (y, *outputs, np.zeros(0, dtype=stats_dtype))
        return (y, *outputs)

    return run


@kernel("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def fused_batch_norm(node: NodeContext) -> Kernel:
    return _batch_norm(node, with_side_inputs=False)


@kernel("_FusedBatchNormEx")
def fused_batch_norm_ex(node: NodeContext) -> Kernel:
    return _batch_norm(node, with_side_inputs=True)


# --- layer normalization ---------------------------------------------------------------------


def _last_axis_vector(value: object) -> np.ndarray | None:
    """A constant of shape [C] or [1, .., 1, C], as a [C] vector; else None."""
    if not isinstance(value, np.ndarray) or value.ndim < 1:
        return None
    if any(d != 1 for d in value.shape[:-1]):
        return None
    return value.reshape(-1)


@kernel("_FusedLayerNorm")
def fused_layer_norm(node: NodeContext) -> Kernel:
    """The layer-norm pattern that ``runtime.optimize.layer_norm`` fuses, with its arithmetic in
    the same order; the two means sum with one matrix-vector product each (BLAS) rather than a
    reduction over a short last axis.

    The pass only fuses ``scale`` and ``offset`` of shape [C] or [1, .., 1, C] (no more dims than
    ``x``); baked in as [C] vectors they broadcast exactly as before, and the kernel then works
    in place on its own temporaries."""
    epsilon = float(node.attr("epsilon"))
    weights_by_size: dict[tuple[int, np.dtype], tuple[np.ndarray, Any]] = {}

    def averaging(n: int, dtype: np.dtype) -> tuple[np.ndarray, Any]:
        """(w, divisor): the mean of a row r is (r @ w) / divisor. For n a power of two, w holds
        1/n itself (exact) and there is nothing left to divide."""
        if n and n & (n - 1) == 0:
            return np.full(n, 1.0 / n, dtype), None
        return np.ones(n, dtype), dtype.type(n)

    def normalize(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, vectors: bool) -> Tensor:
        dtype = x.dtype
        if x.ndim < 1 or dtype.kind != "f" or dtype in LOW_FLOATS:
            raise InvalidArgumentError(
                f"_FusedLayerNorm: input must be float32/float64 of rank >= 1, got {dtype} "
                f"{list(x.shape)}"
            )
        key = (x.shape[-1], dtype)
        found = weights_by_size.get(key)
        if found is None:
            found = weights_by_size.setdefault(key, averaging(*key))
        w, divisor = found
        mean = np.matmul(x, w)
        if divisor is not None:
            mean /= divisor
        mean = mean[..., None]
        centered = x - mean
        np.square(centered, out=centered)
        inv = np.matmul(centered, w)
        del centered
        if divisor is not None:
            inv /= divisor
        inv += dtype.type(epsilon)
        np.sqrt(inv, out=inv)
        np.reciprocal(inv, out=inv)
        inv = inv[..., None] * scale
        # Neg(mean) * inv + offset, exactly: (-a) * b + c == c - a * b in IEEE arithmetic.
        mean = mean * inv
        y = x * inv
        if not vectors:
            return y + (offset - mean)
        # [C] vectors: everything is x's shape, or 1 wide where scale or x has size 1.
        if offset.shape[-1] in (1, mean.shape[-1]):
            np.subtract(offset, mean, out=mean)
        else:
            mean = offset - mean
        if mean.shape[-1] in (1, y.shape[-1]):
            y += mean
            return y
        return y + mean

    def by_columns(x: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """``normalize`` for many short rows, on the transposed [C, rows] copy of ``x``: every
        broadcast then runs along contiguous rows of ``rows`` elements, where broadcasting
        along a short last axis is slow in numpy. Same operations, same order."""
        dtype = x.dtype
        n = x.shape[-1]
        count = dtype.type(n)
        cols = np.ascontiguousarray(x.reshape(-1, n).T)
        mean = np.add.reduce(cols, axis=0)
        mean /= count
        centered = cols - mean
        np.square(centered, out=centered)
        inv = np.add.reduce(centered, axis=0)
        del centered
        inv /= count
        inv += dtype.type(epsilon)
        np.sqrt(inv, out=inv)
        np.reciprocal(inv, out=inv)
        inv = scale * inv
        shift = mean * inv
        np.subtract(offset, shift, out=shift)
        cols *= inv
        cols += shift
        return np.ascontiguousarray(cols.T).reshape(x.shape)

    scale, offset = node.constant_input(1), node.constant_input(2)
    scale_v, offset_v = _last_axis_vector(scale), _last_axis_vector(offset)
    if scale_v is not None and offset_v is not None and scale_v.dtype == offset_v.dtype:
        rank = max(scale.ndim, offset.ndim)
        channels = scale_v.size if scale_v.size == offset_v.size else -1
        scale_c, offset_c = scale_v.reshape(-1, 1), offset_v.reshape(-1, 1)

        def baked(x: np.ndarray) -> Tensor:
            if x.ndim < rank:
                return normalize(x, scale, offset, False)  # the constants add dims to the result
            if (
                x.shape[-1] == channels <= _SHORT_ROW
                and x.size >= _MANY_ROWS * channels
                and x.dtype == scale_v.dtype
                and x.dtype.kind == "f"
                and x.dtype not in LOW_FLOATS
            ):
                return by_columns(x, scale_c, offset_c)
            return normalize(x, scale_v, offset_v, True)

        return node.bake(baked, 1, 2)
    return lambda x, scale, offset: normalize(x, scale, offset, False)


# Rows this short, this many of them: normalized in the transposed layout (see by_columns).
_SHORT_ROW = 64
_MANY_ROWS = 256
